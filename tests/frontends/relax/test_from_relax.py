"""from_relax: Relax modules -> MSCGraph as TVM's MSC built them (msc-conventions 1, 2.1, 4).

Each module is built with the BlockBuilder, the way TVM's torch importer emits it; the
assertions are the names, optypes, roles, attrs and inspect() dicts MSC users compare."""

import json

import numpy as np
import pytest

from msc import relax
from msc.graph import testing
from msc.relax import op as R
from tests.helpers.relax_graphs import (
    B_CONV,
    W_CONV,
    const,
    conv_fx,
    optypes,
    roles,
    translate,
    var,
)

# --------------------------------------------------------------------------------------------
# The conventions' JSON example: torch Conv2d(3, 6, 7) on [1, 3, 10, 10] as from_fx emits it.

def _without_weight_aliases(data):
    for node in data["nodes"]:
        for weight in node["weights"].values():
            weight["alias"] = ""
    return data


def test_conv_example_equals_conventions_json():
    graph, _ = translate([var("inp_0", (1, 3, 10, 10))], conv_fx)
    got = json.loads(graph.to_json())
    want = _without_weight_aliases(json.loads(testing.conv_graph().to_json()))
    got_attrs, want_attrs = got["nodes"][1].pop("attrs"), want["nodes"][1].pop("attrs")
    assert got == want
    # the example shortens the attrs ("…"): every listed attr matches, out_dtype follows
    assert {k: got_attrs[k] for k in want_attrs} == want_attrs
    assert list(got_attrs) == [*want_attrs, "out_dtype"] and got_attrs["out_dtype"] == "float32"


def test_conv_example_inspect_and_weights():
    graph, weights = translate([var("inp_0", (1, 3, 10, 10))], conv_fx)
    assert graph.inspect() == testing.conv_graph().inspect()
    assert list(weights) == ["const", "const_1"]
    np.testing.assert_array_equal(weights["const"], W_CONV.data)
    np.testing.assert_array_equal(weights["const_1"], B_CONV.data)  # [1,6,1,1] -> [6]
    graph.check()


def test_conv_example_without_folding_keeps_expand_bias():
    graph, weights = translate([var("inp_0", (1, 3, 10, 10))], conv_fx,
                               opt_config={"opt_level": 0})
    conv = graph.find_node("conv2d")
    assert conv.optype == "msc.conv2d_bias"
    assert conv.get_attr("expand_bias") == "1,6,1,1"
    assert weights["const_1"].shape == (6,)


# --------------------------------------------------------------------------------------------
# Fused patterns (4.2).

def test_conv1d_bias_with_folded_bias():
    graph, _ = translate([var("x", (1, 3, 16))], lambda bb, x: bb.emit(R.add(
        bb.emit(R.nn.conv1d(x, const(4, 3, 3))), const(1, 4, 1))))
    assert optypes(graph) == [("x", "input"), ("conv1d", "msc.conv1d_bias")]
    conv = graph.find_node("conv1d")
    assert {r: (t.name, t.layout.name, t.shape) for r, t in conv.weights.items()} == {
        "weight": ("const", "OIW", [4, 3, 3]), "bias": ("const_1", "O", [4])}


def test_conv_plus_full_constant_is_not_a_bias():
    graph, _ = translate([var("x", (1, 3, 8, 8))], lambda bb, x: bb.emit(R.add(
        bb.emit(R.nn.conv2d(x, const(4, 3, 3, 3))), const(1, 4, 6, 6))))
    assert [t for _, t in optypes(graph)] == ["input", "nn.conv2d", "constant", "add"]


def test_fusion_skips_a_conv_whose_result_is_used_elsewhere():
    def body(bb, x):
        conv = bb.emit(R.nn.conv2d(x, const(4, 3, 3, 3)))
        biased = bb.emit(R.add(conv, const(1, 4, 1, 1)))
        return bb.emit(R.multiply(biased, bb.emit(R.nn.relu(conv))))

    graph, _ = translate([var("x", (1, 3, 8, 8))], body)
    assert [t for _, t in optypes(graph)] == ["input", "nn.conv2d", "constant", "add",
                                              "nn.relu", "multiply"]


def linear_fx(w, b=None):
    """from_fx's Linear: matmul(x, permute_dims(w)) (+ add(b))."""
    def body(bb, x):
        out = bb.emit(R.matmul(x, bb.emit(R.permute_dims(w)), out_dtype="float32"))
        return bb.emit(R.add(out, b)) if b is not None else out
    return body


@pytest.mark.parametrize("opt_level", [0, 1])
def test_linear_bias_from_fx(opt_level):
    w, b = const(16, 8), const(16)
    graph, weights = translate([var("x", (2, 8))], linear_fx(w, b),
                               opt_config={"opt_level": opt_level})
    assert optypes(graph) == [("x", "input"), ("matmul", "msc.linear_bias")]
    node = graph.find_node("matmul")
    assert {r: (t.layout.name, t.shape) for r, t in node.weights.items()} == {
        "weight": ("OI", [16, 8]), "bias": ("O", [16])}
    np.testing.assert_array_equal(weights[node.weight_at("weight").name], w.data)
    np.testing.assert_array_equal(weights[node.weight_at("bias").name], b.data)
    expected = {"out_dtype": "float32"} if opt_level else {"axes": "", "out_dtype": "float32"}
    assert node.get_attrs() == expected


def test_linear_from_a_folded_io_weight_is_stored_oi():
    w = const(8, 16)  # [in, out], as FoldConstant leaves permute_dims(w)
    graph, weights = translate([var("x", (2, 8))], lambda bb, x: bb.emit(R.matmul(x, w)))
    node = graph.find_node("matmul")
    assert node.optype == "msc.linear"
    assert (node.weight_at("weight").layout.name, node.weight_at("weight").shape) == (
        "OI", [16, 8])
    np.testing.assert_array_equal(weights["const"], w.data.T)


def test_linear_bias_matches_a_commuted_add():
    w, b = const(8, 4), const(4)
    graph, _ = translate([var("x", (3, 8))],
                         lambda bb, x: bb.emit(R.add(b, bb.emit(R.matmul(x, w)))))
    assert optypes(graph) == [("x", "input"), ("matmul", "msc.linear_bias")]


def test_permute_with_explicit_axes_is_not_a_linear_without_folding():
    def body(bb, x):
        return bb.emit(R.matmul(x, bb.emit(R.permute_dims(const(4, 8), [1, 0]))))

    graph, _ = translate([var("x", (3, 8))], body, opt_config={"opt_level": 0})
    assert [t for _, t in optypes(graph)] == ["input", "constant", "permute_dims", "matmul"]


def test_embedding_take_astype():
    table = const(10, 3)
    graph, weights = translate([var("ids", (4,), "int64")], lambda bb, ids: bb.emit(
        R.take(table, bb.emit(R.astype(ids, "int32")), axis=0)))
    assert optypes(graph) == [("ids", "input"), ("take", "msc.embedding")]
    node = graph.find_node("take")
    assert list(node.weights) == ["weight"] and node.get_attrs() == {
        "dtype": "int32", "axis": "0", "mode": "fast"}
    np.testing.assert_array_equal(weights["const"], table.data)


def embedding_fx(table, rows, cols):
    def body(bb, ids):
        flat = bb.emit(R.reshape(bb.emit(R.astype(ids, "int32")), [-1]))
        taken = bb.emit(R.take(table, flat, axis=0))
        return bb.emit(R.reshape(taken, [rows, cols, table.data.shape[1]]))
    return body


def test_embedding_reshape_form():
    graph, _ = translate([var("inp_0", (2, 5), "int64")], embedding_fx(const(10, 3), 2, 5))
    assert optypes(graph) == [("inp_0", "input"), ("take", "msc.embedding")]
    node = graph.find_node("take")
    assert node.get_attrs() == {"dtype": "int32", "axis": "0", "mode": "fast",
                                "reduce_in": "10,", "expand_out": "2,5,3"}
    assert node.output_at(0).shape == [2, 5, 3]


def test_embedding_needs_an_int32_cast():
    graph, _ = translate([var("ids", (4,), "int32")], lambda bb, ids: bb.emit(
        R.take(const(10, 3), bb.emit(R.astype(ids, "int64")), axis=0)))
    assert [t for _, t in optypes(graph)] == ["input", "astype", "constant", "take"]


def attention_fx(bb, q, k, v, *mask):
    def swap(t):
        return bb.emit(R.permute_dims(t, [0, 2, 1, 3]))
    op = R.nn.attention_bias if mask else R.nn.attention
    return swap(bb.emit(op(swap(q), swap(k), swap(v), *mask)))


@pytest.mark.parametrize("with_mask", [False, True])
def test_attention(with_mask):
    params = [var(n, (1, 2, 4, 8)) for n in ("q", "k", "v")]
    params += [var("mask", (1, 2, 4, 4))] if with_mask else []
    graph, _ = translate(params, attention_fx)
    name = "attention_bias" if with_mask else "attention"
    assert optypes(graph)[-1] == (name, "msc.attention")
    node = graph.find_node(name)
    assert [t.name for t in node.get_inputs()] == [f"{p.name_hint}:0" for p in params]
    assert node.get_attrs() == {"axes": "0,2,1,3", "axes_1": "0,2,1,3", "axes_2": "0,2,1,3",
                                "scale": "", "causal_mask": "", "window_size": "",
                                "axes_3": "0,2,1,3"}


# --------------------------------------------------------------------------------------------
# Weight roles (4.3) and constant nodes.

def test_batch_norm_roles_and_only_output_zero():
    def body(bb, x):
        bn = bb.emit(R.nn.batch_norm(x, const(3), const(3), const(3), const(3), axis=1))
        return bb.emit(relax.TupleGetItem(bn, 0))

    graph, _ = translate([var("x", (1, 3, 4, 4))], body)
    assert optypes(graph) == [("x", "input"), ("batch_norm", "nn.batch_norm"),
                              ("batch_norm.0", "get_item")]
    assert roles(graph, "batch_norm") == {
        r: (f"const{s}", "O", [3]) for r, s in
        (("gamma", ""), ("beta", "_1"), ("mean", "_2"), ("var", "_3"))}
    bn = graph.find_node("batch_norm")
    assert len(bn.outputs) == 1 and bn.get_attr("epsilon") == "0.000010"
    assert bn.get_attr("center") == "1" and bn.get_attr("training") == "1"
    item = graph.find_node("batch_norm.0")
    assert item.get_attrs() == {"index": "0"} and item.input_at(0).name == "batch_norm:0"


@pytest.mark.parametrize("norm", ["layer_norm", "group_norm"])
def test_norm_roles(norm):
    def body(bb, x):
        if norm == "layer_norm":
            return bb.emit(R.nn.layer_norm(x, const(8), const(8), axes=[-1]))
        return bb.emit(R.nn.group_norm(x, const(4), const(4), 2, 1, [2, 3]))

    shape = (2, 8) if norm == "layer_norm" else (1, 4, 3, 3)
    graph, _ = translate([var("x", shape)], body)
    assert list(graph.find_node(norm).weights) == ["gamma", "beta"]


def test_conv_without_bias_keeps_its_weight():
    graph, _ = translate([var("x", (1, 3, 8, 8))],
                         lambda bb, x: bb.emit(R.nn.conv2d(x, const(4, 3, 3, 3))))
    assert roles(graph, "conv2d") == {"weight": ("const", "OIHW", [4, 3, 3, 3])}


@pytest.mark.parametrize("build, name, attrs", [
    (lambda bb, x: R.reshape(x, [4, 6]), "reshape", {"shape": "4,6"}),
    (lambda bb, x: R.broadcast_to(x, [3, 2, 12]), "broadcast_to", {"shape": "3,2,12"}),
    (lambda bb, x: R.clip(x, 0, 6), "clip", {"min": "0", "max": "6"}),
    (lambda bb, x: R.strided_slice(x, [1], [0], [6]), "strided_slice",
     {"assume_inbound": "0", "axes": "1,", "begin": "0,", "end": "6,"}),
    (lambda bb, x: R.triu(x, 1), "triu", {"k": "1"}),
    (lambda bb, x: R.sum(x, axis=[1]), "sum", {"axis": "1,", "keepdims": "0"}),
])
def test_shape_and_scalar_arguments_become_attrs(build, name, attrs):
    graph, _ = translate([var("x", (2, 12))], lambda bb, x: bb.emit(build(bb, x)))
    node = graph.find_node(name)
    assert node.get_attrs() == attrs and node.weights == {}
    assert [p.name for p in node.parents] == ["x"]


def test_resize2d_size_is_an_attr():
    graph, _ = translate([var("x", (1, 3, 4, 4))],
                         lambda bb, x: bb.emit(R.image.resize2d(x, [8, 8])))
    assert graph.find_node("resize2d").get_attr("size") == "8,8"


def test_full_reads_its_fill_value_as_a_constant_node():
    graph, _ = translate([var("x", (2, 3))], lambda bb, x: bb.emit(R.add(
        x, bb.emit(R.full([2, 3], relax.const(1.5, "float32"))))), opt_config={"opt_level": 0})
    assert optypes(graph) == [("x", "input"), ("const", "constant"), ("full", "full"),
                              ("add", "add")]
    assert graph.find_node("full").get_attr("shape") == "2,3"
    assert graph.find_node("const").get_attrs() == {"scalar": "1.500000"}


def test_constants_of_plain_ops_are_constant_nodes():
    c = const(3)
    graph, weights = translate([var("x", (2, 3))], lambda bb, x: bb.emit(R.add(x, c)))
    node = graph.find_node("const")
    assert node.optype == "constant" and node.scope == []
    assert [t.name for t in node.outputs] == ["const:0"]
    assert roles(graph, "const") == {"const": ("const", "B", [3])}  # last letter of AB
    assert [t.name for t in graph.find_node("add").get_inputs()] == ["x:0", "const:0"]
    np.testing.assert_array_equal(weights["const"], c.data)


def test_scalar_constants_follow_float_precision():
    def body(bb, x):
        return bb.emit(R.multiply(x, relax.const(0.123456789, "float32")))

    graph, _ = translate([var("x", (2,))], body, build_config={"float_precision": 3})
    assert graph.find_node("const").get_attrs() == {"scalar": "0.123"}


def test_concat_of_a_constant_and_a_tensor():
    graph, _ = translate([var("x", (2, 3))],
                         lambda bb, x: bb.emit(R.concat([x, const(2, 3)], axis=0)))
    concat = graph.find_node("concat")
    assert [t.name for t in concat.get_inputs()] == ["x:0", "const:0"]
    assert concat.get_attrs() == {"axis": "0"}


def test_shared_constant_weights_get_a_shared_ref():
    w = const(8, 8)

    def body(bb, x):
        return bb.emit(R.matmul(bb.emit(R.matmul(x, w)), w))

    graph, weights = translate([var("x", (1, 8))], body)
    first, second = graph.find_node("matmul"), graph.find_node("matmul_1")
    assert (first.shared_ref, second.shared_ref) == ("", "matmul")
    assert graph.weight_holders["const"] == ("matmul", "matmul_1")
    assert list(weights) == ["const"]
