"""A Reshape to a shape given at run time (its 0s and -1 resolved by the importer) comes back
as one Reshape(x, shape) (codegen/onnx/passes/reshape.py): outputs equal to the case's
(onnxruntime's on the original), no more nodes than it."""

import numpy as np
import pytest

from tests.helpers.onnx_export import export, model_opset, node_cases, round_trip_case

ort = pytest.importorskip("onnxruntime")

NAMES = ["test_reshape_zero_and_negative_dim", "test_reshape_extended_dims",
         "test_reshape_one_dim", "test_reshape_allowzero_reordered"]


@pytest.fixture(scope="module")
def cases():
    return node_cases({"reshape": NAMES})


@pytest.mark.parametrize("name", NAMES)
def test_run_time_reshape_comes_back_as_one(cases, name):
    result = round_trip_case(cases[name])
    assert result["status"] == "pass", result["message"]
    assert result["nodes_out"] <= result["nodes_in"], result
    model = cases[name].model
    nodes = export(model, model_opset(model)).graph.node
    assert [n.op_type for n in nodes] == ["Reshape"]


@pytest.mark.parametrize("target", [[0, -1], [-1, 4], [3, 0, 2, 2], [0, 0, 4]])
def test_every_valid_target_reshapes_alike(target):
    """One written model, run on several targets (0 copies, -1 infers) against onnxruntime
    on the original."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])], "r",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2, 4]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [len(target)])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    written = export(model, 18)
    assert [n.op_type for n in written.graph.node] == ["Reshape"]
    feeds = {"x": np.arange(24, dtype="float32").reshape(3, 2, 4),
             "shape": np.asarray(target, "int64")}
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    got = ort.InferenceSession(written.SerializeToString()).run(None, feeds)[0]
    np.testing.assert_array_equal(got, want)
