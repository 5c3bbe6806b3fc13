"""ONNX reductions, scans, linear algebra, windows and losses against onnxruntime."""

import numpy as np
import pytest
from onnx import helper

from msc.frontends.onnx.converters_math import REDUCE
from msc.frontends.onnx.testing import assert_matches_ort, graph_model, node_model

RNG = np.random.default_rng(3)
X = RNG.standard_normal((3, 4, 5)).astype("float32")
TOL = {"rtol": 1e-4, "atol": 1e-5}


@pytest.mark.parametrize("op", sorted(REDUCE) + ["ReduceLogSumExp"])
@pytest.mark.parametrize("axes,keepdims", [((1,), 1), ((0, -1), 0), (None, 1)])
def test_reduce_axes_input(op, axes, keepdims):
    x = np.abs(X) + 0.1 if op == "ReduceLogSum" else X
    inits = {"axes": None if axes is None else np.array(axes, "int64")}
    model = node_model(op, {"x": x}, initializers=inits, keepdims=keepdims)
    assert_matches_ort(model, {"x": x}, **TOL)


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceMax"])
def test_reduce_axes_attribute_opset13(op):
    model = node_model(op, {"x": X}, opset=13, axes=[1, 2], keepdims=0)
    assert_matches_ort(model, {"x": X}, **TOL)


def test_reduce_noop_with_empty_axes():
    model = node_model("ReduceSum", {"x": X}, noop_with_empty_axes=1)
    assert_matches_ort(model, {"x": X})


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("attrs", [{"axis": 1}, {"axis": -1, "keepdims": 0},
                                   {"axis": 0, "select_last_index": 1}])
def test_arg_reduce(op, attrs):
    x = np.round(X)  # ties, so select_last_index matters
    assert_matches_ort(node_model(op, {"x": x}, **attrs), {"x": x})


@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum(exclusive, reverse):
    model = node_model("CumSum", {"x": X}, initializers={"a": np.array(1, "int64")},
                       exclusive=exclusive, reverse=reverse)
    assert_matches_ort(model, {"x": X}, **TOL)


@pytest.mark.parametrize("a_shape,b_shape", [((3, 4), (4, 5)), ((2, 3, 4), (4, 6)),
                                             ((2, 1, 3, 4), (5, 4, 2)), ((4,), (4, 3))])
def test_matmul(a_shape, b_shape):
    feeds = {"a": RNG.standard_normal(a_shape).astype("float32"),
             "b": RNG.standard_normal(b_shape).astype("float32")}
    assert_matches_ort(node_model("MatMul", feeds), feeds, **TOL)


@pytest.mark.parametrize("attrs,c_shape", [
    ({}, (5,)), ({"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}, (3, 5)),
    ({"transB": 1}, None),
])
def test_gemm(attrs, c_shape):
    a = RNG.standard_normal((4, 3) if attrs.get("transA") else (3, 4)).astype("float32")
    b = RNG.standard_normal((5, 4) if attrs.get("transB") else (4, 5)).astype("float32")
    inits = {"b": b, "c": None if c_shape is None else
             RNG.standard_normal(c_shape).astype("float32")}
    assert_matches_ort(node_model("Gemm", {"a": a}, initializers=inits, **attrs), {"a": a},
                       **TOL)


@pytest.mark.parametrize("equation,shapes", [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ij->ji", [(3, 4)]), ("i,i", [(5,), (5,)]),
])
def test_einsum(equation, shapes):
    feeds = {f"x{k}": RNG.standard_normal(s).astype("float32") for k, s in enumerate(shapes)}
    assert_matches_ort(node_model("Einsum", feeds, equation=equation), feeds, **TOL)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows(op, periodic):
    model = graph_model([helper.make_node(op, ["n"], ["y"], periodic=periodic)], {}, ["y"],
                        initializers={"n": np.array(10, "int64")})
    assert_matches_ort(model, {}, **TOL)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss(reduction):
    logp = np.log(np.abs(RNG.standard_normal((4, 3, 2))) + 0.1).astype("float32")
    target = np.array([[0, 2], [1, 1], [2, 0], [0, 1]], "int64")
    feeds = {"p": logp, "t": target}
    inits = {"w": np.array([0.5, 1.0, 2.0], "float32")}
    model = node_model("NegativeLogLikelihoodLoss", feeds, initializers=inits,
                       reduction=reduction, ignore_index=1)
    assert_matches_ort(model, feeds, **TOL)


def test_softmax_cross_entropy_loss():
    scores = RNG.standard_normal((4, 3)).astype("float32")
    labels = np.array([0, 2, 1, 1], "int64")
    model = node_model("SoftmaxCrossEntropyLoss", {"s": scores, "l": labels}, 2)
    assert_matches_ort(model, {"s": scores, "l": labels}, **TOL)


def test_cumsum_runtime_axis():
    feeds = {"x": X, "a": np.array(-1, "int64")}
    assert_matches_ort(node_model("CumSum", feeds, reverse=1), feeds, **TOL)


def test_topk_constant_k():
    model = node_model("TopK", {"x": X}, 2, initializers={"k": np.array([2], "int64")},
                       axis=1, largest=0)
    assert_matches_ort(model, {"x": X})


def test_topk_v1_attribute():
    assert_matches_ort(node_model("TopK", {"x": X}, 2, opset=9, k=3, axis=-1), {"x": X})
