"""MSCJoint, MSCPrim, MSCGraph and WeightGraph: queries, quirks, summaries, printed forms and
the guarded changes (conventions 1.2-1.8)."""

import pytest

from msc.errors import ValidationError
from msc.graph import MSCGraph, MSCJoint, MSCPrim, MSCTensor, WeightGraph, WeightJoint
from msc.graph.testing import conv_graph, conv_relu_graph

# Golden printed forms, one line per literal so that the trailing spaces MSC prints
# ("ATTRS: k=v ", "WEIGHTS: ") stay visible and survive editors.
CONV_RELU_TEXT = (
    "main <INPUTS: inp_0:0| OUTPUTS: relu:0>\n"
    "ID_0 inp_0 <PARENTS: | CHILDERN: conv2d>\n"
    "  OUT: inp_0:0(inp_0)<1,3,10,10|float32|NCHW>\n"
    "  OPTYPE: input\n"
    "\n"
    "ID_1 conv2d <PARENTS: inp_0| CHILDERN: relu>\n"
    "  IN: inp_0:0(inp_0)<1,3,10,10|float32|NCHW>\n"
    "  OUT: conv2d:0<1,6,4,4|float32|NCHW>\n"
    "  OPTYPE: msc.conv2d_bias\n"
    "  SCOPE: block\n"
    "  ATTRS: strides=1,1 padding=0,0,0,0 dilation=1,1 groups=1 data_layout=NCHW "
    "kernel_layout=OIHW out_layout=NCHW \n"
    "  WEIGHTS: \n"
    "    weight: const(conv2d.weight)<6,3,7,7|float32|OIHW>\n"
    "    bias: const_1(conv2d.bias)<6|float32|O>\n"
    "\n"
    "ID_2 relu <PARENTS: conv2d| CHILDERN: >\n"
    "  IN: conv2d:0<1,6,4,4|float32|NCHW>\n"
    "  OUT: relu:0(relu)<1,6,4,4|float32|NCHW>\n"
    "  OPTYPE: nn.relu\n"
    "  SCOPE: block\n"
    "\n")

DYNAMIC_PRIMS_TEXT = (
    "main <INPUTS: inp_0:0| OUTPUTS: add:0>\n"
    "P_0 bz <PARENTS: | CHILDERN: MUL_2>\n"
    "  OPTYPE: shape\n"
    "  ATTRS: producer=inp_0 out_idx=0 dim=0 \n"
    "\n"
    "P_1 INT_1 <PARENTS: | CHILDERN: MUL_2>\n"
    "  OPTYPE: Int\n"
    "  ATTRS: value=6 \n"
    "\n"
    "P_2 MUL_2 <PARENTS: bz,INT_1| CHILDERN: >\n"
    "  OPTYPE: Mul\n"
    "\n"
    "ID_0 inp_0 <PARENTS: | CHILDERN: conv2d>\n"
    "  OUT: inp_0:0(inp_0)<bz,3,10,10|float32|NCHW>\n"
    "  OPTYPE: input\n"
    "\n")


def names(joints):
    return [j.name for j in joints]


def tensor(name, shape, alias=""):
    return MSCTensor(name, "float32", "NCHW", shape, alias)


# ---- joints -------------------------------------------------------------------------------
def test_joint_links_and_accessors(conv_relu):
    conv = conv_relu.find_node("conv2d")
    assert (conv.index, conv.optype, conv.scope, conv.shared_ref) == (1, "msc.conv2d_bias",
                                                                     ["block"], "")
    assert names(conv.parents) == ["inp_0"] and names(conv.children) == ["relu"]
    assert conv.inputs == ((0, 0),) and isinstance(conv.parents, tuple)
    assert conv.input_at(0).name == conv.input_at(-1).name == "inp_0:0"
    assert conv.output_at(-1).name == "conv2d:0" and names(conv.get_outputs()) == ["conv2d:0"]
    assert conv.weight_at("bias").name == "const_1" and conv.weight_type("const") == "weight"
    assert list(conv.get_weights()) == ["weight", "bias"]
    assert conv.producer_of(0).name == "inp_0" and conv.producer_and_idx_of("inp_0:0")[1] == 0


@pytest.mark.parametrize("call", [lambda n: n.input_at(1), lambda n: n.output_at(-2),
                                  lambda n: n.weight_at("gamma"), lambda n: n.weight_type("w"),
                                  lambda n: n.producer_of("relu:0"), lambda n: n.parent_at(3)])
def test_joint_lookups_fail_with_the_node_named(conv_relu, call):
    with pytest.raises(ValidationError) as info:
        call(conv_relu.find_node("conv2d"))
    assert info.value.context["node"] == "conv2d"


def test_joint_attrs_are_read_only(conv_relu):
    conv = conv_relu.find_node("conv2d")
    assert conv.get_attr("groups") == "1" and conv.get_attr("missing", "x") == "x"
    assert conv.has_attr("strides") and not conv.has_attr("axis")
    attrs = conv.get_attrs()
    attrs["groups"] = "2"
    assert conv.get_attr("groups") == "1"
    with pytest.raises(TypeError):
        conv.attrs["groups"] = "2"
    with pytest.raises(TypeError):
        conv.weights["weight"] = None
    assert conv.get_type_attr("groups", int) == 1
    assert conv.get_type_array_attr("strides", int) == [1, 1]
    with pytest.raises(ValidationError) as info:
        conv.get_type_attr("strides", int)
    assert info.value.context == {"node": "conv2d", "key": "strides"}


def test_joint_encodes_attr_values():
    node = MSCJoint(0, "x", "", "input", {"axes": [1], "keepdims": True, "eps": 1e-5},
                    outputs=[tensor("x:0", [1])])
    assert node.get_attrs() == {"axes": "1,", "keepdims": "1", "eps": "0.000010"}


def test_joint_parents_are_unique_in_first_use_order():
    inp = MSCJoint(0, "inp_0", "", "input", outputs=[tensor("inp_0:0", [1])])
    other = MSCJoint(1, "b", "", "input", outputs=[tensor("b:0", [1])])
    add = MSCJoint(2, "add", "", "add", inputs=[(other, 0), (inp, 0), (other, 0)],
                   outputs=[tensor("add:0", [1])])
    assert names(add.parents) == ["b", "inp_0"] and add.inputs == ((0, 0), (1, 0), (0, 0))


@pytest.mark.parametrize("kw, match", [
    ({"inputs": [("inp_0", 0)]}, "pair"), ({"inputs": [("PARENT", 1)]}, "out of range"),
    ({"outputs": [tensor("y:0", [1])]}, "named 'y:0'"), ({"optype": ""}, "optype"),
    ({"weights": {"w": "const"}}, "weights"), ({"scope": "block"}, "scope"),
    ({"index": -1}, "index"), ({"attrs": {"a": object()}}, "cannot encode")])
def test_joint_constructor_validates(kw, match):
    parent = MSCJoint(0, "inp_0", "", "input", outputs=[tensor("inp_0:0", [1])])
    args = {"index": 1, "name": "x", "shared_ref": "", "optype": "nn.relu",
            "inputs": [(parent, 0)], "outputs": [tensor("x:0", [1])], **kw}
    args["inputs"] = [(parent, i[1]) if i[0] == "PARENT" else i for i in args["inputs"]]
    with pytest.raises(ValidationError, match=match) as info:
        MSCJoint(**args)
    assert info.value.context["node"] == "x"


def test_joint_equal_compares_optype_attrs_and_all_tensors(conv_relu):
    relu = conv_relu.find_node("relu")
    assert relu.equal(relu.clone())
    other_out = relu.clone(outputs=[tensor("relu:0", [1, 6, 4, 5])])  # MSC compared inputs twice
    assert not relu.equal(other_out)
    assert not relu.equal(relu.clone(optype="sigmoid"))
    assert not relu.equal(relu.clone(attrs={"a": "1"}))
    conv = conv_relu.find_node("conv2d")
    small = conv.weight_at("weight").clone(shape=[3, 3, 7, 7])
    assert not conv.equal(conv.clone(weights={**conv.weights, "weight": small}))
    assert not relu.equal(relu.output_at(0))


def test_prim_and_weight_joint_print():
    bz = MSCPrim(0, "bz", "shape", {"producer": "inp_0", "out_idx": 0, "dim": 0})
    mul = MSCPrim(1, "MUL_1", "Mul", {}, [bz])
    assert str(bz) == "P_0 bz <PARENTS: | CHILDERN: >\n  OPTYPE: shape\n" \
                      "  ATTRS: producer=inp_0 out_idx=0 dim=0 \n"
    assert str(mul) == "P_1 MUL_1 <PARENTS: bz| CHILDERN: >\n  OPTYPE: Mul\n"
    w = WeightJoint(0, "const", "", "weight", tensor("const", [6, 3, 7, 7]))
    w.set_attr("pruned_shape", [3, 3, 7, 7])
    assert w.get_attr("pruned_shape") == "3,3,7,7" and w.has_attr("pruned_shape")
    assert str(w) == "W_0 const <PARENTS: | CHILDERN: >\n  WEIGHT_TYPE: weight\n" \
                     "  WEIGHT: const<6,3,7,7|float32|NCHW>\n  ATTRS: pruned_shape=3,3,7,7 \n"
    with pytest.raises(ValidationError):
        MSCPrim(2, "X", "Add", {}, [w])


# ---- graph queries ------------------------------------------------------------------------
def test_graph_fields(conv_relu):
    assert conv_relu.name == "main" and conv_relu.node_names == ("inp_0", "conv2d", "relu")
    assert conv_relu.input_names == ("inp_0:0",) and conv_relu.output_names == ("relu:0",)
    assert dict(conv_relu.weight_holders) == {"const": ("conv2d",), "const_1": ("conv2d",)}
    assert conv_relu.has_node("relu") and not conv_relu.has_node("relu:0")
    with pytest.raises(TypeError):
        conv_relu.nodes["x"] = None


def test_find_node_suggests_close_names(conv_relu):
    with pytest.raises(ValidationError, match="did you mean relu"):
        conv_relu.find_node("rellu")


@pytest.mark.parametrize("ref, name", [
    ("relu:0", "relu:0"), ("relu", "relu:0"), ("inp_0", "inp_0:0"), ("const", "const"),
    ("conv2d.weight", "const"), ("conv2d.bias", "const_1"), ("conv2d:0", "conv2d:0")])
def test_find_tensor_by_name_alias_or_weight(conv_relu, ref, name):
    assert conv_relu.find_tensor(ref).name == name and conv_relu.has_tensor(ref)


@pytest.mark.parametrize("ref", ["conv2d", "relu:1", "ghost:0", "relu:x", "relu:", "const_9"])
def test_unknown_tensors(conv_relu, ref):
    assert not conv_relu.has_tensor(ref)
    with pytest.raises(ValidationError):
        conv_relu.find_tensor(ref)
    with pytest.raises(ValidationError):
        conv_relu.find_producer(ref)


def test_producers_and_consumers(conv_relu):
    g = conv_relu
    assert g.find_producer("relu:0").name == "relu" and g.find_producer("relu").name == "relu"
    assert g.find_producer(g.find_tensor("conv2d:0")).name == "conv2d"
    assert names(g.find_consumers("inp_0:0")) == ["conv2d"]
    assert names(g.find_consumers(g.find_tensor("conv2d:0"))) == ["relu"]
    assert g.find_consumers("relu:0") == []
    # A weight's producer is its first holder, its consumers every holder.
    assert g.find_producer("const").name == "conv2d"
    assert names(g.find_consumers("conv2d.bias")) == ["conv2d"]


def test_find_consumers_quirk_returns_all_children(residual):
    # split.0/split.1 read both outputs (a get_item reads the tuple); sigmoid reads split:1 only,
    # yet it is a "consumer" of split:0 too, as in MSC.
    assert names(residual.find_consumers("split:0")) == ["split.0", "split.1", "sigmoid"]
    exact = residual.find_consumers_and_indices("split:0")
    assert [(n.name, i) for n, i in exact] == [("split.0", 0), ("split.1", 0)]
    exact = residual.find_consumers_and_indices("split:1")
    assert [(n.name, i) for n, i in exact] == [("split.0", 1), ("split.1", 1), ("sigmoid", 0)]
    assert names(residual.find_consumers("inp_0")) == ["conv2d", "add"]
    with pytest.raises(ValidationError):
        residual.find_consumers_and_indices("const")


def test_tuple_outputs_and_graph_outputs(residual):
    split = residual.find_node("split")
    assert names(split.get_outputs()) == ["split:0", "split:1"]
    assert residual.find_producer("split.1:0").name == "split.1"
    assert residual.find_tensor("split:1") is split.output_at(1)
    assert names(residual.get_outputs()) == ["add:0", "sigmoid:0"]
    assert residual.output_at(-1).name == "sigmoid:0" and residual.input_at(0).name == "inp_0:0"
    assert names(residual.get_entries()) == ["inp_0"]
    assert names(residual.get_exits()) == ["add", "sigmoid"]
    with pytest.raises(ValidationError):
        residual.output_at(2)


def test_names_split_at_the_last_colon():
    inp = MSCJoint(0, "ns:inp", "", "input", outputs=[tensor("ns:inp:0", [1], "data")])
    relu = MSCJoint(1, "ns:relu", "", "nn.relu", inputs=[(inp, 0)],
                    outputs=[tensor("ns:relu:0", [1])])
    g = MSCGraph("main", [inp, relu], ["ns:inp:0"], ["ns:relu:0"])
    assert g.find_producer("ns:relu:0") is relu and names(g.find_consumers("data")) == ["ns:relu"]
    assert MSCGraph.from_json(g.to_json()).to_json() == g.to_json()


def test_a_name_without_index_must_be_a_constant_node():
    w = MSCTensor("w_c", "float32", "O", [1])
    const = MSCJoint(0, "c", "", "constant", outputs=[tensor("c:0", [1])], weights={"const": w})
    relu = MSCJoint(1, "relu", "", "nn.relu", inputs=[(const, 0)], outputs=[tensor("relu:0", [1])])
    g = MSCGraph("main", [const, relu], [], ["relu:0"])
    assert g.find_producer("c") is const and g.find_tensor("c").name == "c:0"
    assert g.find_producer("w_c") is const and names(g.find_consumers("c")) == ["relu"]
    with pytest.raises(ValidationError, match="constant node"):
        g.find_producer("relu")


def test_constant_node_and_prims(dynamic):
    assert dynamic.find_producer("const_2").name == "const_2"
    assert names(dynamic.find_consumers("const_2:0")) == ["add"]
    assert dynamic.prim_names == ("bz", "INT_1", "MUL_2")
    mul = dynamic.find_prim("MUL_2")
    assert names(mul.parents) == ["bz", "INT_1"] and names(dynamic.find_prim("bz").children) == [
        "MUL_2"]
    assert names(dynamic.get_prims()) == ["bz", "INT_1", "MUL_2"]
    assert dynamic.find_tensor("add").get_shape(True) == ["MUL_2", 16]
    with pytest.raises(ValidationError):
        dynamic.find_prim("bz2")


def test_shared_weights(shared):
    assert dict(shared.weight_holders) == {"const": ("matmul", "matmul_1")}
    assert shared.find_producer("const").name == "matmul"
    assert names(shared.find_consumers("matmul.weight")) == ["matmul", "matmul_1"]
    assert [w.name for w in shared.get_weights()] == ["const", "const"]
    assert "ID_2 matmul_1(M: matmul) <PARENTS: matmul| CHILDERN: >" in str(shared)


def test_generators(conv_relu):
    assert names(conv_relu.get_nodes()) == ["inp_0", "conv2d", "relu"]
    assert [t.name for t in conv_relu.get_weights()] == ["const", "const_1"]
    assert [t.name for t in conv_relu.get_tensors()] == ["inp_0:0", "const", "const_1",
                                                         "conv2d:0", "relu:0"]


# ---- summaries and printed form -----------------------------------------------------------
def test_inspect_conv_relu(conv_relu):
    assert conv_relu.inspect() == {
        "inputs": [{"name": "inp_0", "shape": [1, 3, 10, 10], "dtype": "float32",
                    "layout": "NCHW"}],
        "outputs": [{"name": "relu", "shape": [1, 6, 4, 4], "dtype": "float32",
                     "layout": "NCHW"}],
        "nodes": {"total": 3, "input": 1, "msc.conv2d_bias": 1, "nn.relu": 1}}


def test_inspect_residual(residual):
    summary = residual.inspect()
    assert "prims" not in summary
    assert summary["nodes"] == {"total": 9, "input": 1, "msc.conv2d_bias": 1, "split": 1,
                                "get_item": 2, "nn.relu": 1, "concat": 1, "add": 1,
                                "sigmoid": 1}
    assert [o["name"] for o in summary["outputs"]] == ["add", "sigmoid"]


def test_inspect_dynamic_has_prims(dynamic):
    assert dynamic.inspect() == {
        "inputs": [{"name": "inp_0", "shape": ["bz", 3, 10, 10], "dtype": "float32",
                    "layout": "NCHW"}],
        "outputs": [{"name": "add", "shape": ["MUL_2", 16], "dtype": "float32", "layout": ""}],
        "nodes": {"total": 5, "input": 1, "msc.conv2d_bias": 1, "reshape": 1, "constant": 1,
                  "add": 1},
        "prims": {"total": 3, "shape": 1, "Int": 1, "Mul": 1}}


def test_printed_graph(conv_relu, dynamic):
    assert str(conv_relu) == CONV_RELU_TEXT
    assert str(dynamic).startswith(DYNAMIC_PRIMS_TEXT)
    assert repr(conv_relu) == "<MSCGraph main: 3 nodes>"
    assert repr(conv_relu.find_node("relu")) == "<MSCJoint ID_2 relu>"


def test_printed_node_matches_the_documented_example():
    text = str(conv_graph().find_node("conv2d"))
    assert text.startswith("ID_1 conv2d <PARENTS: inp_0| CHILDERN: >\n"
                           "  IN: inp_0:0(inp_0)<1,3,10,10|float32|NCHW>\n"
                           "  OUT: conv2d:0(conv2d)<1,6,4,4|float32|NCHW>\n"
                           "  OPTYPE: msc.conv2d_bias\n  SCOPE: block\n  ATTRS: strides=1,1 ")
    assert text.endswith("  WEIGHTS: \n    weight: const(conv2d.weight)<6,3,7,7|float32|OIHW>\n"
                         "    bias: const_1(conv2d.bias)<6|float32|O>\n")


def test_graph_equal(conv_relu, residual):
    assert conv_relu.equal(conv_relu_graph()) and conv_relu.equal(conv_relu.clone())
    assert not conv_relu.equal(residual) and not conv_relu.equal("main")
    pruned = conv_relu.prune_weights({"relu:0": tensor("relu:0", [1, 6, 4, 5], "relu")})
    assert not conv_relu.equal(pruned)


# ---- construction checks ------------------------------------------------------------------
def _three_joints():
    return list(conv_relu_graph().clone().get_nodes())


def test_construction_rejects_reused_joints():
    with pytest.raises(ValidationError, match="already belongs") as info:
        MSCGraph("main", _three_joints(), ["inp_0:0"], ["relu:0"])
    assert info.value.context["node"] == "inp_0"


def _fresh(order=(0, 1, 2)):
    inp = MSCJoint(0, "inp_0", "", "input", outputs=[tensor("inp_0:0", [1], "inp_0")])
    relu = MSCJoint(1, "relu", "", "nn.relu", inputs=[(inp, 0)], outputs=[tensor("relu:0", [1])])
    sig = MSCJoint(2, "sig", "", "sigmoid", inputs=[(relu, 0)], outputs=[tensor("sig:0", [1])])
    joints = [inp, relu, sig]
    return [joints[i] for i in order]


@pytest.mark.parametrize("nodes, inputs, outputs, match, culprit", [
    (_fresh((0, 2, 1)), ["inp_0:0"], ["sig:0"], "comes after", {"node": "sig"}),
    (_fresh((1, 2)), [], ["sig:0"], "not a joint of this graph", {"node": "relu"}),
    (_fresh()[:1] * 2, ["inp_0:0"], [], "duplicate", {"node": "inp_0"}),
    ([_fresh()[0], *_fresh()[1:]], ["inp_0:0"], ["sig:0"], "not a joint", {"node": "relu"}),
    (_fresh(), ["inp_0:1"], ["sig:0"], "no such tensor", {"tensor": "inp_0:1"}),
    (_fresh(), ["inp_0:0"], ["out"], "no such tensor", {"tensor": "out"}),
    (_fresh(), "inp_0:0", ["sig:0"], "input_names", {"key": "input_names"}),
])
def test_construction_errors(nodes, inputs, outputs, match, culprit):
    with pytest.raises(ValidationError, match=match) as info:
        MSCGraph("main", nodes, inputs, outputs)
    assert culprit.items() <= info.value.context.items()


def test_construction_checks_indices():
    inp = MSCJoint(3, "inp_0", "", "input", outputs=[tensor("inp_0:0", [1])])
    with pytest.raises(ValidationError, match="index is 3, expected 0"):
        MSCGraph("main", [inp], ["inp_0:0"], [])


def test_failed_construction_leaves_joints_free():
    joints = _fresh()
    with pytest.raises(ValidationError):
        MSCGraph("main", joints, ["inp_0:0"], ["missing:0"])
    graph = MSCGraph("main", joints, ["inp_0:0"], ["sig:0"])  # the same joints still usable
    graph.check()
    assert names(joints[0].children) == ["relu"]


# ---- guarded changes ----------------------------------------------------------------------
def _sigmoid(graph, name, source):
    parent = graph.find_producer(source)
    out = tensor(f"{name}:0", parent.output_at(0).shape)
    return MSCJoint(0, name, "", "sigmoid", inputs=[(parent, 0)], outputs=[out])


def test_add_and_remove_node_keep_links(conv_relu):
    before = conv_relu.to_json()
    node = conv_relu.add_node(_sigmoid(conv_relu, "sig", "relu:0"))
    assert node.index == 3 and conv_relu.node_names[-1] == "sig"
    assert names(conv_relu.find_consumers("relu:0")) == ["sig"]
    conv_relu.check()
    assert conv_relu.remove_node("sig") is node
    assert conv_relu.to_json() == before and conv_relu.find_consumers("relu:0") == []
    conv_relu.check()


def test_remove_node_renumbers(conv_relu):
    conv_relu.add_node(_sigmoid(conv_relu, "sig", "conv2d:0"))
    conv_relu.add_node(_sigmoid(conv_relu, "sig_1", "relu:0"))
    conv_relu.remove_node("sig")
    assert conv_relu.find_node("sig_1").index == 3
    assert names(conv_relu.find_consumers("conv2d:0")) == ["relu"]
    conv_relu.check()


@pytest.mark.parametrize("name, match", [("conv2d", "has consumers: relu"),
                                         ("relu", "graph inputs/outputs"), ("ghost", "no node")])
def test_remove_node_refuses(conv_relu, name, match):
    with pytest.raises(ValidationError, match=match):
        conv_relu.remove_node(name)


def test_add_node_refuses(conv_relu, residual):
    with pytest.raises(ValidationError, match="duplicate"):
        conv_relu.add_node(_sigmoid(conv_relu, "relu", "conv2d:0"))
    stranger = _sigmoid(residual, "sig", "add:0")
    with pytest.raises(ValidationError, match="not a joint of this graph"):
        conv_relu.add_node(stranger)
    with pytest.raises(ValidationError, match="already belongs"):
        conv_relu.add_node(conv_relu.find_node("relu"))
    conv_relu.check()


def test_set_tensor_alias(conv_relu):
    conv_relu.set_tensor_alias("conv2d:0", "feature")
    assert conv_relu.find_tensor("feature").alias == "feature"
    conv_relu.set_tensor_alias(conv_relu.find_tensor("feature"), "feature_2")
    assert conv_relu.find_tensor("feature_2").name == "conv2d:0"
    assert not conv_relu.has_tensor("feature")
    with pytest.raises(ValidationError, match="already names another tensor"):
        conv_relu.set_tensor_alias("conv2d:0", "relu")
    conv_relu.set_tensor_alias("conv2d:0", "")
    assert not conv_relu.has_tensor("feature_2")


def test_set_tensor_alias_on_a_shared_weight(shared):
    graph = shared.clone()  # after a reload every holder has its own tensor object
    graph.set_tensor_alias("const", "linear.weight")
    aliases = {n.weight_at("weight").alias for n in graph.get_nodes() if n.weights}
    assert aliases == {"linear.weight"}
    assert graph.find_tensor("linear.weight").name == "const"


def test_prune_weights_returns_a_new_graph(conv_relu):
    conv = conv_relu.find_node("conv2d")
    pruned = conv_relu.prune_weights({
        "const": conv.weight_at("weight").clone(shape=[3, 3, 7, 7]),
        "conv2d.bias": conv.weight_at("bias").clone(shape=[3]),
        "conv2d:0": conv.output_at(0).clone(shape=[1, 3, 4, 4]),
        "relu:0": conv_relu.find_tensor("relu:0").clone(shape=[1, 3, 4, 4])})
    pruned.check()
    assert pruned.find_tensor("conv2d.weight").shape == [3, 3, 7, 7]
    assert pruned.find_node("relu").input_at(0).shape == [1, 3, 4, 4]
    assert pruned.inspect()["outputs"][0]["shape"] == [1, 3, 4, 4]
    assert conv_relu.find_tensor("const").shape == [6, 3, 7, 7]


def test_replace_tensor_rewrites_reshape_shape(dynamic):
    new = dynamic.find_tensor("reshape:0").clone(shape=[-1, 8], prims=["MUL_2", "8"])
    dynamic.replace_tensor("reshape:0", new)
    assert dynamic.find_node("reshape").get_attr("shape") == "-1,8"
    assert dynamic.find_node("add").input_at(0) is new
    dynamic.check()


def test_replace_tensor_updates_every_holder(shared):
    graph = shared.clone()
    graph.replace_tensor("const", graph.find_tensor("const").clone(shape=[4, 8], alias="w"))
    assert [n.weight_at("weight").shape for n in graph.get_nodes() if n.weights] == [[4, 8]] * 2
    assert graph.find_tensor("w").shape == [4, 8] and not graph.has_tensor("matmul.weight")


@pytest.mark.parametrize("ref, new, match", [
    ("const", tensor("const_x", [1]), "named 'const'"), ("ghost:0", tensor("ghost:0", [1]),
                                                         "no such tensor"),
    ("relu:0", "relu:0", "must be an MSCTensor")])
def test_replace_tensor_refuses(conv_relu, ref, new, match):
    with pytest.raises(ValidationError, match=match):
        conv_relu.replace_tensor(ref, new)


def test_views_cannot_desync_the_graph(conv_relu):
    relu = conv_relu.find_node("relu")
    assert isinstance(conv_relu.node_names, tuple) and isinstance(relu.children, tuple)
    assert isinstance(relu.inputs, tuple) and isinstance(relu.outputs, tuple)
    with pytest.raises(AttributeError):
        relu.parents = ()
    with pytest.raises(AttributeError):
        relu.index = 5


# ---- check() ------------------------------------------------------------------------------
def _break_index(g):
    g.find_node("relu")._index = 7


def _break_child_link(g):
    g.find_node("conv2d")._children.clear()


def _break_order(g):
    g._node_names.reverse()


def _break_holders(g):
    g._weight_holders["const"] = ("relu",)


def _break_output_name(g):
    g.find_node("relu")._outputs = (tensor("conv2d:0", [1]),)


def _break_input(g):
    g.find_node("relu")._inputs = ((0, 3),)


@pytest.mark.parametrize("breaker, culprit", [
    (_break_index, {"node": "relu"}), (_break_child_link, {"node": "relu"}),
    (_break_order, {}), (_break_holders, {"tensor": "const"}),
    (_break_output_name, {"node": "relu", "tensor": "conv2d:0"}),
    (_break_input, {"node": "relu"})])
def test_check_catches_broken_graphs(conv_relu, breaker, culprit):
    conv_relu.check()
    breaker(conv_relu)
    with pytest.raises(ValidationError) as info:
        conv_relu.check()
    assert info.value.context == culprit


# ---- WeightGraph --------------------------------------------------------------------------
MAIN = {"msc.conv2d_bias": ["weight"], "msc.linear": ["weight"]}
RELATION = {"add": "passby", "reshape": "reshape", "concat": "multi_inputs"}


def test_weight_graph_structure(prunable):
    wg = WeightGraph(prunable, MAIN, RELATION)
    wg.check()
    assert wg.name == "main_weights"
    assert wg.inspect() == {"nodes": {"total": 11, "weight": 3, "bias": 3, "gamma": 1,
                                      "beta": 1, "mean": 1, "var": 1, "output": 1}}
    links = {n.name: (n.weight_type, n.get_attr("weight_strategy"), names(n.parents))
             for n in wg.get_nodes()}
    assert links == {
        "const": ("weight", "main", []), "const_1": ("bias", "follow", ["const"]),
        "const_2": ("gamma", "follow", ["const"]), "const_3": ("beta", "follow", ["const"]),
        "const_4": ("mean", "follow", ["const"]), "const_5": ("var", "follow", ["const"]),
        "const_6": ("weight", "main", ["const"]), "const_7": ("bias", "follow", ["const_6"]),
        "add:0": ("output", "passby", ["const", "const_6"]),
        "const_8": ("weight", "main", ["add:0"]), "const_9": ("bias", "follow", ["const_8"])}
    # The residual add ties the two convs: they must keep the same out-channels.
    assert names(wg.find_node("const").friends) == ["const", "const_6"]
    assert names(wg.find_node("const_6").friends) == ["const", "const_6"]
    assert wg.find_node("const_8").friends == [] and wg.find_node("const_8").get_attr(
        "producer_type") == "msc.conv2d_bias"
    assert names(wg.find_node("const").children)[-1] == "add:0"


def test_weight_graph_print_and_prototxt(prunable):
    wg = WeightGraph(prunable, MAIN, RELATION)
    text = str(wg)
    assert text.startswith(
        "main_weights\nW_0 const <PARENTS: | CHILDERN: const_1,const_2,const_3,const_4,const_5,"
        "const_6,add:0>\n  FRIENDS: const,const_6\n  WEIGHT_TYPE: weight\n"
        "  WEIGHT: const(conv2d.weight)<4,3,3,3|float32|OIHW>\n"
        "  ATTRS: producer_type=msc.conv2d_bias weight_strategy=main \n\n")
    proto = wg.visualize()
    assert 'layer {\n  name: "add:0"\n  type: "output"\n  top: "add:0"\n  bottom: "const"\n' \
           '  bottom: "const_6"\n  layer_param {\n    idx: 8\n' \
           '    weight: "add:0<1,4,8,8|float32|NCHW>"\n' \
           '    producer_type: "add"\n    weight_strategy: "passby"\n  }\n}\n' in proto
    assert '    friend_0: "const"\n    friend_1: "const_6"\n' in proto


def test_weight_graph_skips_shared_nodes(shared):
    wg = WeightGraph(shared, MAIN, RELATION)
    assert wg.node_names == ("const",) and names(wg.find_node("const").parents) == []


def test_weight_graph_multi_inputs_binds_no_friends(prunable):
    wg = WeightGraph(prunable, MAIN, {"add": "multi_inputs"})
    assert wg.find_node("add:0").get_attr("weight_strategy") == "multi_inputs"
    assert all(n.friends == [] for n in wg.get_nodes())


def test_weight_graph_reshape_is_passby(dynamic):
    wg = WeightGraph(dynamic, MAIN, {"reshape": "reshape"})
    reshape = wg.find_node("reshape:0")
    assert reshape.get_attr("weight_strategy") == "passby" and names(reshape.parents) == ["const"]
    # the constant node is a weighted op: its weight follows whatever it reaches (nothing)
    assert wg.find_node("const_2").get_attr("weight_strategy") == "follow"


@pytest.mark.parametrize("main, relation, match", [
    (MAIN, {"add": "prune"}, "unknown weight strategy"), ({"conv": "weight"}, {}, "main roles")])
def test_weight_graph_checks_its_tables(prunable, main, relation, match):
    with pytest.raises(ValidationError, match=match):
        WeightGraph(prunable, main, relation)
