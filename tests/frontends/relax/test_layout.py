"""Layout inference (frontends/relax/layout.py) against msc-conventions section 3 and the
layouts MSC's test_graph_build.py expects for the same Relax programs."""

import numpy as np
import pytest

from msc import relax
from msc.errors import ValidationError
from msc.frontends.relax import infer_layouts
from msc.frontends.relax.layout_rules import COMMON_RULE, FAMILY_RULES, RULES, rule_for
from msc.frontends.relax.layout_strings import expand_layout, infer_reshape_axes
from msc.relax import op as R
from msc.relax.op.registry import OPS, OpDef
from msc.tir import expr as tir


def var(name, shape, dtype="float32"):
    return relax.Var(name, relax.TensorStructInfo(shape, dtype))


def const(*shape, dtype="float32"):
    return relax.const(np.ones(shape, dtype))


def build(params, body, name="main"):
    """``body(bb, *params)`` emits the bindings and returns the output."""
    bb = relax.BlockBuilder()
    with bb.function(name, params):
        with bb.dataflow():
            out = body(bb, *params)
        bb.emit_func_output(out)
    return bb.get()[name]


def layouts(params, body, **kw):
    """{var name: layout}, plus "const<shape>" keys for constants."""
    found = infer_layouts(build(params, body), **kw)
    return {_key(k): v for k, v in found.items()}


def _key(expr):
    if isinstance(expr, relax.Var):
        return expr.name_hint
    return "const" + "x".join(map(str, expr.data.shape))


def emit(bb, call, name):
    return bb.emit(call, name)


# --------------------------------------------------------------------------------------------
# Seeds from attrs.

def test_conv1d_is_ncw():
    got = layouts([var("x", (1, 3, 10))],
                  lambda bb, x: emit(bb, R.nn.conv1d(x, const(6, 3, 7)), "conv"))
    assert got == {"x": "NCW", "conv": "NCW", "const6x3x7": "OIW"}


@pytest.mark.parametrize("build_conv, kernel", [
    (lambda x: R.nn.conv2d(x, const(6, 3, 7, 7)), "OIHW"),
    (lambda x: R.nn.conv2d_transpose(x, const(3, 6, 7, 7)), "IOHW"),
])
def test_conv2d_is_nchw(build_conv, kernel):
    got = infer_layouts(build([var("x", (1, 3, 10, 10))],
                              lambda bb, x: emit(bb, build_conv(x), "conv")))
    assert sorted(got.values()) == sorted(["NCHW", "NCHW", kernel])


def test_conv2d_with_symbolic_batch():
    x = var("x", (tir.Var("bz", "int64"), 3, 10, 10))
    got = layouts([x], lambda bb, x: emit(bb, R.nn.conv2d(x, const(6, 3, 7, 7)), "conv"))
    assert got["x"] == got["conv"] == "NCHW"


@pytest.mark.parametrize("pool", [
    lambda x: R.nn.max_pool2d(x, 2),
    lambda x: R.nn.avg_pool2d(x, 2),
    lambda x: R.nn.adaptive_avg_pool2d(x, 1),
    lambda x: R.image.resize2d(x, (5, 5)),
])
def test_pool_and_resize_are_nchw(pool):
    assert layouts([var("x", (1, 3, 10, 10))], lambda bb, x: emit(bb, pool(x), "out")) == {
        "x": "NCHW", "out": "NCHW"}


def test_batch_norm_tuple_and_gamma_beta_mean_var():
    def body(bb, x):
        bn = emit(bb, R.nn.batch_norm(x, *(const(3) for _ in range(4)), axis=1), "bn")
        emit(bb, bn[1], "mean")
        return emit(bb, bn[0], "out")

    found = infer_layouts(build([var("x", (1, 3, 10, 10))], body))
    by_name = {_key(k): v for k, v in found.items()}
    assert by_name["x"] == by_name["out"] == "NCHW"
    assert by_name["bn"] == ("NCHW", "O", "O")
    # msc reads the field asked for (MSC always read field 0)
    assert by_name["mean"] == "O"
    assert [v for k, v in found.items() if isinstance(k, relax.Constant)] == ["O"] * 4


def test_batch_norm_defaults_to_ncd_for_3d():
    def body(bb, x):
        bn = emit(bb, R.nn.batch_norm(x, *(const(3) for _ in range(4)), axis=1), "bn")
        return emit(bb, bn[0], "out")

    assert layouts([var("x", (1, 3, 10))], body)["x"] == "NCD"


@pytest.mark.parametrize("norm", [
    lambda x: R.nn.layer_norm(x, const(10, 10), const(10, 10), axes=[-2, -1]),
    lambda x: R.nn.group_norm(x, const(3), const(3), num_groups=3, channel_axis=1,
                              axes=[2, 3]),
])
def test_layer_and_group_norm_are_nchw(norm):
    found = infer_layouts(build([var("x", (1, 3, 10, 10))],
                                lambda bb, x: emit(bb, norm(x), "out")))
    assert sorted(found.values()) == ["NCHW", "NCHW", "O", "O"]


def test_shape_expr_is_o():
    got = layouts([var("x", (1, 3, 10, 10))],
                  lambda bb, x: emit(bb, relax.ShapeExpr([1, 3, 10, 10]), "shape"))
    assert got == {"x": "", "shape": "O"}


# --------------------------------------------------------------------------------------------
# matmul.

def test_linear_on_4d_input_is_nchw():
    def body(bb, x):
        wt = emit(bb, R.permute_dims(const(7, 10)), "wt")
        mm = emit(bb, R.matmul(x, wt), "matmul")
        return emit(bb, R.add(mm, const(7)), "add")

    got = layouts([var("x", (1, 3, 10, 10))], body)
    assert got == {"x": "NCHW", "wt": "IO", "matmul": "NCHW", "add": "NCHW",
                   "const7x10": "OI", "const7": "W"}


def test_matmul_2d_is_nc_times_io():
    got = layouts([var("a", (10, 30)), var("b", (30, 20))],
                  lambda bb, a, b: emit(bb, R.matmul(a, b), "mm"))
    assert got == {"a": "NC", "b": "IO", "mm": "NC"}


def test_bmm_is_ncd_times_nio():
    got = layouts([var("a", (1, 128, 256)), var("b", (1, 256, 512))],
                  lambda bb, a, b: emit(bb, R.matmul(a, b), "mm"))
    assert got == {"a": "NCD", "b": "NIO", "mm": "NCD"}


def test_matmul_b_takes_a_known_a_layout():
    def body(bb, x):
        conv = emit(bb, R.nn.conv2d(x, const(6, 3, 1, 1)), "conv")
        return emit(bb, R.matmul(conv, const(10, 4)), "mm")

    got = layouts([var("x", (1, 3, 10, 10))], body)
    assert got["mm"] == "NCHW" and got["const10x4"] == "IO"


# --------------------------------------------------------------------------------------------
# Relax's generic layouts for ops without an MSC rule.

@pytest.mark.parametrize("shape, expected", [((1, 10), "AB"), ((1, 3, 10, 10), "ABCD")])
@pytest.mark.parametrize("unary", [R.nn.relu, R.nn.silu, R.sin, R.exp, R.nn.softmax,
                                   lambda x: R.astype(x, "float16")])
def test_unary_gets_generic_layout(unary, shape, expected):
    got = layouts([var("x", shape)], lambda bb, x: emit(bb, unary(x), "out"))
    assert got == {"x": expected, "out": expected}


@pytest.mark.parametrize("unmapped", [
    lambda x: R.clip(x, 0, 6),
    lambda x: R.cumsum(x, axis=1),
    lambda x: R.nn.log_softmax(x),
    lambda x: R.argmax(x, axis=-1),
    lambda x: R.broadcast_to(x, (4, 10)),
    lambda x: R.reshape(x, (10,)),
])
def test_ops_without_any_rule_stay_unknown(unmapped):
    got = layouts([var("x", (1, 10))], lambda bb, x: emit(bb, unmapped(x), "out"))
    assert got == {"x": "", "out": ""}


# --------------------------------------------------------------------------------------------
# Binary elementwise.

def test_binary_takes_the_last_known_input_layout():
    def body(bb, a, b):
        conv = emit(bb, R.nn.conv2d(b, const(3, 3, 1, 1)), "conv")
        return emit(bb, R.add(a, conv), "add")

    got = layouts([var("a", (1, 3, 10, 10)), var("b", (1, 3, 10, 10))], body)
    assert got == {"a": "NCHW", "b": "NCHW", "conv": "NCHW", "add": "NCHW",
                   "const3x3x1x1": "OIHW"}


def test_binary_of_params_is_generic_and_scalar_gets_nothing():
    got = layouts([var("a", (1, 3, 10, 10))],
                  lambda bb, a: emit(bb, R.multiply(a, relax.const(2.0)), "mul"))
    assert got == {"a": "ABCD", "mul": "ABCD", "const": ""}


def test_binary_rank1_input_gets_last_output_letter():
    def body(bb, x):
        pool = emit(bb, R.nn.max_pool2d(x, 1), "pool")
        return emit(bb, R.subtract(pool, const(10)), "sub")

    assert layouts([var("x", (1, 3, 10, 10))], body)["const10"] == "W"


# --------------------------------------------------------------------------------------------
# Axis ops.

def test_permute_dims_output_is_generic_and_input_inverse():
    got = layouts([var("x", (1, 2, 3, 4))],
                  lambda bb, x: emit(bb, R.permute_dims(x, [0, 3, 2, 1]), "out"))
    assert got == {"x": "ADCB", "out": "ABCD"}


def test_permute_dims_of_known_layout_permutes_letters():
    def body(bb, x):
        conv = emit(bb, R.nn.conv2d(x, const(3, 3, 1, 1)), "conv")
        return emit(bb, R.permute_dims(conv), "out")

    assert layouts([var("x", (1, 3, 4, 4))], body)["out"] == "WHCN"


def test_attention_qkv_acbd_output_abcd():
    def body(bb, q, k, v):
        qkv = [emit(bb, R.permute_dims(t, [0, 2, 1, 3]), f"p_{t.name_hint}") for t in (q, k, v)]
        attn = emit(bb, R.nn.attention(*qkv), "attention")
        return emit(bb, R.permute_dims(attn, [0, 2, 1, 3]), "out")

    got = layouts([var(n, (1, 8, 128, 64)) for n in "qkv"], body)
    assert [got[n] for n in "qkv"] == ["ACBD"] * 3
    assert got["attention"] == "ABCD" and got["out"] == "ACBD"


def test_attention_through_a_composite_function():
    bb = relax.BlockBuilder()
    qkv = [var(n, (1, 8, 128, 64)) for n in "qkv"]
    with bb.function("fused_attention", qkv, attrs={"Composite": "msc.attention"},
                     private=True):
        with bb.dataflow():
            perm = [bb.emit(R.permute_dims(t, [0, 2, 1, 3])) for t in qkv]
            attn = bb.emit(R.nn.attention(*perm), "attention")
            out = bb.emit_output(R.permute_dims(attn, [0, 2, 1, 3]))
        fused = bb.emit_func_output(out)
    inputs = [var(f"inp_{i}", (1, 8, 128, 64)) for i in range(3)]
    with bb.function("main", inputs):
        with bb.dataflow():
            res = bb.emit_output(relax.Call(fused, inputs), "res")
        bb.emit_func_output(res)
    mod = bb.get()
    got = {_key(k): v for k, v in infer_layouts(mod["main"], mod=mod).items()}
    assert [got[f"inp_{i}"] for i in range(3)] == ["ACBD"] * 3
    assert got["attention"] == "ABCD" and got["res"] == "ACBD"


def test_sum_over_two_axes_expands_with_unused_letters():
    got = layouts([var("x", (1, 2, 3, 4))], lambda bb, x: emit(bb, R.sum(x, (2, 1)), "sum"))
    assert got == {"x": "ACDB", "sum": "AB"}


@pytest.mark.parametrize("keepdims, expected", [(False, ("AB", "A")), (True, ("AB", "AB"))])
def test_mean_last_axis(keepdims, expected):
    got = layouts([var("x", (1, 256))],
                  lambda bb, x: emit(bb, R.mean(x, -1, keepdims=keepdims), "mean"))
    assert (got["x"], got["mean"]) == expected


def test_reduction_of_known_layout_drops_letters():
    def body(bb, x):
        conv = emit(bb, R.nn.conv2d(x, const(3, 3, 1, 1)), "conv")
        part = emit(bb, R.mean(conv, [2, 3]), "mean")
        emit(bb, R.sum(conv), "total")
        return part

    got = layouts([var("x", (1, 3, 4, 4))], body)
    assert got["mean"] == "NC" and got["total"] == ""


@pytest.mark.parametrize("axis, expected", [(1, ("ACDE", "ABCDE")), (-1, ("ABCE", "ABCDE"))])
def test_expand_dims_quirk_normalizes_with_input_rank(axis, expected):
    got = layouts([var("x", (1, 3, 10, 10))],
                  lambda bb, x: emit(bb, R.expand_dims(x, axis), "out"))
    assert (got["x"], got["out"]) == expected


def test_expand_dims_of_nc_prefers_h():
    def body(bb, x):
        mm = emit(bb, R.matmul(x, const(4, 4)), "mm")
        return emit(bb, R.expand_dims(mm, 2), "out")

    assert layouts([var("x", (2, 4))], body)["out"] == "NCH"


@pytest.mark.parametrize("axis, expected", [([1], ("ADBC", "ABC")), (None, ("ACBD", "AB"))])
def test_squeeze(axis, expected):
    got = layouts([var("x", (10, 1, 4, 1))],
                  lambda bb, x: emit(bb, R.squeeze(x, axis), "out"))
    assert (got["x"], got["out"]) == expected


def test_unbind_split_getitem_squeeze():
    def body(bb, x):
        parts = emit(bb, R.split(x, 3, axis=1), "split")
        items = [emit(bb, parts[i], f"item{i}") for i in range(3)]
        return emit(bb, relax.Tuple([emit(bb, R.squeeze(t, [1]), "sq") for t in items]), "tup")

    got = layouts([var("x", (1, 3, 10, 10))], body)
    assert got["x"] == "ABCD" and got["split"] == ("ABCD",) * 3
    assert got["sq"] == "ACD" and got["tup"] == ("ACD",) * 3


def test_concat_output_follows_first_input_and_inputs_stay_unknown():
    got = layouts([var(f"x{i}", (1, 3, 10, 10)) for i in range(3)],
                  lambda bb, *xs: emit(bb, R.concat(list(xs), axis=1), "concat"))
    assert got == {"x0": "", "x1": "", "x2": "", "concat": "ABCD"}


def test_take_embedding_indices_a_output_ab():
    def body(bb, idx):
        cast = emit(bb, R.astype(idx, "int32"), "cast")
        return emit(bb, R.take(const(10, 3), cast, axis=0), "take")

    got = layouts([var("idx", (4,), "int64")], body)
    assert got == {"idx": "A", "cast": "A", "take": "AB", "const10x3": "AB"}


def test_take_embedding_2d_indices_through_reshapes():
    def body(bb, idx):
        flat = emit(bb, R.reshape(emit(bb, R.astype(idx, "int32"), "cast"), [20]), "flat")
        rows = emit(bb, R.take(const(10, 3), flat, axis=0), "take")
        return emit(bb, R.reshape(rows, [4, 5, 3]), "out")

    got = layouts([var("idx", (4, 5), "int64")], body)
    assert (got["idx"], got["flat"], got["take"], got["out"]) == ("AB", "B", "BA", "CBA")


def test_take_of_known_data_layout_drops_axis_0_when_ranks_differ():
    def body(bb, x):
        conv = emit(bb, R.nn.conv1d(x, const(3, 3, 1)), "conv")
        emit(bb, R.take(conv, relax.const(1, "int64"), axis=0), "scalar")
        return emit(bb, R.take(conv, const(2, dtype="int64"), axis=2), "same")

    got = layouts([var("x", (1, 3, 8))], body)
    assert got["scalar"] == "CW" and got["same"] == "NCW"


def test_take_backward_leaves_data_of_another_rank_unknown():
    def body(bb, x):
        rows = emit(bb, R.take(x, relax.const(np.zeros((2, 2), "int64")), axis=0), "take")
        return emit(bb, R.nn.conv2d(rows, const(4, 2, 1, 1)), "conv")

    got = layouts([var("x", (10, 3, 4))], body)
    assert got["take"] == "NCHW" and got["x"] == "" and got["const2x2"] == ""


# --------------------------------------------------------------------------------------------
# reshape.

def test_resnet_reshape_quirk_gives_nw():
    def body(bb, x):
        conv = emit(bb, R.nn.conv2d(x, const(2048, 3, 1, 1)), "conv")
        pool = emit(bb, R.nn.adaptive_avg_pool2d(conv, 1), "pool")
        return emit(bb, R.reshape(pool, [1, 2048]), "flat")

    got = layouts([var("x", (1, 3, 7, 7))], body)
    assert (got["pool"], got["flat"]) == ("NCHW", "NW")


def test_reshape_inserts_leading_letters_of_a_group():
    def body(bb, x):
        sliced = emit(bb, R.strided_slice(x, [0], [0], [1]), "slice")
        return emit(bb, R.reshape(sliced, [1, 1, 1, 16, 1]), "out")

    got = layouts([var("x", (1, 16))], body)
    assert got == {"x": "AB", "slice": "AB", "out": "CDAEB"}


def test_stack_as_concat_and_reshape():
    def body(bb, *xs):
        cat = emit(bb, R.concat(list(xs), axis=0), "cat")
        return emit(bb, R.reshape(cat, [3, 1, 3, 10, 10]), "out")

    assert layouts([var(f"x{i}", (1, 3, 10, 10)) for i in range(3)], body)["out"] == "EABCD"


def test_reshape_with_symbolic_dims_follows_the_static_rule():
    # Equal symbolic dims match like equal static ones: [bz,3,10,10] -> [bz,300] is the
    # resnet quirk again (NW), as MSC gives for the static shape.
    bz = tir.Var("bz", "int64")

    def body(bb, x):
        conv = emit(bb, R.nn.conv2d(x, const(3, 3, 1, 1)), "conv")
        return emit(bb, R.reshape(conv, [bz, 300]), "flat")

    got = layouts([var("x", (bz, 3, 10, 10))], body)
    assert got["conv"] == "NCHW" and got["flat"] == "NW"


@pytest.mark.parametrize("src, dst, batch, expected", [
    ([1, 2048, 1, 1], [1, 2048], 0, ([], [1, 2])),
    ([1, 16], [1, 1, 1, 16, 1], -1, ([0, 1, 3], [])),
    ([4, 5], [20], -1, ([], [0])),
    ([6, 4], [2, 3, 4], 0, ([1], [])),  # N protected: the new axis goes after it
    ([2, 3], [5], -1, ([], [])),
])
def test_infer_reshape_axes(src, dst, batch, expected):
    assert infer_reshape_axes(src, dst, batch) == expected


@pytest.mark.parametrize("layout, axes, expected", [
    ("AB", [1, 2], "ACDB"),
    ("NC", [2], "NCH"),
    ("NCHW", [3], "NCHDW"),
    ("B", [1], "BA"),
    ("", [0], ""),
])
def test_expand_layout_letter_choice(layout, axes, expected):
    assert expand_layout(layout, axes) == expected


# --------------------------------------------------------------------------------------------
# Backward sweep.

def test_backward_fills_inputs_from_outputs():
    def body(bb, x):
        act = emit(bb, R.nn.relu(x), "relu")
        return emit(bb, R.nn.conv2d(act, const(6, 3, 3, 3)), "conv")

    got = layouts([var("x", (1, 3, 10, 10))], body)
    # relu said ABCD; conv's seed overrides it, and the backward sweep carries it to x
    assert got["relu"] == "NCHW" and got["x"] == "NCHW"


def test_backward_through_masked_scatter_pattern():
    def body(bb, x, m, s):
        flat = [emit(bb, R.reshape(t, [n]), f"flat_{t.name_hint}")
                for t, n in ((m, 10), (s, 15), (x, 10))]
        idx = emit(bb, R.subtract(emit(bb, R.cumsum(flat[0], axis=0, dtype="int32"), "cs"),
                                  relax.const(1, "int32")), "idx")
        picked = emit(bb, R.take(flat[1], idx, axis=0), "take")
        chosen = emit(bb, R.where(flat[0], picked, flat[2]), "where")
        return emit(bb, R.reshape(chosen, [2, 5]), "out")

    got = layouts([var("x", (2, 5)), var("m", (2, 5), "bool"), var("s", (3, 5))], body)
    assert [got[n] for n in ("x", "m", "s", "where", "out")] == ["BA", "BA", "BA", "A", "BA"]


def test_baddbmm_bias_filled_backward():
    got = layouts([var("c", (1, 128, 512)), var("a", (1, 128, 256)), var("b", (1, 256, 512))],
                  lambda bb, c, a, b: emit(bb, R.add(c, emit(bb, R.matmul(a, b), "mm")), "add"))
    assert got == {"c": "NCD", "a": "NCD", "b": "NIO", "mm": "NCD", "add": "NCD"}


def test_calls_on_unknown_rank_inputs_are_skipped():
    def body(bb, x, y):
        conv = emit(bb, R.nn.conv2d(y, const(3, 3, 1, 1)), "conv")
        return emit(bb, R.add(conv, x), "add")

    x = relax.Var("x", relax.TensorStructInfo(None, "float32", ndim=-1))
    got = layouts([x, var("y", (1, 3, 4, 4))], body)
    assert got["conv"] == "NCHW" and got["add"] == "" and got["x"] == ""


def test_tuple_with_an_unknown_field_is_unknown():
    def body(bb, x, y):
        conv = emit(bb, R.nn.conv2d(x, const(3, 3, 1, 1)), "conv")
        return emit(bb, relax.Tuple([conv, emit(bb, R.clip(y, 0, 6), "clip")]), "tup")

    got = layouts([var("x", (1, 3, 4, 4)), var("y", (1, 3, 4, 4))], body)
    assert got["tup"] == ("", "") and got["conv"] == "NCHW" and got["clip"] == ""


# --------------------------------------------------------------------------------------------
# allow_missing=False and the table.

def test_allow_missing_false_lists_every_missing_value():
    def body(bb, x):
        clipped = emit(bb, R.clip(x, 0, 6), "clipped")
        return emit(bb, R.cumsum(clipped, axis=0), "summed")

    func = build([var("x", (1, 10))], body)
    assert infer_layouts(func)[func.params[0]] == ""
    with pytest.raises(ValidationError) as err:
        infer_layouts(func, allow_missing=False)
    assert "2 value(s)" in str(err.value)
    assert "clipped = relax.clip" in str(err.value) and "summed = relax.cumsum" in str(err.value)


def test_allow_missing_false_names_constants():
    func = build([var("x", (1, 10))],
                 lambda bb, x: emit(bb, R.add(x, relax.const(1.0)), "add"))
    with pytest.raises(ValidationError, match=r"constant \[\] float32 \(argument 1 of add\)"):
        infer_layouts(func, allow_missing=False)


def test_allow_missing_false_passes_when_complete():
    func = build([var("x", (1, 3, 10, 10))],
                 lambda bb, x: emit(bb, R.nn.conv2d(x, const(6, 3, 7, 7)), "conv"))
    assert set(infer_layouts(func, allow_missing=False).values()) == {"NCHW", "OIHW"}


def test_every_table_row_names_an_op_and_is_attached():
    assert [name for name in RULES if name not in OPS] == []
    for name, row in RULES.items():
        assert OPS[name].facts["layout"] is row, name
        assert rule_for(OPS[name]) is row


def test_unregistered_ops_fall_back_to_family_then_common():
    late_unary = OpDef("late.unary", (), (), infer=None, family="unary")
    late_other = OpDef("late.other", (), (), infer=None, family="whatever")
    assert rule_for(late_unary) is FAMILY_RULES["unary"]
    assert rule_for(late_other) is COMMON_RULE
