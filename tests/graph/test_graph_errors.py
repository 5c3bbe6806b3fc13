"""Bad input to the JSON readers: every case is a typed msc error naming the key, node, tensor
and file; never a bare KeyError, TypeError or AttributeError."""

import copy
import json

import pytest

from msc.errors import MSCError, SerializationError, ValidationError
from msc.graph import MSCGraph, WeightGraph
from msc.graph.testing import conv_relu_graph, dynamic_graph, prune_graph

BASE = json.loads(conv_relu_graph().to_json())


def mutated(change):
    data = copy.deepcopy(BASE)
    change(data)
    return json.dumps(data)


def node(data, name):
    return next(n for n in data["nodes"] if n["name"] == name)


def delete(key, name=None):
    def change(data):
        del (node(data, name) if name else data)[key]
    return change


def setter(name, key, value):
    def change(data):
        node(data, name)[key] = value
    return change


@pytest.mark.parametrize("key", ["name", "inputs", "outputs", "nodes"])
def test_graph_required_keys(key):
    with pytest.raises(SerializationError, match="missing the required key") as info:
        MSCGraph.from_json(mutated(delete(key)))
    assert info.value.context["key"] == key


@pytest.mark.parametrize("key", ["index", "name", "optype", "outputs"])
def test_node_required_keys(key):
    with pytest.raises(SerializationError, match="missing the required key") as info:
        MSCGraph.from_json(mutated(delete(key, "relu")))
    assert info.value.context["key"] == key
    if key != "name":
        assert info.value.context["node"] == "relu"


@pytest.mark.parametrize("key", ["name", "dtype", "shape"])
def test_tensor_required_keys(key):
    def change(data):
        del node(data, "conv2d")["weights"]["bias"][key]
    with pytest.raises(SerializationError, match="tensor is missing") as info:
        MSCGraph.from_json(mutated(change))
    assert info.value.context["key"] == key and info.value.context["node"] == "conv2d"


@pytest.mark.parametrize("key, value", [
    ("index", "2"), ("index", 2.0), ("index", True), ("name", 5), ("optype", None),
    ("parents", "conv2d"), ("inputs", [0]), ("outputs", {}), ("attrs", {"axis": 1}),
    ("attrs", []), ("weights", []), ("scope", "block"), ("shared_ref", 0)])
def test_node_wrong_types(key, value):
    with pytest.raises(SerializationError) as info:
        MSCGraph.from_json(mutated(setter("relu", key, value)))
    assert info.value.context["key"] == key


@pytest.mark.parametrize("field, value, error, key", [
    ("shape", "1,6,4,4", SerializationError, "shape"),
    ("shape", [1, "6", 4, 4], ValidationError, "shape"),
    ("shape", [1, 6.0, 4, 4], ValidationError, "shape"),
    ("prims", ["bz"], ValidationError, "prims"),
    ("dtype", "floaty", ValidationError, "dtype"),
    ("layout", "NC-HW", ValidationError, "layout"),
    ("alias", 7, SerializationError, "alias")])
def test_tensor_wrong_values(field, value, error, key):
    def change(data):
        node(data, "relu")["outputs"][0][field] = value
    with pytest.raises(error) as info:
        MSCGraph.from_json(mutated(change))
    assert info.value.context["node"] == "relu" and info.value.context.get("key") == key


@pytest.mark.parametrize("change, match, key", [
    (setter("relu", "parents", ["ghost"]), "unknown parent 'ghost'", "parents"),
    (setter("relu", "inputs", ["ghost:0"]), "not an output of a listed parent", "inputs"),
    (setter("relu", "inputs", ["conv2d:x"]), "no integer output index", "inputs"),
    (setter("relu", "parents", ["conv2d", "inp_0"]), "do not match", "parents"),
    (setter("relu", "parents", []), "not an output of a listed parent", "inputs")])
def test_unresolved_links(change, match, key):
    with pytest.raises(SerializationError, match=match) as info:
        MSCGraph.from_json(mutated(change))
    assert info.value.context == {"node": "relu", "key": key}


def test_input_index_out_of_range():
    with pytest.raises(ValidationError, match="out of range") as info:
        MSCGraph.from_json(mutated(setter("relu", "inputs", ["conv2d:3"])))
    assert info.value.context["node"] == "relu"


def test_nodes_must_be_topologically_ordered():
    def swap(data):
        data["nodes"][1], data["nodes"][2] = data["nodes"][2], data["nodes"][1]
    with pytest.raises(SerializationError, match="listed after this node") as info:
        MSCGraph.from_json(mutated(swap))
    assert info.value.context["node"] == "relu"


def test_duplicate_node_names():
    def dup(data):
        data["nodes"][2]["name"] = "conv2d"
    with pytest.raises(SerializationError, match="duplicate node name") as info:
        MSCGraph.from_json(mutated(dup))
    assert info.value.context["node"] == "conv2d"


def test_index_must_be_the_position():
    with pytest.raises(ValidationError, match="index is 5, expected 2") as info:
        MSCGraph.from_json(mutated(setter("relu", "index", 5)))
    assert info.value.context["node"] == "relu"


@pytest.mark.parametrize("key, names", [("outputs", ["relu:1"]), ("inputs", ["inp_0:0", "x"])])
def test_graph_inputs_and_outputs_must_resolve(key, names):
    def change(data):
        data[key] = names
    with pytest.raises(ValidationError, match="no such tensor") as info:
        MSCGraph.from_json(mutated(change))
    assert info.value.context["tensor"] in names


@pytest.mark.parametrize("text", ["[]", '[{"name": "main"}]', "3", '"main"', "null"])
def test_top_level_must_be_an_object(text, tmp_path):
    path = tmp_path / "graph.json"
    path.write_text(text)
    with pytest.raises(SerializationError, match="graph must be a JSON object") as info:
        MSCGraph.from_json(path)
    assert info.value.context["file"] == str(path)


def test_node_must_be_an_object():
    def change(data):
        data["nodes"][1] = ["conv2d"]
    with pytest.raises(SerializationError, match="node 1 must be a JSON object"):
        MSCGraph.from_json(mutated(change))


def test_malformed_json_reports_line_and_column():
    text = conv_relu_graph().to_json(indent=2).replace('"optype": "nn.relu",', '"optype" "nn.relu"')
    with pytest.raises(SerializationError, match="malformed JSON at line") as info:
        MSCGraph.from_json(text)
    line = info.value.context["line"]
    assert '"optype" "nn.relu"' in text.splitlines()[line - 1]
    assert info.value.context["col"] > 1


def test_errors_from_a_file_name_the_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text(mutated(setter("relu", "parents", ["ghost"])))
    with pytest.raises(SerializationError) as info:
        MSCGraph.from_json(str(path))
    assert info.value.context["file"] == str(path) and info.value.context["node"] == "relu"
    assert str(info.value).startswith(f"{path}, node 'relu', key 'parents': unknown parent")
    path.write_text('{"name": "main",\n  "inputs": [}')
    with pytest.raises(SerializationError) as info:
        MSCGraph.from_json(path)
    assert str(info.value).startswith(f"{path}:2, col 14: malformed JSON")


def test_missing_file():
    with pytest.raises(SerializationError, match="no such file") as info:
        MSCGraph.from_json("no/such/graph.json")
    assert info.value.context["file"] == "no/such/graph.json"


def test_wrong_source_type():
    with pytest.raises(SerializationError, match="expected a JSON string"):
        MSCGraph.from_json(42)


def test_prim_errors():
    data = json.loads(dynamic_graph().to_json())
    data["prims"][2]["parents"] = ["bz", "nope"]
    with pytest.raises(SerializationError, match="unknown parent 'nope'") as info:
        MSCGraph.from_json(json.dumps(data))
    assert info.value.context["node"] == "MUL_2"
    data["prims"][2]["parents"] = ["bz", "INT_1"]
    data["prims"][0], data["prims"][2] = data["prims"][2], data["prims"][0]
    with pytest.raises(SerializationError, match="listed after"):
        MSCGraph.from_json(json.dumps(data))


def test_weight_graph_errors():
    wg = WeightGraph(prune_graph(), {"msc.conv2d_bias": ["weight"]}, {"add": "passby"})
    data = json.loads(wg.to_json())
    data["nodes"][0]["friends"] = ["const", "ghost"]
    with pytest.raises(SerializationError, match="unknown friend 'ghost'") as info:
        WeightGraph.from_json(json.dumps(data))
    assert info.value.context == {"node": "const", "key": "friends"}
    del data["nodes"][1]["weight_type"]
    with pytest.raises(SerializationError, match="missing the required key"):
        WeightGraph.from_json(json.dumps(data))


# Every key of every node replaced by junk: the reader either accepts it or raises an msc
# error; a bare Python error here would be a bug.
JUNK = [None, 5, -1, "x", "", [], [1], ["x"], {}, {"a": 1}, 1.5, True]
NODE_KEYS = list(BASE["nodes"][1])


@pytest.mark.parametrize("key", NODE_KEYS)
@pytest.mark.parametrize("junk", JUNK, ids=repr)
def test_junk_never_escapes_as_a_bare_error(key, junk):
    for name in ("inp_0", "conv2d", "relu"):
        try:
            MSCGraph.from_json(mutated(setter(name, key, junk)))
        except MSCError as err:
            assert err.context  # it names what it is about
