"""msc.* fused optypes (msc-conventions 4.2): inferred struct info per op, errors, and the
same shapes from the TVM 0.27 pattern each one fuses (conv + bias, matmul(x, permute(w)),
take(w, astype(i)), permute(attention(permute(q), ...)), ...) when TVM is installed.

Specs and summaries are shared with test_op_nn.py (tests/helpers/op_specs.py).
"""

from __future__ import annotations

import functools

import pytest

from msc.errors import ShapeError
from msc.relax.op import OPS, make_call
from msc.relax.op.defs_nn import conv_attrs
from tests.helpers.op_specs import (
    Out,
    T,
    expected_summary,
    msc_call,
    msc_summary,
    tvm_call,
    tvm_summary,
)

I32, I64, F16 = "int32", "int64", "float16"
X, WC, B = T(("n", 3, "h", "w")), T((16, 3, 3, 3)), T((16,))
Q, K, V = T((2, 4, 16, 8)), T((2, 4, 10, 8)), T((2, 4, 10, 6))  # [batch, heads, seq, dim]


def case(op, args, kwargs, out, *, pattern=None, id=None):
    return pytest.param(op, args, kwargs, out, pattern, id=id)


# TVM patterns the fused ops stand for (the anchor ops are applied to the same specs).
def _conv(d):
    return lambda r, x, w, b, **kw: getattr(r.op.nn, f"conv{d}d")(x, w, **kw)


def _linear(r, x, w, *bias, **kw):
    out = r.op.matmul(x, r.op.permute_dims(w), **kw)
    return r.op.add(out, bias[0]) if bias else out


def _attention(r, q, k, v, *bias, **kw):
    bsnh = [r.op.permute_dims(t, [0, 2, 1, 3]) for t in (q, k, v)]
    return r.op.permute_dims(r.op.nn.attention(*bsnh, *bias, **kw), [0, 2, 1, 3])


PATTERNS = {
    "conv1d": _conv(1), "conv2d": _conv(2), "linear": _linear, "attention": _attention,
    "embedding": lambda r, i, w: r.op.take(w, r.op.astype(i, "int32"), axis=0),
    "gelu": lambda r, x, *factors: r.op.nn.gelu(x),
    "matmul": lambda r, a, b, **kw: r.op.matmul(a, b, **kw),
}

CASES = [
    case("msc.conv1d_bias", [T((1, 4, "w")), T((8, 4, 3)), T((8,))], {"padding": 1},
         Out((1, 8, "w")), pattern="conv1d", id="conv1d_bias"),
    case("msc.conv2d_bias", [X, WC, B], {"strides": 2, "padding": 1},
         Out(("n", 16, "(h - 1) // 2 + 1", "(w - 1) // 2 + 1")), pattern="conv2d",
         id="conv2d_bias-symbolic"),
    case("msc.conv2d_bias", [T((1, 8, 8, 4)), T((16, 3, 3, 4)), B],
         {"data_layout": "NHWC", "kernel_layout": "OHWI"}, Out((1, 6, 6, 16)),
         pattern="conv2d", id="conv2d_bias-NHWC"),
    case("msc.conv2d_bias", [T((1, 3, 8, 8)), WC, T((1, 16, 1, 1))], {}, Out((1, 16, 6, 6)),
         pattern="conv2d", id="conv2d_bias-expanded-bias"),
    case("msc.linear", [T(("n", 4, 8)), T((16, 8))], {}, Out(("n", 4, 16)), pattern="linear",
         id="linear"),
    case("msc.linear", [T((2, 8), F16), T((16, 8), F16)], {}, Out((2, 16), F16),
         pattern="linear", id="linear-2d-f16"),
    case("msc.linear", [T(("n", 8), "int8"), T((16, 8), "int8")], {"out_dtype": "int32"},
         Out(("n", 16), I32), pattern="linear", id="linear-out-dtype"),
    case("msc.linear_bias", [T(("n", 4, 8)), T((16, 8)), B], {}, Out(("n", 4, 16)),
         pattern="linear", id="linear_bias"),
    case("msc.linear_bias", [T((2, 4, 8)), T((16, 8)), T((1, 1, 16))], {}, Out((2, 4, 16)),
         pattern="linear", id="linear_bias-full-rank-bias"),
    case("msc.embedding", [T(("n", 7), I64), T((100, 32))], {}, Out(("n", 7, 32)),
         pattern="embedding", id="embedding"),
    case("msc.embedding", [T((), I32), T((100, 32))], {}, Out((32,)), pattern="embedding",
         id="embedding-scalar-index"),
    case("msc.embedding", [T(None, I64, ndim=2), T((100, 32))], {}, Out(None, ndim=3),
         pattern="embedding", id="embedding-unknown"),
    case("msc.attention", [Q, K, V], {}, Out((2, 4, 16, 6)), pattern="attention",
         id="attention"),
    case("msc.attention", [T(("n", 4, "h", 8)), T(("n", 4, "w", 8)), T(("n", 4, "w", 6))],
         {"causal_mask": "TopLeft"}, Out(("n", 4, "h", 6)), pattern="attention",
         id="attention-symbolic"),
    case("msc.attention", [Q, K, V, T((2, 1, 16, 10))], {"scale": 0.125}, Out((2, 4, 16, 6)),
         pattern="attention", id="attention-mask"),
    case("msc.attention", [Q, T((2, 2, 10, 8)), T((2, 2, 10, 6))], {}, Out((2, 4, 16, 6)),
         pattern="attention", id="attention-gqa"),
    case("msc.gelu", [T(("n", 3))], {}, Out(("n", 3)), pattern="gelu", id="gelu"),
    case("msc.gelu", [T((2, 3)), T(()), T(()), T(())], {}, Out((2, 3)), pattern="gelu",
         id="gelu-with-factors"),
    case("msc.matmul", [T((2, 1, 3, 4)), T((5, 4, 6))], {}, Out((2, 5, 3, 6)),
         pattern="matmul", id="matmul-broadcast"),
    case("msc.matmul", [T(("n", "h", 4)), T((4,))], {}, Out(("n", "h")), pattern="matmul",
         id="matmul-vector-rhs"),
    case("msc.matmul", [T((4,)), T((4, "w"))], {}, Out(("w",)), pattern="matmul",
         id="matmul-vector-lhs"),
    case("msc.matmul", [T((4,)), T((4,))], {}, Out(()), pattern="matmul", id="matmul-dot"),
    case("msc.matmul", [T(None, ndim=3), T((4, 5))], {}, Out(None, ndim=3), pattern="matmul",
         id="matmul-unknown"),
]


def call(op, args, kwargs):
    """msc.* ops have no relax.op namespace; they are built through the table."""
    return msc_call(functools.partial(make_call, op), args, kwargs)


@pytest.mark.parametrize("op,args,kwargs,out,pattern", CASES)
def test_inferred_struct_info(op, args, kwargs, out, pattern):
    assert msc_summary(call(op, args, kwargs).struct_info) == expected_summary(out)


@pytest.fixture(scope="module")
def tvm():
    return pytest.importorskip("tvm")


@pytest.mark.parametrize("op,args,kwargs,out,pattern", CASES)
def test_matches_the_tvm_pattern(tvm, op, args, kwargs, out, pattern):
    build = functools.partial(PATTERNS[pattern], tvm.relax)
    theirs, syms = tvm_call(tvm, build, args, kwargs)
    ours = call(op, args, kwargs)
    assert msc_summary(ours.struct_info) == tvm_summary(tvm, theirs.ty, syms)


ERRORS = [
    ("msc.conv2d_bias", [X, WC, T((8,))], {}, "bias", "bias shape [8]"),
    ("msc.conv2d_bias", [X, WC, T((16, 1))], {}, "bias", "rank 2"),
    ("msc.conv2d_bias", [X, WC, T((16,), F16)], {}, "bias", "dtype float16"),
    ("msc.conv2d_bias", [X, T((16, 4, 3, 3)), B], {}, "weight", "3 channels"),
    ("msc.conv1d_bias", [X, T((16, 3, 3)), B], {}, "data", "rank 4"),
    ("msc.linear", [T((2, 8)), T((8, 16))], {}, "weight", "transpose an [in, out] weight"),
    ("msc.linear", [T((2, 8)), T((2, 16, 8))], {}, "weight", "rank 3"),
    ("msc.linear_bias", [T((2, 8)), T((16, 8)), T((8,))], {}, "bias", "bias shape [8]"),
    ("msc.embedding", [T((2, 7)), T((100, 32))], {}, "data", "integer indices"),
    ("msc.embedding", [T((2, 7), I64), T((100,))], {}, "weight", "rank 1"),
    ("msc.attention", [Q, T((2, 4, 10, 7)), V], {}, "key", "head dim"),
    ("msc.attention", [Q, K, T((2, 4, 9, 6))], {}, "value", "sequence length"),
    ("msc.attention", [T((2, 16, 8)), K, V], {}, "query", "rank 3"),
    ("msc.attention", [Q, K, V, T((2, 4, 16, 9))], {}, "bias", "key sequence length"),
    ("msc.gelu", [T((2, 3), I32)], {}, "data", "float"),
    ("msc.matmul", [T((2, 3, 4)), T((5, 6))], {}, "x2", "reduction dim"),
    ("msc.matmul", [T(()), T((5, 6))], {}, "x1", "scalar"),
    ("msc.matmul", [T((2, 3, 4)), T((3, 4, 6))], {}, None, "broadcast"),
]


@pytest.mark.parametrize("op,args,kwargs,param,fragment", ERRORS,
                         ids=[f"{e[0]}-{e[4]}" for e in ERRORS])
def test_errors(op, args, kwargs, param, fragment):
    with pytest.raises(ShapeError) as info:
        call(op, args, kwargs)
    assert info.value.context["op"] == op
    assert info.value.context.get("param") == param
    assert fragment in str(info.value)


MSC_OPS = sorted(n for n in OPS if n.startswith("msc."))


def test_every_fused_optype_has_a_record_and_cases():
    vocabulary = ["msc.attention", "msc.conv1d_bias", "msc.conv2d_bias", "msc.embedding",
                  "msc.gelu", "msc.linear", "msc.linear_bias", "msc.matmul"]  # conventions 4.5
    assert MSC_OPS == vocabulary
    assert {c.values[0] for c in CASES} == set(vocabulary)


@pytest.mark.parametrize("d", [1, 2])
def test_conv_bias_shares_the_conv_attrs(d):
    assert OPS[f"msc.conv{d}d_bias"].attrs == tuple(conv_attrs(d))
    assert [a.name for a in OPS[f"msc.conv{d}d_bias"].args] == ["data", "weight", "bias"]
    conv = call(f"msc.conv{d}d_bias", [T((1, 3) + (8,) * d), T((4, 3) + (3,) * d),
                                           T((4,))], {"strides": 2})
    assert conv.attrs.strides == (2,) * d and conv.attrs.padding == (0,) * (2 * d)


def test_optional_inputs_are_omitted():
    assert len(call("msc.attention", [Q, K, V], {}).args) == 3
    assert len(call("msc.gelu", [T((2, 3))], {}).args) == 1
