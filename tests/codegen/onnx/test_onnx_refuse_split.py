"""A Split to sizes given at run time comes back as one Split node
(codegen/onnx/passes/split.py): outputs equal to onnxruntime's on the original for several
sizes, no more nodes than it."""

import numpy as np
import pytest

from tests.helpers.onnx_export import export, model_opset, node_cases, round_trip_case

ort = pytest.importorskip("onnxruntime")

NAMES = ["test_split_variable_parts_2d_opset13", "test_split_zero_size_splits_opset18"]


@pytest.mark.parametrize("name", NAMES)
def test_node_case_comes_back_as_one(name):
    case = node_cases({"split": [name]})[name]
    result = round_trip_case(case)
    assert result["status"] == "pass", result["message"]
    assert result["nodes_out"] <= result["nodes_in"], result
    assert [n.op_type for n in export(case.model, model_opset(case.model)).graph.node] == [
        "Split"]


def test_every_valid_split_alike():
    from onnx import TensorProto, helper

    node = helper.make_node("Split", ["x", "split"], ["a", "b", "c"], axis=1)
    graph = helper.make_graph([node], "s", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
        helper.make_tensor_value_info("split", TensorProto.INT64, [3])],
        [helper.make_tensor_value_info(v, TensorProto.FLOAT, None) for v in "abc"])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    written = export(model, 18)
    assert [n.op_type for n in written.graph.node] == ["Split"]
    want_run = ort.InferenceSession(model.SerializeToString())
    got_run = ort.InferenceSession(written.SerializeToString())
    x = np.arange(12, dtype="float32").reshape(2, 6)
    for sizes in ([1, 2, 3], [0, 6, 0], [3, 3, 0], [2, 2, 2]):
        feeds = {"x": x, "split": np.asarray(sizes, "int64")}
        for got, want in zip(got_run.run(None, feeds), want_run.run(None, feeds)):
            np.testing.assert_array_equal(got, want)
