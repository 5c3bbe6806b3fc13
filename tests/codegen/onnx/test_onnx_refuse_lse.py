"""ReduceLogSumExp the importer spells out (max-shifted, infinity-guarded) comes back as one
node (codegen/onnx/passes/lse.py): outputs equal to onnxruntime on the original, no more
nodes than it."""

import numpy as np
import pytest

from tests.helpers.onnx_export import export, model_opset, node_cases, round_trip_case

ort = pytest.importorskip("onnxruntime")

NAMES = ["test_reduce_log_sum_exp_default_axes_keepdims_random",  # all axes
         "test_reduce_log_sum_exp_keepdims_random",  # axes given at run time
         "test_reduce_log_sum_exp_do_not_keepdims_random",  # ... and the kept dims reshape
         "test_reduce_log_sum_exp_empty_set"]


@pytest.fixture(scope="module")
def cases():
    return node_cases({"reduce_log_sum_exp": NAMES})


@pytest.mark.parametrize("name", NAMES)
def test_log_sum_exp_comes_back_as_one(cases, name):
    result = round_trip_case(cases[name])
    assert result["status"] == "pass", result["message"]
    assert result["nodes_out"] <= result["nodes_in"], result
    model = cases[name].model
    assert [n.op_type for n in export(model, model_opset(model)).graph.node] == [
        "ReduceLogSumExp"]


def _model(opset: int, keepdims: int):
    from onnx import TensorProto, helper

    node = helper.make_node("ReduceLogSumExp", ["x"], ["y"], axes=[0, 2], keepdims=keepdims)
    graph = helper.make_graph([node], "lse", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [3, 4, 5])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("keepdims", [0, 1])
def test_constant_axes_as_an_attr_at_opset_13(keepdims):
    model = _model(13, keepdims)
    x = np.random.default_rng(0).normal(size=(3, 4, 5)).astype("float32") * 30
    x[1, :, 2] = -np.inf  # a row whose max is infinite: the guard's case
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    written = export(model, 13)
    assert [n.op_type for n in written.graph.node] == ["ReduceLogSumExp"]
    got = ort.InferenceSession(written.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _spelled(log_axes: str):
    """The importer's spelling over x [3, 4], the max over axes ``a``, the log-sum over
    ``log_axes``."""
    rows = [("ReduceMax", ["x", "a"], "m", {"keepdims": 1}), ("IsInf", ["m"], "i", {}),
            ("Where", ["i", "zero", "m"], "g", {}), ("Sub", ["x", "g"], "d", {}),
            ("Exp", ["d"], "e", {}), ("ReduceLogSum", ["e", log_axes], "l", {"keepdims": 1}),
            ("IsInf", ["m"], "i2", {}), ("Where", ["i2", "zero", "m"], "g2", {}),
            ("Add", ["l", "g2"], "y", {})]
    from msc.codegen.onnx.node import OnnxNode

    return [OnnxNode(op, ins, [out], name=out, attrs=attrs) for op, ins, out, attrs in rows]


def test_different_axes_stay_spelled_out():
    from msc.codegen.onnx.passes.lse import fold_log_sum_exp
    from msc.codegen.onnx.passes.walk import Walk

    consts = {"a": np.asarray([1]), "b": np.asarray([0]), "zero": np.asarray(0.0, "float32")}
    shapes, dtypes = {"x": [3, 4]}, {"x": "float32"}
    same = Walk.of(_spelled("a"), consts, {"y"}, shapes, dtypes, 18)
    fold_log_sum_exp(same)
    assert [(n.op_type, n.inputs) for n in same.graph.nodes] == [("ReduceLogSumExp", ["x", "a"])]
    other = Walk.of(_spelled("b"), consts, {"y"}, shapes, dtypes, 18)
    fold_log_sum_exp(other)
    assert len(other.graph) == len(_spelled("b"))
    assert "ReduceLogSumExp" not in [n.op_type for n in other.graph.nodes]
