"""from_relax: names, aliases, scope and outputs (msc-conventions 4.4), and the inputs it takes
(params, TVMScript text, the entry function)."""



import numpy as np
import pytest

from msc import relax
from msc.errors import UnsupportedOpError, ValidationError
from msc.frontends.translate import from_relax
from msc.relax import op as R
from msc.tir import expr as tir
from tests.helpers.relax_graphs import (
    RNG,
    W_CONV,
    const,
    conv_fx,
    module,
    optypes,
    roles,
    translate,
    var,
)

# --------------------------------------------------------------------------------------------
# Names, aliases, scope, outputs (4.4).

def test_names_are_unique_op_names():
    def body(bb, x):
        a = bb.emit(R.nn.relu(x))
        b = bb.emit(R.nn.relu(a))
        parts = bb.emit(R.split(b, 2, axis=1))
        first = bb.emit(relax.TupleGetItem(parts, 0))
        second = bb.emit(relax.TupleGetItem(parts, 1))
        return bb.emit(R.add(first, second))

    graph, _ = translate([var("x", (2, 4))], body)
    assert optypes(graph) == [("x", "input"), ("relu", "nn.relu"), ("relu_1", "nn.relu"),
                              ("split", "split"), ("split.0", "get_item"),
                              ("split.1", "get_item"), ("add", "add")]
    # a get_item reads every output of its tuple
    assert [t.name for t in graph.find_node("split.1").get_inputs()] == ["split:0", "split:1"]


def test_absorbed_calls_use_up_no_name():
    def body(bb, x):  # conv + bias (fused: its add is absorbed), then a residual add
        conv = bb.emit(R.nn.conv2d(x, const(6, 6, 1, 1)))
        return bb.emit(R.add(bb.emit(R.add(conv, const(1, 6, 1, 1))), x))

    graph, _ = translate([var("inp_0", (1, 6, 10, 10))], body)
    assert optypes(graph) == [("inp_0", "input"), ("conv2d", "msc.conv2d_bias"),
                              ("add", "add")]


def test_use_var_name():
    def body(bb, x):
        return bb.emit(R.nn.relu(bb.emit(R.nn.relu(x), "first")), "second")

    graph, _ = translate([var("x", (2,))], body, build_config={"use_var_name": True})
    assert [n.name for n in graph.get_nodes()] == ["x", "first", "second"]


def test_aliases_default_to_node_names():
    graph, _ = translate([var("a", (2,)), var("b", (2,))],
                         lambda bb, a, b: bb.emit(R.add(a, b)))
    assert graph.inspect()["inputs"][1]["name"] == "b"
    assert [t.alias for t in graph.get_outputs()] == ["add"]
    assert graph.find_tensor("add").name == "add:0"


def test_given_aliases_and_graph_name():
    graph, _ = translate([var("a", (2,))], lambda bb, a: bb.emit(R.nn.relu(a)),
                         build_config={"input_aliases": ["data"], "output_aliases": ["prob"],
                                       "graph_name": "net"})
    assert graph.name == "net"
    assert [t.alias for t in graph.get_inputs() + graph.get_outputs()] == ["data", "prob"]
    assert graph.find_tensor("prob").name == "relu:0"


def test_tuple_outputs_are_aliased_by_tensor_name():
    def body(bb, x):
        return bb.emit(relax.Tuple([bb.emit(R.nn.relu(x)), bb.emit(R.sigmoid(x))]))

    graph, _ = translate([var("x", (2, 3))], body)
    assert graph.output_names == ("tuple:0", "tuple:1")
    assert [t.alias for t in graph.get_outputs()] == ["tuple_0", "tuple_1"]
    assert graph.find_node("tuple").optype == "tuple"


def test_a_tuple_literal_result_lists_its_fields():
    bb = relax.BlockBuilder()
    x = var("x", (2, 3))
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit_output(R.nn.relu(x))
            b = bb.emit_output(R.sigmoid(x))
        bb.emit_func_output(relax.Tuple([a, b]))
    graph, _ = from_relax(bb.get())
    assert graph.output_names == ("relu:0", "sigmoid:0")
    assert [t.alias for t in graph.get_outputs()] == ["relu", "sigmoid"]


def test_scope_names_the_binding_blocks():
    bb = relax.BlockBuilder()
    x = var("x", (2,))
    with bb.function("main", [x]):
        first = bb.emit(R.nn.relu(x))
        with bb.dataflow():
            out = bb.emit_output(R.sigmoid(first))
        bb.emit_func_output(out)
    graph, _ = from_relax(bb.get())
    assert [n.scope for n in graph.get_nodes()] == [[], ["block"], ["block_1"]]


def test_dropout_vanishes():
    def body(bb, x):
        dropped = bb.emit(R.nn.dropout(bb.emit(R.nn.relu(x)), 0.5))
        return bb.emit(R.sigmoid(bb.emit(relax.TupleGetItem(dropped, 0))))

    graph, _ = translate([var("x", (2,))], body)
    assert optypes(graph) == [("x", "input"), ("relu", "nn.relu"), ("sigmoid", "sigmoid")]
    assert graph.find_node("sigmoid").input_at(0).name == "relu:0"
    dropped_twice, _ = translate([var("x", (2,))], lambda bb, x: bb.emit(R.nn.relu(
        bb.emit(relax.TupleGetItem(bb.emit(R.nn.dropout(body(bb, x))), 0)))))
    assert [n.name for n in dropped_twice.get_nodes()] == ["x", "relu", "sigmoid", "relu_1"]


def test_prune_graph_drops_what_the_outputs_do_not_need():
    def body(bb, x):
        bb.emit(R.nn.relu(x))  # dead, kept without FoldConstant's cleanup
        return bb.emit(R.sigmoid(x))

    kw = {"opt_config": {"opt_level": 0}}
    graph, _ = translate([var("x", (2,))], body, **kw)
    assert [n.name for n in graph.get_nodes()] == ["x", "relu", "sigmoid"]
    graph, _ = translate([var("x", (2,))], body, build_config={"prune_graph": True}, **kw)
    assert [(n.index, n.name) for n in graph.get_nodes()] == [(0, "x"), (1, "sigmoid")]


def test_shape_expr_bindings_are_shape_nodes():
    def body(bb, x):
        shape = bb.emit(relax.ShapeExpr([2, 3]))
        return bb.emit(R.reshape(x, shape))

    graph, _ = translate([var("x", (6,))], body, opt_config={"opt_level": 0})
    node = graph.find_node("shape")
    assert node.optype == "shape" and node.get_attrs() == {"shape": "2,3"}
    assert (node.output_at(0).dtype, node.output_at(0).shape) == ("int32", [2])
    assert graph.find_node("reshape").get_attr("shape") == "2,3"


# --------------------------------------------------------------------------------------------
# Inputs: params, text, entry.

def test_params_are_bound_as_weights():
    x, w = var("x", (1, 3, 8, 8)), var("w", (4, 3, 3, 3))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            out = bb.emit_output(R.nn.conv2d(x, w))
        bb.emit_func_output(out)
    data = RNG.standard_normal((4, 3, 3, 3)).astype("float32")
    graph, weights = from_relax(bb.get(), params={"w": data})
    assert [t.name for t in graph.get_inputs()] == ["x:0"]
    assert graph.find_node("conv2d").weight_at("weight").layout.name == "OIHW"
    np.testing.assert_array_equal(weights["const"], data)


def test_tvmscript_text_input():
    mod = module([var("inp_0", (1, 3, 10, 10))], conv_fx)
    graph, weights = from_relax(mod.script(show_meta=True))
    expected, _ = from_relax(mod)
    assert graph.to_json() == expected.to_json()
    np.testing.assert_array_equal(weights["const"], W_CONV.data)


def test_entry_selects_the_function():
    mod = module([var("x", (2,))], lambda bb, x: bb.emit(R.nn.relu(x)), name="forward")
    graph, _ = from_relax(mod, trans_config={"entry": "forward"})
    assert graph.name == "forward" and graph.find_node("relu").optype == "nn.relu"


def test_missing_entry_is_a_validation_error():
    mod = module([var("x", (2,))], lambda bb, x: bb.emit(R.nn.relu(x)), name="forward")
    with pytest.raises(ValidationError, match="no Relax function 'main'") as err:
        from_relax(mod)
    assert "forward" in str(err.value)


def test_unknown_build_config_key():
    with pytest.raises(ValidationError, match="prune"):
        translate([var("x", (2,))], lambda bb, x: bb.emit(R.nn.relu(x)),
                  build_config={"prune": True})


def test_unsupported_calls_are_all_listed():
    x = var("x", (2, 3))
    bb = relax.BlockBuilder()
    sinfo = relax.TensorStructInfo((2, 3), "float32")
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(R.call_tir(relax.GlobalVar("add_kernel"), [x], out_sinfo=sinfo), "a")
            b = bb.emit(R.nn.relu(a), "b")
            c = bb.emit(R.call_pure_packed(relax.ExternFunc("my_fn"), [b], sinfo_args=sinfo),
                        "c")
            out = bb.emit_output(R.call_tir(relax.GlobalVar("mul_kernel"), [c],
                                            out_sinfo=sinfo), "d")
        bb.emit_func_output(out)
    with pytest.raises(UnsupportedOpError) as err:
        from_relax(bb.get())
    assert [(i["op"], i["node"]) for i in err.value.items] == [
        ("call_tir", "a"), ("call_pure_packed", "c"), ("call_tir", "d")]
    assert "3 value(s)" in str(err.value) and "call_pure_packed (node='c'" in str(err.value)


def test_a_composite_function_call_is_one_node():
    x, d = var("x", (1, 3, 8, 8)), var("d", (1, 3, 8, 8))
    w, b = var("w", (4, 3, 3, 3)), var("b", (4,))
    bb = relax.BlockBuilder()
    with bb.function("fused", [d, w, b], attrs={"Composite": "msc.conv2d_bias"}, private=True):
        with bb.dataflow():
            conv = bb.emit(R.nn.conv2d(d, w))
            out = bb.emit_output(R.add(conv, bb.emit(R.reshape(b, [1, 4, 1, 1]))))
        fused = bb.emit_func_output(out)
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.Call(fused, [x, const(4, 3, 3, 3), const(4)]))
        bb.emit_func_output(out)
    graph, _ = from_relax(bb.get(), opt_config={"opt_level": 0})
    assert optypes(graph) == [("x", "input"), ("msc_fused_0", "msc.conv2d_bias")]
    node = graph.find_node("msc_fused_0")
    assert roles(graph, "msc_fused_0") == {"weight": ("const", "OIHW", [4, 3, 3, 3]),
                                            "bias": ("const_1", "O", [4])}
    assert node.get_attr("expand_bias") == "1,4,1,1"


def test_layouts_may_be_required():
    def body(bb, x):
        return bb.emit(R.clip(x, 0, 6))

    assert translate([var("x", (2, 3))], body)[0].find_node("clip").output_at(0).layout.name \
        == ""
    with pytest.raises(ValidationError, match="no layout"):
        translate([var("x", (2, 3))], body, trans_config={"allow_layout_missing": False})


def test_a_nested_tuple_cannot_be_a_node():
    def body(bb, x):
        inner = bb.emit(relax.Tuple([x, x]))
        return bb.emit(relax.Tuple([inner, x]))

    with pytest.raises(UnsupportedOpError) as err:
        translate([var("x", (2,))], body)
    assert [i["op"] for i in err.value.items] == ["tuple"]


@pytest.mark.parametrize("bias_shape, fused", [((4,), True), ((1, 4), True), ((1,), False),
                                               ((3, 4), False)])
def test_linear_bias_shapes(bias_shape, fused):
    graph, _ = translate([var("x", (3, 8))], lambda bb, x: bb.emit(R.add(
        bb.emit(R.matmul(x, const(8, 4))), const(*bias_shape))))
    assert (graph.find_node("matmul").optype == "msc.linear_bias") == fused


@pytest.mark.parametrize("bias_shape, fused", [((1, 4, 1, 1), True), ((1, 1, 1, 6), False),
                                               ((1, 1, 1, 1), False)])
def test_conv_bias_must_run_along_the_channels(bias_shape, fused):
    graph, _ = translate([var("x", (1, 3, 8, 8))], lambda bb, x: bb.emit(R.add(
        bb.emit(R.nn.conv2d(x, const(4, 3, 3, 3))), const(*bias_shape))))
    assert (graph.find_node("conv2d").optype == "msc.conv2d_bias") == fused


def test_scalar_weights_also_set_their_role_attr():
    params = [var("d", (2, 4))] + [var(f"f{i}", ()) for i in (1, 2, 3)]
    bb = relax.BlockBuilder()
    with bb.function("gelu", params, attrs={"Composite": "msc.gelu"}, private=True):
        with bb.dataflow():
            d, f1, f2, f3 = params
            y = bb.emit(R.multiply(bb.emit(R.multiply(d, f1)), bb.emit(R.add(f2, f3))))
            out = bb.emit_output(y)
        gelu = bb.emit_func_output(out)
    x = var("x", (2, 4))
    with bb.function("main", [x]):
        with bb.dataflow():
            scalars = [relax.const(v, "float32") for v in (0.5, 1.0, 0.044715)]
            out = bb.emit_output(relax.Call(gelu, [x, *scalars]))
        bb.emit_func_output(out)
    graph, weights = from_relax(bb.get())
    node = graph.find_node("msc_fused_0")
    assert node.optype == "msc.gelu"
    assert list(node.weights) == ["factor_1", "factor_2", "factor_3"]
    assert {k: node.get_attr(k) for k in node.weights} == {
        "factor_1": "0.500000", "factor_2": "1.000000", "factor_3": "0.044715"}
    assert [w.shape for w in weights.values()] == [(), (), ()]


def test_call_dps_packed_of_an_extern_is_a_plugin():
    x, y = var("x", (2, 3)), var("y", (2, 3))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            call = R.call_dps_packed(relax.ExternFunc("my_plugin"), [x, y],
                                     out_sinfo=relax.TensorStructInfo((2, 3), "float32"))
            out = bb.emit_output(R.nn.relu(bb.emit(call)))
        bb.emit_func_output(out)
    graph, _ = from_relax(bb.get())
    assert optypes(graph)[2:] == [("my_plugin", "my_plugin"), ("relu", "nn.relu")]
    assert [t.name for t in graph.find_node("my_plugin").get_inputs()] == ["x:0", "y:0"]


@pytest.mark.parametrize("attrs, optype", [
    ({"Composite": "tensorrt.nn.conv2d"}, "nn.conv2d"),
    ({"Composite": "msc.conv2d_bias"}, "msc.conv2d_bias"),
    ({"Composite": "dnnl.conv2d_relu"}, "dnnl.conv2d_relu"),
    ({"Composite": "x.nn.relu", "Optype": "my.op"}, "my.op"),
])
def test_composite_optypes(attrs, optype):
    x, d = var("x", (2, 3)), var("d", (2, 3))
    bb = relax.BlockBuilder()
    with bb.function("inner", [d], attrs=attrs, private=True):
        with bb.dataflow():
            out = bb.emit_output(R.nn.relu(d))
        inner = bb.emit_func_output(out)
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.Call(inner, [x]))
        bb.emit_func_output(out)
    graph, _ = from_relax(bb.get())
    assert graph.find_node("msc_fused_0").optype == optype


# --------------------------------------------------------------------------------------------
# A ShapeExpr result (torch ``x.size()`` / ``x.shape``) is a ``shape`` node and a graph output.

SHAPE_OUT = {"name": "shape", "shape": [4], "dtype": "int32", "layout": "O"}


@pytest.mark.parametrize("opt_level", [0, 1])
def test_shape_expr_result_is_a_shape_output(opt_level):
    """FoldConstant leaves ``return R.shape([...])`` unbound; opt_level 0 keeps the binding."""
    graph, _ = translate([var("x", (1, 3, 10, 10))],
                         lambda bb, x: bb.emit(relax.ShapeExpr([1, 3, 10, 10])),
                         opt_config={"opt_level": opt_level})
    summary = graph.inspect()
    assert summary["outputs"] == [SHAPE_OUT]
    assert summary["nodes"] == {"total": 2, "input": 1, "shape": 1}
    assert graph.find_node("shape").get_attrs() == {"shape": "1,3,10,10"}


def test_symbolic_shape_expr_result():
    bz = tir.Var("bz", "int64")
    graph, _ = translate([var("x", (bz, 3, 10, 10))],
                         lambda bb, x: bb.emit(relax.ShapeExpr([bz, 3, 10, 10])))
    assert graph.inspect()["outputs"] == [SHAPE_OUT]
    # MSC's attr, plus msc's dim_prims: where the codegens read the symbolic dims from
    assert graph.find_node("shape").get_attrs() == {"shape": "-1,3,10,10",
                                                    "dim_prims": "bz,3,10,10"}
