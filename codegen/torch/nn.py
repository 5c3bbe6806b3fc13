"""Converters of the torch rows for nn ops (convolution, pooling, normalization, attention,
losses, image) and the helpers every row shares. The table itself is ``torch.table.ROWS``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from msc.relax.op.registry import REQUIRED

from ..naming import literal

# --------------------------------------------------------------------------------------------
# Helpers.

def call(func: str, *args, **kwargs) -> str:
    items = [str(a) for a in args] + [f"{k}={v}" for k, v in kwargs.items()]
    return f"{func}({', '.join(items)})"


def axis_of(axis: int, ndim: int) -> int:
    return axis + ndim if axis < 0 else axis


def axes_of(value, ndim: int) -> list[int] | None:
    if value is None:
        return None
    values = [value] if isinstance(value, int) else list(value)
    return [axis_of(a, ndim) for a in values]


def arg_value(ctx, name: str):
    """A non-tensor op argument (PrimValue, shape, tuple) given as an attr, or its default."""
    for arg, source in zip(ctx.op_def.args, ctx.bind_args()):
        if arg.name != name:
            continue
        if source is None:
            return None if arg.default is REQUIRED else arg.default
        if source[0] == "value":
            return source[1]
        raise ctx.fail(f"argument {name!r} must be a constant for torch")
    raise ctx.fail(f"no argument {name!r}")


def _spatial(ctx, layout_attr: str, ndim: int) -> None:
    layout = ctx.attr(layout_attr)
    want = "NC" + "DHW"[3 - ndim:]
    if layout not in (None, want):
        raise ctx.fail(f"{layout_attr} {layout!r}: torch needs {want}")


def _unless_one(**kw) -> dict:
    """Keywords whose value is not torch's default (1, or all ones; 11 groups are not)."""
    return {k: v for k, v in kw.items()
            if any(x != 1 for x in (v if isinstance(v, (list, tuple)) else [v]))}


def _pads(values, ndim: int) -> tuple[list, list]:
    values = list(values) if values is not None else [0]
    if len(values) == 1:
        values = values * ndim
    if len(values) == ndim:
        return values, values
    return values[:ndim], values[ndim:]


def _pad_source(data: str, begin: list, end: list, value: str | None = None) -> str:
    """``F.pad`` for asymmetric padding (torch pads the last dim first)."""
    pads = [p for b, e in zip(reversed(begin), reversed(end)) for p in (b, e)]
    return call("F.pad", data, literal(pads), **({"value": value} if value else {}))


def _padded(ctx, data: str, ndim: int, fill: str | None = None) -> tuple[str, list]:
    """``data`` (padded first when the padding is asymmetric) and torch's symmetric padding."""
    begin, end = _pads(ctx.attr("padding"), ndim)
    if begin == end:
        return data, begin
    return _pad_source(data, begin, end, fill), [0] * ndim


def tuple_of(values) -> str:
    return literal(tuple(values))


# --------------------------------------------------------------------------------------------
# nn: convolution, pooling, normalization.

def convert_conv(ctx) -> str:
    weight = ctx.node.weights.get("weight") or ctx.in_tensor(1)
    ndim, groups = weight.ndim - 2, ctx.attr("groups")
    transpose = "transpose" in ctx.node.optype
    _spatial(ctx, "data_layout", ndim)
    kernel = ("IO" if transpose else "OI") + "DHW"[3 - ndim:]
    if ctx.attr("kernel_layout") not in (None, kernel):
        raise ctx.fail(f"kernel_layout {ctx.attr('kernel_layout')!r}: torch needs {kernel}")
    if transpose:
        return _conv_transpose(ctx, weight, ndim, groups)
    data, padding = _padded(ctx, ctx.input(0), ndim)
    kw = {"stride": tuple_of(ctx.attr("strides")), "padding": tuple_of(padding),
          **_unless_one(dilation=tuple_of(ctx.attr("dilation")), groups=groups)}
    has_bias = ctx.has_weight("bias") or len(ctx.node.inputs) > 2
    if ctx.has_weight("weight") and (ctx.has_weight("bias") or not has_bias):
        ctor = call(f"nn.Conv{ndim}d", weight.shape[1] * groups, weight.shape[0],
                     kernel_size=tuple_of(weight.shape[2:]), **kw, bias=has_bias)
        params = {"weight": "weight", **({"bias": "bias"} if has_bias else {})}
        return call(ctx.layer(ctor, params), data)
    bias = ctx.tensor_arg("bias") or "None"
    return call(f"F.conv{ndim}d", data, ctx.tensor_arg("weight"), bias, **kw)


def _conv_transpose(ctx, weight, ndim: int, groups: int) -> str:
    begin, end = _pads(ctx.attr("padding"), ndim)
    symmetric = begin == end
    kw = {"stride": tuple_of(ctx.attr("strides")),
          "padding": tuple_of(begin if symmetric else [0] * ndim),
          "output_padding": tuple_of(_pads(ctx.attr("output_padding"), ndim)[0]),
          **_unless_one(groups=groups, dilation=tuple_of(ctx.attr("dilation")))}
    if ctx.has_weight("weight"):
        ctor = call(f"nn.ConvTranspose{ndim}d", weight.shape[0], weight.shape[1] * groups,
                     kernel_size=tuple_of(weight.shape[2:]), **kw, bias=False)
        out = call(ctx.layer(ctor, {"weight": "weight"}), ctx.input(0))
    else:
        out = call(f"F.conv_transpose{ndim}d", ctx.input(0), ctx.tensor_arg("weight"),
                    **kw)
    if symmetric:
        return out
    crop = [f"{b}:{-e if e else ''}" for b, e in zip(begin, end)]
    return f"{out}[:, :, {', '.join(crop)}]"


def convert_pool(kind: str, ndim: int) -> Callable:
    def convert(ctx) -> str:
        _spatial(ctx, "layout", ndim)
        fill = '-float("inf")' if kind == "max" else None
        data, padding = _padded(ctx, ctx.input(0), ndim, fill)
        kw = {"kernel_size": tuple_of(ctx.attr("pool_size")), "stride": tuple_of(ctx.attr("strides")),
              "padding": tuple_of(padding), "ceil_mode": ctx.attr("ceil_mode")}
        if kind == "max":
            kw["dilation"] = tuple_of(ctx.attr("dilation"))
        else:
            if any(d != 1 for d in ctx.attr("dilation")):
                raise ctx.fail("torch's avg_pool has no dilation")
            kw["count_include_pad"] = ctx.attr("count_include_pad")
        kw = {k: literal(v) if isinstance(v, bool) else v for k, v in kw.items()}
        out = call(f"F.{kind}_pool{ndim}d", data, **kw)
        if kind == "avg" and data != ctx.input(0) and not ctx.attr("count_include_pad"):
            # asymmetric pads were added as real zeros: divide by the count of input elements
            begin, end = _pads(ctx.attr("padding"), ndim)
            ones = _pad_source(f"torch.ones_like({ctx.input(0)})", begin, end)
            out = f"{out} / {call(f'F.avg_pool{ndim}d', ones, **kw)}"
        return out
    return convert


def convert_adaptive_pool(ndim: int) -> Callable:
    def convert(ctx) -> str:
        _spatial(ctx, "layout", ndim)
        size = [ctx.dim(ctx.out, i) for i in range(2, 2 + ndim)]
        return call(f"F.adaptive_avg_pool{ndim}d", ctx.input(0), "(" + ", ".join(
            str(s) for s in size) + ("," if ndim == 1 else "") + ")")
    return convert


_BN_ROLES = {"weight": "gamma", "bias": "beta", "running_mean": "mean", "running_var": "var"}


def convert_batch_norm(ctx) -> str:
    x = ctx.in_tensor(0)
    if axis_of(ctx.attr("axis"), x.ndim) != 1 or not 2 <= x.ndim <= 5:
        raise ctx.fail("torch normalizes axis 1 of 2-D to 5-D inputs")
    eps, momentum = literal(ctx.attr("epsilon")), literal(ctx.attr("momentum"))
    if all(ctx.has_weight(r) for r in _BN_ROLES.values()) and ctx.attr("center") and \
            ctx.attr("scale"):
        dims = {2: 1, 3: 1, 4: 2, 5: 3}[x.ndim]
        ctor = call(f"nn.BatchNorm{dims}d", ctx.node.weight_at("gamma").shape[0], eps=eps,
                     momentum=momentum)
        layer = ctx.layer(ctor, _BN_ROLES)
        ctx.writer.extra_state[layer.removeprefix("self.") + ".num_batches_tracked"] = \
            np.array(0, "int64")
        return call(layer, ctx.input(0))
    gamma = ctx.tensor_arg("gamma") if ctx.attr("scale") else "None"
    beta = ctx.tensor_arg("beta") if ctx.attr("center") else "None"
    return call("F.batch_norm", ctx.input(0), ctx.tensor_arg("moving_mean"),
                 ctx.tensor_arg("moving_var"), gamma, beta, training="False",
                 momentum=momentum, eps=eps)


def convert_layer_norm(ctx) -> str:
    x = ctx.in_tensor(0)
    axes = sorted(axes_of(ctx.attr("axes"), x.ndim))
    if axes != list(range(x.ndim - len(axes), x.ndim)):
        raise ctx.fail("torch's layer_norm normalizes trailing axes only")
    shape = "(" + "".join(f"{ctx.dim(x, a)}, " for a in axes).rstrip(" ") + ")"
    eps = literal(ctx.attr("epsilon"))
    if ctx.has_weight("gamma") and ctx.has_weight("beta") and ctx.attr("center") \
            and ctx.attr("scale"):
        ctor = call("nn.LayerNorm", shape, eps=eps)
        return call(ctx.layer(ctor, {"weight": "gamma", "bias": "beta"}), ctx.input(0))
    gamma = ctx.tensor_arg("gamma") if ctx.attr("scale") else "None"
    beta = ctx.tensor_arg("beta") if ctx.attr("center") else "None"
    return call("F.layer_norm", ctx.input(0), shape, gamma, beta, eps=eps)


def convert_group_norm(ctx) -> str:
    x = ctx.in_tensor(0)
    if axis_of(ctx.attr("channel_axis"), x.ndim) != 1:
        raise ctx.fail("torch's group_norm takes channels at axis 1")
    eps, groups = literal(ctx.attr("epsilon")), ctx.attr("num_groups")
    if ctx.has_weight("gamma") and ctx.has_weight("beta"):
        ctor = call("nn.GroupNorm", groups, ctx.node.weight_at("gamma").shape[0], eps=eps)
        return call(ctx.layer(ctor, {"weight": "gamma", "bias": "beta"}), ctx.input(0))
    return call("F.group_norm", ctx.input(0), groups, ctx.tensor_arg("gamma"),
                 ctx.tensor_arg("beta"), eps=eps)


def convert_instance_norm(ctx) -> str:
    if axis_of(ctx.attr("channel_axis"), ctx.in_tensor(0).ndim) != 1:
        raise ctx.fail("torch's instance_norm takes channels at axis 1")
    return call("F.instance_norm", ctx.input(0), weight=ctx.tensor_arg("gamma"),
                 bias=ctx.tensor_arg("beta"), eps=literal(ctx.attr("epsilon")))


def convert_rms_norm(ctx) -> str:
    x = ctx.in_tensor(0)
    axes = sorted(axes_of(ctx.attr("axes"), x.ndim))
    if axes != list(range(x.ndim - len(axes), x.ndim)):
        raise ctx.fail("torch's rms_norm normalizes trailing axes only")
    shape = "(" + "".join(f"{ctx.dim(x, a)}, " for a in axes).rstrip(" ") + ")"
    return call("F.rms_norm", ctx.input(0), shape, ctx.tensor_arg("weight"),
                 eps=literal(ctx.attr("epsilon")))


def convert_prelu(ctx) -> str:
    if axis_of(ctx.attr("axis"), ctx.in_tensor(0).ndim) != 1:
        raise ctx.fail("torch's prelu takes channels at axis 1")
    return call("F.prelu", *ctx.args())


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate",
              "replicate": "replicate", "circular": "circular"}


def convert_pad(ctx) -> str:
    widths = ctx.attr("pad_width")
    begin, end = widths[0::2], widths[1::2]
    mode = ctx.attr("pad_mode")
    if mode not in _PAD_MODES:
        raise ctx.fail(f"pad_mode {mode!r}")
    pads = [p for b, e in zip(reversed(begin), reversed(end)) for p in (b, e)]
    while len(pads) > 2 and pads[-2:] == [0, 0]:  # torch's non-constant modes pad few dims
        pads = pads[:-2]
    kw = {"mode": literal(_PAD_MODES[mode])}
    if mode == "constant":
        kw["value"] = literal(ctx.attr("pad_value"))
    return call("F.pad", ctx.input(0), literal(pads), **kw)


def convert_dropout(ctx) -> str:
    out = call("F.dropout", ctx.input(0), p=literal(ctx.attr("rate")), training="self.training")
    if len(ctx.node.outputs) > 1:
        return f"({out}, torch.ones_like({ctx.input(0)}, dtype=torch.bool))"
    return out


# --------------------------------------------------------------------------------------------
# Attention, losses, image.

def _sdpa(ctx, q: str, k: str, v: str, bias: str | None) -> str:
    kw = {}
    if bias is not None:
        kw["attn_mask"] = bias
    if ctx.attr("scale") is not None:
        kw["scale"] = literal(ctx.attr("scale"))
    causal = ctx.attr("causal_mask")
    if ctx.attr("window_size") is not None or (causal and bias is not None):
        raise ctx.fail("window_size, or a causal mask with a bias, has no torch equivalent")
    if causal == "TopLeft":
        kw["is_causal"] = "True"
    elif causal == "BottomRight":
        qs, ks = ctx.dim(ctx.in_tensor(0), 1), ctx.dim(ctx.in_tensor(1), 1)
        kw["attn_mask"] = f"torch.ones({qs}, {ks}, dtype=torch.bool).tril({ks} - {qs})"
    elif causal is not None:
        raise ctx.fail(f"causal_mask {causal!r}")
    return call("F.scaled_dot_product_attention", q, k, v, **kw)


def convert_attention(ctx) -> str:
    q, k, v = (f"{ctx.input(i)}.transpose(1, 2)" for i in range(3))
    bias = ctx.input(3) if len(ctx.node.inputs) > 3 else None
    return _sdpa(ctx, q, k, v, bias) + ".transpose(1, 2)"


def convert_attention_var_len(ctx) -> str:
    """Sequences packed along dim 1 of [1, total, heads, dim]: one attention per span of
    seqstart_q / seqstart_k, concatenated back along dim 1."""
    q, k, v = (ctx.tensor_arg(n) for n in ("queries", "keys", "values"))
    starts_q = ctx.tensor_arg("seqstart_q")
    starts_k = ctx.tensor_arg("seqstart_k") or starts_q
    kw = {}
    if ctx.attr("scale") is not None:
        kw["scale"] = literal(ctx.attr("scale"))
    causal = ctx.attr("causal_mask")
    if ctx.attr("window_size") is not None:
        raise ctx.fail("window_size has no torch equivalent")
    if causal == "TopLeft":
        kw["is_causal"] = "True"
    elif causal == "BottomRight":
        kw["attn_mask"] = ("torch.ones(_qe - _qb, _ke - _kb, dtype=torch.bool)"
                           ".tril((_ke - _kb) - (_qe - _qb))")
    elif causal is not None:
        raise ctx.fail(f"causal_mask {causal!r}")
    span = call("F.scaled_dot_product_attention", f"{q}[:, _qb:_qe].transpose(1, 2)",
                 f"{k}[:, _kb:_ke].transpose(1, 2)", f"{v}[:, _kb:_ke].transpose(1, 2)", **kw)
    bounds = (f"zip({starts_q}[:-1].tolist(), {starts_q}[1:].tolist(), "
              f"{starts_k}[:-1].tolist(), {starts_k}[1:].tolist())")
    return f"torch.cat([{span}.transpose(1, 2) for _qb, _qe, _kb, _ke in {bounds}], 1)"


def _permute(source: str, axes: list[int]) -> str:
    return source if axes == list(range(len(axes))) else f"{source}.permute({tuple_of(axes)})"


def convert_msc_attention(ctx) -> str:
    """permute_dims(nn.attention(permute_dims(q, axes), ...), axes_3), with torch's [b, h, s,
    d] in the middle: each pair of permutes collapses into one."""
    bshd = [0, 2, 1, 3]
    qkv = []
    for i, key in enumerate(["axes", "axes_1", "axes_2"]):
        axes = ctx.raw(key, "ints", bshd)
        qkv.append(_permute(ctx.input(i), [axes[j] for j in bshd]))
    bias = ctx.input(3) if len(ctx.node.inputs) > 3 else None
    out = ctx.raw("axes_3", "ints", bshd)
    return _permute(_sdpa(ctx, *qkv, bias), [bshd[a] for a in out])


def convert_cross_entropy(ctx) -> str:
    x, y = ctx.inputs
    total = f"-torch.sum({x} * {y})"
    return f"({total} / {x}.shape[0])" if ctx.in_tensor(0).ndim == 2 else total


def convert_nll_loss(ctx) -> str:
    weight = ctx.tensor_arg("weights")
    kw = {"weight": weight} if weight else {}
    return call("F.nll_loss", ctx.input(0), f"{ctx.input(1)}.long()", **kw,
                 reduction=literal(ctx.attr("reduction")),
                 ignore_index=literal(ctx.attr("ignore_index")))


_RESIZE_MODES = {  # (method, coordinate_transformation_mode) -> (mode, align_corners)
    ("linear", "half_pixel"): ("linear", False), ("linear", "align_corners"): ("linear", True),
    ("cubic", "half_pixel"): ("bicubic", False), ("cubic", "align_corners"): ("bicubic", True),
    ("nearest_neighbor", "asymmetric"): ("nearest", None),
}


def convert_resize(ndim: int) -> Callable:
    def convert(ctx) -> str:
        _spatial(ctx, "layout", ndim)
        key = (ctx.attr("method"), ctx.attr("coordinate_transformation_mode"))
        if key not in _RESIZE_MODES or (key[0] == "nearest_neighbor" and
                                        ctx.attr("rounding_method") not in ("floor", "")):
            raise ctx.fail(f"resize {key}, rounding {ctx.attr('rounding_method')!r}: no torch "
                           "interpolate mode matches")
        mode, align = _RESIZE_MODES[key]
        if mode == "linear":
            mode = {2: "bilinear", 3: "trilinear"}[ndim]
        size = "(" + ", ".join(str(ctx.dim(ctx.out, i)) for i in range(2, 2 + ndim)) + ")"
        kw = {"size": size, "mode": literal(mode)}
        if align is not None:
            kw["align_corners"] = literal(align)
        return call("F.interpolate", ctx.input(0), **kw)
    return convert


def convert_grid_sample(ctx) -> str:
    _spatial(ctx, "layout", 2)
    return call("F.grid_sample", ctx.input(0), f"{ctx.input(1)}.permute(0, 2, 3, 1)",
                 mode=literal(ctx.attr("method")), padding_mode=literal(ctx.attr("padding_mode")),
                 align_corners=literal(ctx.attr("align_corners")))


def convert_affine_grid(ctx) -> str:
    out = ctx.out
    size = f"[{ctx.dim(out, 0)}, 1, {ctx.dim(out, 2)}, {ctx.dim(out, 3)}]"
    grid = call("F.affine_grid", ctx.input(0), size,
                 align_corners=literal(ctx.attr("align_corners")))
    return f"{grid}.permute(0, 3, 1, 2)"
