"""``graph.sources``: which joint each node of the source model became, so that what a
reference run names per node (onnxruntime's tensors, torch.fx's nodes) lands on the graph."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from torch import nn

from msc.errors import ValidationError
from msc.frontends.translate import from_onnx, from_relax, from_torch
from tests.helpers.relax_modules import RELU_SCRIPT


def _onnx_model():
    """Conv (named) + Add of a bias (unnamed: known by its output) -> Relu (named)."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal((1, 4, 1, 1)).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="/stem/conv/Conv"),
             helper.make_node("Add", ["c", "b"], ["cb"]),
             helper.make_node("Relu", ["cb"], ["y"], name="/stem/act/Relu")]
    info = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "g", [info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [info("y", TensorProto.FLOAT, [1, 4, 6, 6])], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_onnx_nodes_map_to_the_joints_they_became():
    graph, _ = from_onnx(_onnx_model())
    assert graph.inspect()["nodes"] == {"total": 3, "input": 1, "msc.conv2d_bias": 1,
                                        "nn.relu": 1}
    # the conv and the bias add fused into one joint; the unnamed Add is known by its output
    assert dict(graph.sources) == {"/stem/conv/Conv": "conv2d", "cb": "conv2d",
                                   "/stem/act/Relu": "relu"}


def test_torch_fx_nodes_map_to_the_joints_they_became():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).eval()
    graph, _ = from_torch(model, [([1, 3, 8, 8], "float32")])
    assert dict(graph.sources) == {"_0": "conv2d", "_1": "batch_norm", "_2": "relu"}
    assert all(j in graph.node_names for j in graph.sources.values())


def test_sources_must_name_joints():
    graph, _ = from_onnx(_onnx_model())
    with pytest.raises(ValidationError, match="not in the graph"):
        graph.set_sources({"/x": "no_such_joint"})
    assert "/stem/act/Relu" in graph.sources  # unchanged by the refused call


def test_relax_without_spans_has_no_sources():
    graph, _ = from_relax(RELU_SCRIPT)
    assert graph.node_names == ("x", "relu") and dict(graph.sources) == {}
