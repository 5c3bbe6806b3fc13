"""JSON (2.1), prototxt (2.2) and DOT forms; round trips and atomic writes."""

import json
import os
from pathlib import Path

import pytest

from msc.errors import SerializationError
from msc.graph import MSCGraph, WeightGraph, files, testing
from msc.graph.testing import conv_graph, conv_relu_graph

ROOT = Path(__file__).resolve().parents[2]
BUILDERS = [testing.conv_graph, testing.conv_relu_graph, testing.residual_graph,
            testing.dynamic_graph, testing.shared_weight_graph, testing.prune_graph]

# Conventions 2.1, torch Conv2d(3, 6, 7) on [1, 3, 10, 10], with the elided values filled in.
CONVENTIONS_EXAMPLE = """
{"name":"main","inputs":["inp_0:0"],"outputs":["conv2d:0"],"nodes":[
{"index":0,"name":"inp_0","shared_ref":"","optype":"input","parents":[],"inputs":[],
"outputs":[{"name":"inp_0:0","alias":"inp_0","dtype":"float32","layout":"NCHW",
"shape":[1,3,10,10],"prims":[]}],"attrs":{},"weights":{}},
{"index":1,"name":"conv2d","shared_ref":"","optype":"msc.conv2d_bias","parents":["inp_0"],
"inputs":["inp_0:0"],
"outputs":[{"name":"conv2d:0","alias":"conv2d","dtype":"float32","layout":"NCHW",
"shape":[1,6,4,4],"prims":[]}],
"attrs":{"strides":"1,1","padding":"0,0,0,0","dilation":"1,1","groups":"1","data_layout":"NCHW",
"kernel_layout":"OIHW","out_layout":"NCHW"},
"weights":{"weight":{"name":"const","alias":"conv2d.weight","dtype":"float32","layout":"OIHW",
"shape":[6,3,7,7],"prims":[]},
"bias":{"name":"const_1","alias":"conv2d.bias","dtype":"float32","layout":"O","shape":[6],
"prims":[]}}}],"prims":[]}
"""

CONV_RELU_PROTOTXT = """\
name: "main"
layer {
  name: "inp_0"
  type: "input"
  top: "inp_0"
  layer_param {
    idx: 0
    output_0: "inp_0:0(inp_0)<1,3,10,10|float32|NCHW>"
  }
}
layer {
  name: "conv2d"
  type: "msc_conv2d_bias"
  top: "conv2d"
  bottom: "inp_0"
  layer_param {
    idx: 1
    input_0: "inp_0:0(inp_0)<1,3,10,10|float32|NCHW>"
    output_0: "conv2d:0<1,6,4,4|float32|NCHW>"
    param_weight: "const(conv2d.weight)<6,3,7,7|float32|OIHW>"
    param_bias: "const_1(conv2d.bias)<6|float32|O>"
    strides: "1,1"
    padding: "0,0,0,0"
    dilation: "1,1"
    groups: "1"
    data_layout: "NCHW"
    kernel_layout: "OIHW"
    out_layout: "NCHW"
  }
}
layer {
  name: "relu"
  type: "nn_relu"
  top: "relu"
  bottom: "conv2d"
  layer_param {
    idx: 2
    input_0: "conv2d:0<1,6,4,4|float32|NCHW>"
    output_0: "relu:0(relu)<1,6,4,4|float32|NCHW>"
  }
}
"""

CONV_RELU_DOT = """\
digraph "main" {
  rankdir=TB;
  node [shape=box, fontname="Helvetica"];
  "inp_0" [label="inp_0\\ninput\\n1,3,10,10 float32"];
  "conv2d" [label="conv2d\\nmsc.conv2d_bias\\n1,6,4,4 float32"];
  "relu" [label="relu\\nnn.relu\\n1,6,4,4 float32"];
  "inp_0" -> "conv2d" [label="inp_0:0"];
  "conv2d" -> "relu" [label="conv2d:0"];
}
"""


def without_scope(data):
    for node in data["nodes"]:
        node.pop("scope")
    return data


def reverse_keys(value, is_map=False):
    """Reverse the key order of every schema object (attrs and weights are ordered maps)."""
    if isinstance(value, dict):
        keys = list(value) if is_map else list(reversed(list(value)))
        return {k: reverse_keys(value[k], k in ("attrs", "weights")) for k in keys}
    if isinstance(value, list):
        return [reverse_keys(v) for v in value]
    return value


# ---- JSON ---------------------------------------------------------------------------------
@pytest.mark.parametrize("build", BUILDERS)
def test_json_round_trip_is_a_fixed_point(build):
    graph = build()
    text = graph.to_json()
    loaded = MSCGraph.from_json(text)
    loaded.check()
    assert loaded.to_json() == text and loaded.equal(graph) and str(loaded) == str(graph)
    assert loaded.inspect() == graph.inspect() and loaded.visualize() == graph.visualize()


def test_json_matches_the_conventions_example():
    data = json.loads(conv_graph().to_json())
    example = json.loads(CONVENTIONS_EXAMPLE)
    assert without_scope(data) == example
    node_keys = ["index", "name", "shared_ref", "optype", "parents", "inputs", "outputs",
                 "attrs", "weights"]
    assert [list(n) for n in data["nodes"]] == [node_keys, node_keys]
    assert list(data) == ["name", "inputs", "outputs", "nodes", "prims"]
    assert list(data["nodes"][1]["weights"]["bias"]) == ["name", "alias", "dtype", "layout",
                                                         "shape", "prims"]
    assert MSCGraph.from_json(CONVENTIONS_EXAMPLE).equal(conv_graph())


def test_json_keeps_scope_after_optype():
    node = json.loads(conv_relu_graph().to_json())["nodes"][1]
    assert list(node)[3:5] == ["optype", "scope"] and node["scope"] == ["block"]
    reloaded = MSCGraph.from_json(conv_relu_graph().to_json())
    assert reloaded.find_node("conv2d").scope == ["block"]


def test_prims_json(dynamic):
    prims = json.loads(dynamic.to_json())["prims"]
    assert prims[2] == {"index": 2, "name": "MUL_2", "optype": "Mul", "parents": ["bz", "INT_1"],
                        "attrs": {}}
    assert list(prims[0]) == ["index", "name", "optype", "parents", "attrs"]


def test_readers_do_not_depend_on_key_order(residual):
    shuffled = json.dumps(reverse_keys(json.loads(residual.to_json())))
    assert MSCGraph.from_json(shuffled).to_json() == residual.to_json()


def test_unknown_keys_are_ignored(conv_relu):
    data = json.loads(conv_relu.to_json())
    data["version"] = 2
    data["nodes"][0]["comment"] = "x"
    assert MSCGraph.from_json(json.dumps(data)).to_json() == conv_relu.to_json()


def test_from_json_accepts_path_and_dict(conv_relu, tmp_path):
    path = tmp_path / "graph.json"
    assert conv_relu.to_json(path) == path.read_text().strip()
    for source in (str(path), path, json.loads(path.read_text())):
        assert MSCGraph.from_json(source).equal(conv_relu)
    conv_relu.to_json(path, indent=2)
    assert path.read_text().startswith('{\n  "name": "main"')


def test_example_file_is_current():
    example = ROOT / "msc" / "data" / "conv_relu.json"
    graph = MSCGraph.from_json(str(example))
    assert graph.to_json() == conv_relu_graph().to_json()
    assert graph.inspect()["inputs"][0]["shape"] == [1, 3, 10, 10]


def test_clone_is_deep(conv_relu):
    copy = conv_relu.clone()
    assert copy.equal(conv_relu) and copy.find_node("relu") is not conv_relu.find_node("relu")
    copy.set_tensor_alias("conv2d:0", "feature")
    assert not conv_relu.has_tensor("feature")


def test_weight_graph_json(prunable):
    wg = WeightGraph(prunable, {"msc.conv2d_bias": ["weight"]}, {"add": "passby"})
    data = json.loads(wg.to_json())
    assert list(data) == ["name", "nodes"]
    assert list(data["nodes"][0]) == ["index", "name", "shared_ref", "weight_type", "weight",
                                      "parents", "friends", "attrs"]
    assert data["nodes"][0]["friends"] == ["const", "const_6"]
    loaded = WeightGraph.from_json(wg.to_json())
    loaded.check()
    assert loaded.to_json() == wg.to_json() and str(loaded) == str(wg)
    assert loaded.inspect() == wg.inspect() and loaded.clone().to_json() == wg.to_json()
    assert loaded.find_node("const").friends[1] is loaded.find_node("const_6")


# ---- prototxt and DOT ---------------------------------------------------------------------
def test_prototxt_golden(conv_relu):
    assert conv_relu.visualize() == CONV_RELU_PROTOTXT


def test_prototxt_matches_the_conventions_example():
    text = conv_graph().visualize()
    assert ('layer {\n  name: "conv2d"\n  type: "msc_conv2d_bias"\n  top: "conv2d"\n'
            '  bottom: "inp_0"\n  layer_param {\n    idx: 1\n'
            '    input_0: "inp_0:0(inp_0)<1,3,10,10|float32|NCHW>"\n'
            '    output_0: "conv2d:0(conv2d)<1,6,4,4|float32|NCHW>"\n'
            '    param_weight: "const(conv2d.weight)<6,3,7,7|float32|OIHW>"\n') in text


def test_prototxt_escapes_strings(conv_relu):
    graph = conv_relu.clone()
    data = json.loads(graph.to_json())
    data["nodes"][2]["attrs"] = {"note": 'say "hi"\\n\nnext\tend\x01'}
    text = MSCGraph.from_json(json.dumps(data)).visualize()
    assert '    note: "say \\"hi\\"\\\\n\\nnext\\tend\\001"\n' in text


def test_visualize_writes_the_file(conv_relu, tmp_path):
    path = tmp_path / "model.prototxt"
    assert conv_relu.visualize(str(path)) == path.read_text() == CONV_RELU_PROTOTXT


def test_dot_golden(conv_relu, tmp_path):
    assert conv_relu.to_dot() == CONV_RELU_DOT
    path = tmp_path / "g.dot"
    conv_relu.to_dot(str(path))
    assert path.read_text() == CONV_RELU_DOT


def test_dot_quotes_odd_names(residual):
    text = residual.to_dot()
    assert '"split" -> "sigmoid" [label="split:1"];' in text
    assert text.count("->") == sum(len(n.inputs) for n in residual.get_nodes())


# ---- atomic writes ------------------------------------------------------------------------
def test_failed_serialization_keeps_the_old_file(conv_relu, tmp_path, monkeypatch):
    path = tmp_path / "graph.json"
    path.write_text("old")

    def broken(self):
        raise RuntimeError("boom")

    monkeypatch.setattr(MSCGraph, "to_dict", broken)
    with pytest.raises(RuntimeError):
        conv_relu.to_json(path)
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["graph.json"]


def test_failed_write_leaves_no_partial_file(conv_relu, tmp_path, monkeypatch):
    path = tmp_path / "model.prototxt"
    path.write_text("old")

    def no_rename(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(files.os, "replace", no_rename)
    with pytest.raises(SerializationError) as info:
        conv_relu.visualize(path)
    assert info.value.context["file"] == str(path)
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["model.prototxt"]


def test_write_creates_folders_and_reports_bad_paths(conv_relu, tmp_path):
    conv_relu.visualize(tmp_path / "out" / "g.prototxt")
    assert (tmp_path / "out" / "g.prototxt").read_text() == CONV_RELU_PROTOTXT
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(SerializationError, match="cannot write") as info:
        conv_relu.to_json(blocker / "g.json")
    assert info.value.context["file"] == str(blocker / "g.json")


def test_write_replaces_and_keeps_the_mode(conv_relu, tmp_path):
    path = tmp_path / "g.json"
    path.write_text("old")
    path.chmod(0o640)
    conv_relu.to_json(path)
    assert MSCGraph.from_json(path).equal(conv_relu)
    assert (path.stat().st_mode & 0o777) == 0o640 and os.listdir(tmp_path) == ["g.json"]
