"""Optypes in msc's vocabulary (msc-conventions 4.2, 4.5) that TVM 0.27 Relax does not have:
the fused ``msc.*`` patterns the graph builder produces and the Relay-era ``nn.dense`` /
``nn.batch_matmul`` / ``nn.bias_add``.

They are graph optypes rather than TVM ops, but a record gives each one signature and one
inference like every other op. Weights follow msc's storage (4.3): linear weights are OI
``[out, in]``, conv weights OIW / OIHW, biases 1-D ``[out]``::

    make_call("msc.linear_bias", x, w, b)                  # x [..., in], w [out, in], b [out]
    make_call("msc.conv2d_bias", x, w, b, padding=1)        # nn.conv2d's attrs and defaults
"""

from __future__ import annotations

from .defs_nn import ATTENTION_ATTRS, attention_dims, conv_attrs, conv_infer, window_normalize
from .infer import (
    broadcast_dims,
    check_dim,
    check_rank,
    common_dtype,
    normalize_axis,
    require_float,
    result_dtype,
    tensor,
)
from .registry import Arg, AttrDef, register

# --------------------------------------------------------------------------------------------
# Relay optypes still in msc's vocabulary (msc-conventions 4.5), with Relay's inputs and attrs.

def dense_infer(ctx):
    """data [..., in] x weight [out, in] -> [..., out] (also msc.linear)."""
    data, weight = ctx.tensor(0), ctx.tensor(1)
    check_rank(ctx, weight, 2, 1, "a [out_features, in_features] weight")
    dtype = result_dtype(ctx, [data, weight], ctx.attrs.get("out_dtype"))
    if data.ndim == 0:
        raise ctx.error("needs rank >= 1, got a scalar", 0)
    if data.values is None or weight.values is None:
        return tensor(None, dtype, data.ndim)
    check_dim(ctx, weight.values[1], data.values[-1], 1, "weight dim 1 (in_features)",
              hint="weights are [out_features, in_features]; transpose an [in, out] weight")
    if ctx.attrs.get("units") is not None:
        check_dim(ctx, weight.values[0], ctx.attrs.units, 1, "weight dim 0 (units)")
    return tensor([*data.values[:-1], weight.values[0]], dtype)


def batch_matmul_infer(ctx):
    x, y, attrs = ctx.tensor(0), ctx.tensor(1), ctx.attrs
    check_rank(ctx, x, 3, 0, "batch_matmul ([batch, M, K])")
    check_rank(ctx, y, 3, 1, "batch_matmul ([batch, N, K] with transpose_b)")
    dtype = result_dtype(ctx, [x, y], attrs.out_dtype)
    if x.values is None or y.values is None:
        return tensor(None, dtype, 3)
    bx, m, kx = _transposed(x.values, attrs.transpose_a)
    by, ky, n = _transposed(y.values, attrs.transpose_b)
    check_dim(ctx, ky, kx, 1, "reduction dim", hint="check transpose_a / transpose_b")
    return tensor([*broadcast_dims(ctx, [bx], [by]), m, n], dtype)


def _transposed(values, transpose: bool) -> tuple:
    b, r, c = values
    return (b, c, r) if transpose else (b, r, c)


def bias_add_infer(ctx):
    data, bias = ctx.tensor(0), ctx.tensor(1)
    common_dtype(ctx, [data, bias])
    check_rank(ctx, bias, 1, 1, "bias_add (a 1-D bias)")
    if data.ndim < 0:
        return data
    axis = normalize_axis(ctx, ctx.attrs.axis, data.ndim)
    if data.values is not None and bias.values is not None:
        check_dim(ctx, bias.values[0], data.values[axis], 1, f"bias length (data axis {axis})")
    return data


register("nn.dense", [Arg("data"), Arg("weight")],
         [AttrDef("units", "int", None), AttrDef("out_dtype", "dtype", None)],
         infer=dense_infer, family="relay")
register("nn.batch_matmul", [Arg("x"), Arg("y")],
         [AttrDef("out_dtype", "dtype", None), AttrDef("transpose_a", "bool", False),
          AttrDef("transpose_b", "bool", True)], infer=batch_matmul_infer, family="relay")
register("nn.bias_add", [Arg("data"), Arg("bias")], [AttrDef("axis", "int", 1)],
         infer=bias_add_infer, family="relay")


# --------------------------------------------------------------------------------------------
# Fused msc.* patterns (msc-conventions 4.2).

def check_bias(ctx, out, axis: int, i: int = 2) -> None:
    """A bias is 1-D [out[axis]], or has out's rank with 1s except at ``axis``."""
    bias = ctx.tensor(i)
    if "void" not in (bias.dtype, out.dtype) and bias.dtype != out.dtype:
        raise ctx.error(f"has dtype {bias.dtype}, but the output is {out.dtype}", i,
                        hint="R.astype the bias to the output dtype")
    if bias.ndim < 0 or out.ndim < 0:
        return
    if bias.ndim not in (1, out.ndim):
        raise ctx.error(f"has rank {bias.ndim}; expected a 1-D bias of {out.ndim}-D output "
                        f"axis {axis}", i, hint="pass the bias as [out_channels]")
    if bias.values is None or out.values is None:
        return
    want = [out.values[axis]] if bias.ndim == 1 else [
        d if k == axis else 1 for k, d in enumerate(out.values)]
    for got, w in zip(bias.values, want):
        check_dim(ctx, got, w, i, f"bias shape {list(bias.values)} (expected {want}); a dim",
                  hint="a bias has one value per output channel")


def conv_bias_infer(d: int):
    conv = conv_infer(d)

    def infer(ctx):
        out = conv(ctx)
        check_bias(ctx, out, ctx.attrs.out_layout.index("C"))
        return out
    return infer


def linear_bias_infer(ctx):
    out = dense_infer(ctx)
    check_bias(ctx, out, max(out.ndim - 1, 0))
    return out


def embedding_infer(ctx):
    """indices [...] gathered from a table [num, dim] -> [..., dim]."""
    indices, weight = ctx.tensor(0), ctx.tensor(1)
    if not indices.dtype.startswith(("int", "uint", "void")):
        raise ctx.error(f"needs integer indices, got {indices.dtype}", 0,
                        hint="R.astype(data, 'int32') first")
    check_rank(ctx, weight, 2, 1, "an embedding table ([num_embeddings, dim])")
    if indices.values is None or weight.values is None:
        return tensor(None, weight.dtype, indices.ndim + 1 if indices.ndim >= 0 else -1)
    return tensor([*indices.values, weight.values[1]], weight.dtype)


def msc_attention_infer(ctx):
    """q / k / v [batch, heads, seq, dim] (the permutes around nn.attention are fused in)."""
    inputs = [ctx.tensor(i) for i in range(len(ctx.args))]
    for i, s in enumerate(inputs):
        check_rank(ctx, s, 4, i, "msc.attention ([batch, num_heads, seq_len, head_dim])")
    dtype = inputs[0].dtype
    if any(s.values is None for s in inputs):
        return tensor(None, dtype, 4)
    bsnh = [(b, s, n, h) for b, n, s, h in (x.values for x in inputs[:3])]
    bias = inputs[3].values if len(inputs) > 3 else None  # already [batch, heads, seq, seq_kv]
    b, s, n, h = attention_dims(ctx, *bsnh, bias)
    return tensor([b, n, s, h], dtype)


def gelu_infer(ctx):
    data = ctx.tensor(0)
    require_float(ctx, data)
    return data


def matmul_infer(ctx):
    """numpy matmul: 1-D operands gain (and lose) a dim; batch dims broadcast."""
    a, b = ctx.tensor(0), ctx.tensor(1)
    dtype = result_dtype(ctx, [a, b], ctx.attrs.out_dtype)
    for i, s in enumerate((a, b)):
        if s.ndim == 0:
            raise ctx.error("needs rank >= 1, got a scalar", i)
    if a.values is None or b.values is None:
        ndim = -1 if min(a.ndim, b.ndim) < 0 else max(a.ndim, b.ndim) - (a.ndim == 1) - (
            b.ndim == 1)
        return tensor(None, dtype, ndim)
    av = a.values if a.ndim > 1 else (1, *a.values)
    bv = b.values if b.ndim > 1 else (*b.values, 1)
    check_dim(ctx, bv[-2], av[-1], 1, "reduction dim (x2's dim -2, matching x1's last)")
    out = broadcast_dims(ctx, av[:-2], bv[:-2])
    out += [av[-2]] if a.ndim > 1 else []
    return tensor(out + ([bv[-1]] if b.ndim > 1 else []), dtype)


_OUT_DTYPE = [AttrDef("out_dtype", "dtype", None)]
for _d in (1, 2):
    _name = f"msc.conv{_d}d_bias"
    register(_name, [Arg("data"), Arg("weight"), Arg("bias")], conv_attrs(_d),
             infer=conv_bias_infer(_d), family="msc",
             normalize=window_normalize(_name, _d, "data_layout"))
register("msc.linear", [Arg("data"), Arg("weight")], _OUT_DTYPE, infer=dense_infer,
         family="msc")
register("msc.linear_bias", [Arg("data"), Arg("weight"), Arg("bias")], _OUT_DTYPE,
         infer=linear_bias_infer, family="msc")
register("msc.embedding", [Arg("data"), Arg("weight")], infer=embedding_infer, family="msc")
register("msc.attention", [Arg("query"), Arg("key"), Arg("value"), Arg("bias", default=None)],
         ATTENTION_ATTRS, infer=msc_attention_infer, family="msc")
register("msc.gelu", [Arg("data"), *(Arg(f"factor_{k}", default=None) for k in (1, 2, 3))],
         infer=gelu_infer, family="msc", float_only=True, activation=True)
register("msc.matmul", [Arg("x1"), Arg("x2")], _OUT_DTYPE, infer=matmul_infer, family="msc")
