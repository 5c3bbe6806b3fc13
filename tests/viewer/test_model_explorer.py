"""Model Explorer graph JSON: the GraphCollection its JSON loader reads, node data."""

import json
from pathlib import Path

import pytest

from msc.errors import MSCError
from msc.viewer.model_explorer import open_model_explorer, write_model_explorer
from msc.viewer.overlay import GRADIENT, Overlay
from msc.viewer.scene import FAMILY_COLORS

NODE_KEYS = {"id", "label", "namespace", "subgraphIds", "attrs", "incomingEdges",
             "outputsMetadata", "inputsMetadata", "style"}


def test_resnet50_graph_json(resnet50, tmp_path):
    graph, weights = resnet50
    overlay = Overlay("latency_ms", {"conv2d": 2.0, "relu": 0.5})
    paths = write_model_explorer(graph, weights, str(tmp_path / "r50.json"), overlay)
    assert [p.rsplit("/", 1)[1] for p in paths] == ["r50.json", "r50.node_data.json"]
    data = json.loads(Path(paths[0]).read_text())
    assert data["label"] == graph.name and len(data["graphs"]) == 1
    nodes = {n["id"]: n for n in data["graphs"][0]["nodes"]}
    assert set(nodes) == set(graph.node_names)
    assert all(set(n) == NODE_KEYS for n in nodes.values())
    # every input of every joint is one incoming edge from its producer
    edges = sum(len(n["incomingEdges"]) for n in nodes.values())
    assert edges == sum(len(j.get_inputs()) for j in graph.get_nodes())
    add = nodes["add"]
    assert {e["sourceNodeId"] for e in add["incomingEdges"]} == \
        {p.name for p in graph.find_node("add").parents}
    conv = nodes["conv2d_1"]
    assert conv["label"] == "nn.conv2d" and conv["namespace"] == "conv2d_1 .. relu_3"
    meta = {kv["key"]: kv["value"] for kv in conv["outputsMetadata"][0]["attrs"]}
    assert meta == {"tensor_name": "conv2d_1:0", "shape": "float32[1, 64, 56, 56]",
                    "dtype": "float32", "layout": "NCHW"}
    attrs = {kv["key"]: kv["value"] for kv in conv["attrs"]}
    assert attrs["optype"] == "nn.conv2d" and attrs["weight.weight"].startswith("const_")
    assert conv["style"]["backgroundColor"] == FAMILY_COLORS["conv"]
    assert nodes["gpu_0_data_0"]["incomingEdges"] == []
    node_data = json.loads(Path(paths[1]).read_text())
    gdata = node_data[graph.name]
    assert gdata["results"] == {"conv2d": {"value": 2.0}, "relu": {"value": 0.5}}
    assert [s["bgColor"] for s in gdata["gradient"]] == list(GRADIENT)
    assert gdata["gradient"][0]["stop"] == 0 and gdata["gradient"][-1]["stop"] == 1


def test_open_without_model_explorer_says_how_to_install(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "model_explorer", None)  # as if not installed
    with pytest.raises(MSCError, match="ai-edge-model-explorer") as err:
        open_model_explorer([str(tmp_path / "g.json")])
    assert "pip install" in str(err.value)


def test_log_scale_node_data_carries_each_color(resnet50, tmp_path):
    graph, weights = resnet50  # Model Explorer spreads its gradient linearly: colors given
    overlay = Overlay("err", {"conv2d": 1e-7, "relu": 1e-5, "add": 1e-3})
    paths = write_model_explorer(graph, weights, str(tmp_path / "e.json"), overlay)
    results = json.loads(Path(paths[1]).read_text())[graph.name]["results"]
    assert {n: r["bgColor"] for n, r in results.items()} == \
        {n: overlay.color(n) for n in overlay.values}
    assert results["relu"]["bgColor"] == GRADIENT[2]  # the middle decade, the middle color
