"""CumSum / CumProd over an axis given at run time comes back as one node
(codegen/onnx/passes/cumulative.py): the same written model gives onnxruntime's outputs on
the original for every axis value, with no more nodes than it."""

import numpy as np
import pytest

from tests.helpers.onnx_export import export, model_opset, node_cases, round_trip_case

ort = pytest.importorskip("onnxruntime")


def test_node_case_comes_back_as_one():
    name = "test_cumsum_2d_negative_axis"
    case = node_cases({"cumsum": [name]})[name]
    result = round_trip_case(case)
    assert result["status"] == "pass", result["message"]
    assert result["nodes_out"] <= result["nodes_in"], result
    assert [n.op_type for n in export(case.model, model_opset(case.model)).graph.node] == [
        "CumSum"]


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_every_axis_value_alike(dtype):
    from onnx import TensorProto, helper

    kind = TensorProto.INT32 if dtype == "int32" else TensorProto.INT64
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], exclusive=1, reverse=1)
    graph = helper.make_graph([node], "c", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
        helper.make_tensor_value_info("axis", kind, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    written = export(model, 18)
    assert [n.op_type for n in written.graph.node] == ["CumSum"]
    want_run = ort.InferenceSession(model.SerializeToString())
    got_run = ort.InferenceSession(written.SerializeToString())
    x = np.random.default_rng(0).normal(size=(2, 3, 4)).astype("float32")
    for axis in range(-3, 3):
        feeds = {"x": x, "axis": np.asarray(axis, dtype)}
        np.testing.assert_allclose(got_run.run(None, feeds)[0], want_run.run(None, feeds)[0],
                                   rtol=1e-6, atol=1e-6)


def _chain(wrap: bool, swap: bool):
    """Where(axis' == 0, CumSum along 0, CumSum along 1), axis' wrapped by Mod(axis, 2) or
    not, the branches swapped or not."""
    picked = ["c1", "c0"] if swap else ["c0", "c1"]
    rows = [("CumSum", ["x", "a0"], "c0"), ("CumSum", ["x", "a1"], "c1"),
            ("Mod", ["axis", "two"], "m"), ("Equal", ["m" if wrap else "axis", "zero"], "is0"),
            ("Where", ["is0", *picked], "y")]
    from msc.codegen.onnx.node import OnnxNode

    return [OnnxNode(op, ins, [out], name=out) for op, ins, out in rows]


@pytest.mark.parametrize("wrap, swap, folds", [(True, False, True), (True, True, False),
                                               (False, False, False)])
def test_only_the_right_choice_folds(wrap, swap, folds):
    """Unwrapped, axis -2 picks the CumSum along 1: wrong for one axis value, no fold."""
    from msc.codegen.onnx.passes.cumulative import fold_runtime_cumulative
    from msc.codegen.onnx.passes.walk import Walk

    consts = {"a0": np.asarray([0]), "a1": np.asarray([1]), "zero": np.asarray(0),
              "two": np.asarray(2)}
    shapes, dtypes = {"x": [2, 3], "axis": []}, {"x": "float32", "axis": "int64"}
    walk = Walk.of(_chain(wrap, swap), consts, {"y"}, shapes, dtypes, 18)
    fold_runtime_cumulative(walk)
    last = walk.graph.nodes[-1]
    assert (last.op_type == "CumSum") == folds
    if folds:
        assert last.inputs == ["x", "axis"]
