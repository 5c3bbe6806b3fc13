"""msc.graph.diff: joints paired by place (names only break ties), and what differs."""

import json

from msc.frontends import translate
from msc.graph import MSCGraph, MSCTensor, testing
from msc.graph.diff import diff_graphs
from tests.helpers.cli_models import cnn_onnx, light


def _renamed(graph: MSCGraph, names: dict) -> MSCGraph:
    """The same graph with joints (and their output tensors) renamed by ``names``."""
    new: dict = {}
    for node in graph.get_nodes():
        name = names.get(node.name, node.name)
        outputs = [MSCTensor(f"{name}:{i}", t.dtype, t.layout.name, t.get_shape(), t.alias)
                   for i, t in enumerate(node.outputs)]
        pairs = [(new[p.name], idx) for p, idx in node.input_pairs()]
        new[node.name] = node.clone(inputs=pairs, name=name, outputs=outputs)

    def ref(tensor: str) -> str:
        host, _, idx = tensor.rpartition(":")
        return f"{names.get(host, host)}:{idx}"

    return MSCGraph(graph.name, list(new.values()), [ref(n) for n in graph.input_names],
                    [ref(n) for n in graph.output_names])


def test_a_graph_and_its_json_round_trip_are_identical():
    graph, _ = translate.from_onnx(light("resnet50"))
    result = diff_graphs(graph, MSCGraph.from_json(graph.to_json()))
    assert result.identical
    assert result.summary() == {"matched": 230, "added": 0, "removed": 0, "changed": 0,
                                "renamed": 0}


def test_joints_pair_by_place_when_every_name_differs():
    graph = testing.residual_graph()
    other = _renamed(graph, {n: f"b_{n}" for n in graph.node_names})
    result = diff_graphs(graph, other)
    assert result.identical
    assert result.renamed == [(n, f"b_{n}") for n in graph.node_names]


def test_misleading_names_do_not_pair_joints_of_another_op():
    """relu and sigmoid swap names: name matching would pair an nn.relu with a sigmoid."""
    graph = testing.residual_graph()
    result = diff_graphs(graph, _renamed(graph, {"relu": "sigmoid", "sigmoid": "relu"}))
    assert result.identical
    assert sorted(result.renamed) == [("relu", "sigmoid"), ("sigmoid", "relu")]


def test_inserted_joint_is_added_and_its_consumer_rewired(tmp_path):
    a, _ = translate.from_onnx(cnn_onnx(tmp_path / "a.onnx"))
    b, _ = translate.from_onnx(cnn_onnx(tmp_path / "b.onnx", extra="Sigmoid"))
    result = diff_graphs(a, b)
    assert result.added == [("sigmoid", "sigmoid")] and result.removed == []
    assert [(c.a, c.changes) for c in result.changed] == [
        ("conv2d_1", [("inputs", ["relu:0"], ["sigmoid:0"])])]
    back = diff_graphs(b, a)  # and the other way round: removed
    assert back.removed == [("sigmoid", "sigmoid")] and back.added == []
    assert back.changed[0].changes == [("inputs", ["sigmoid:0"], ["relu:0"])]


def test_pruned_channels_change_shapes_of_outputs_and_weights(tmp_path):
    a, _ = translate.from_onnx(cnn_onnx(tmp_path / "a.onnx", channels=8))
    b, _ = translate.from_onnx(cnn_onnx(tmp_path / "b.onnx", channels=4))
    result = diff_graphs(a, b)
    changes = {c.a: c.changes for c in result.changed}
    assert set(changes) == {"conv2d", "relu", "conv2d_1"}
    assert ("output 0 shape", ["N", 8, 8, 8], ["N", 4, 8, 8]) in changes["conv2d"]
    assert ("weight weight shape", [8, 3, 3, 3], [4, 3, 3, 3]) in changes["conv2d"]
    assert ("weight bias shape", [8], [4]) in changes["conv2d"]
    assert changes["conv2d_1"] == [("weight weight shape", [6, 8, 3, 3], [6, 4, 3, 3])]
    text = result.format()
    assert "~ conv2d (msc.conv2d_bias)\n    output 0 shape: ['N', 8, 8, 8] -> ['N', 4, 8, 8]" \
        in text
    assert text.endswith("graphs differ: 0 added, 0 removed, 3 changed, 0 renamed "
                         "(7 joints paired)")
    data = json.loads(json.dumps(result.to_dict()))
    assert data["summary"]["changed"] == 3 and data["identical"] is False


def test_dtype_layout_and_attr_changes():
    graph = testing.conv_relu_graph()
    data = json.loads(graph.to_json())
    relu = data["nodes"][2]
    relu["outputs"][0]["dtype"] = "float16"
    relu["outputs"][0]["layout"] = "NHWC"
    data["nodes"][1]["attrs"]["strides"] = "2,2"
    result = diff_graphs(graph, MSCGraph.from_json(json.dumps(data)))
    changes = {c.a: c.changes for c in result.changed}
    assert changes["relu"] == [("output 0 dtype", "float32", "float16"),
                               ("output 0 layout", "NCHW", "NHWC")]
    assert changes["conv2d"] == [("attr strides", "1,1", "2,2")]


def test_graph_outputs_in_another_order_differ():
    graph = testing.residual_graph()
    data = json.loads(graph.to_json())
    data["outputs"] = data["outputs"][::-1]
    result = diff_graphs(graph, MSCGraph.from_json(json.dumps(data)))
    assert not result.identical and not result.changed
    assert result.graph_changes == [("outputs", ["add:0", "sigmoid:0"], ["sigmoid:0", "add:0"])]
    assert "~ graph outputs: ['add:0', 'sigmoid:0'] -> ['sigmoid:0', 'add:0']" in result.format()
