"""Neural-network ops (``relax.op.nn.*``): convolution, pooling, normalization, activations,
attention, losses and padding. (The Relay-era ``nn.dense`` / ``nn.batch_matmul`` /
``nn.bias_add`` that msc's vocabulary still lists live in defs_msc.py.)

Window ops come from tables keyed by spatial rank. One inference per kind (conv, transposed
conv, pool, adaptive pool) reads dims by layout letter, so every permutation of NCHW / OIHW
works::

    relax.op.nn.conv2d(x, w, strides=2, padding=1)            # attrs print as [2, 2], [1, 1, 1, 1]
    relax.op.nn.max_pool2d(x, 3, 2, 1, layout="NHWC")         # TVM's Python argument order
"""

from __future__ import annotations

import inspect

from ...errors import ValidationError
from ...tir import expr as tir
from ..struct_info import TupleStructInfo
from .infer import (
    SPATIAL_LETTERS,
    by_letter,
    check_dim,
    check_rank,
    common_dtype,
    conv_out_dim,
    conv_transpose_out_dim,
    expand_padding,
    expand_window,
    layout_positions,
    normalize_axes,
    normalize_axis,
    pool_out_dim,
    prod,
    provably_differ,
    require_float,
    result_dtype,
    shapes_differ,
    tensor,
)
from .registry import REQUIRED, Arg, AttrDef, OpDef, make_call, register, signature_param

# --------------------------------------------------------------------------------------------
# Builders whose positional order is TVM's Python one (it differs from the attr print order).


def python_order(op_def: OpDef, order: list, extra: dict | None = None, prepare=None) -> OpDef:
    """Give ``op_def`` a builder taking arguments in ``order``. ``extra`` adds defaults for
    names the op itself does not declare; ``prepare(values)`` may rewrite the bound values and
    returns the name of the op to call (attention routes to attention_bias)."""
    defaults = {p.name: p.default for p in op_def.args + op_def.attrs} | (extra or {})
    sig = inspect.Signature([signature_param(name, defaults[name]) for name in order])

    def build(*args, **kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as err:
            raise ValidationError(f"bad arguments for R.{op_def.name}: {err}", op=op_def.name,
                                  hint=f"signature: {op_def.name}{sig}") from None
        bound.apply_defaults()
        values = dict(bound.arguments)
        return make_call(prepare(values) if prepare else op_def.name, **values)

    build.__name__ = build.__qualname__ = op_def.name.rsplit(".", 1)[-1]
    build.__signature__ = sig
    build.__doc__ = f"Build a call to relax.{op_def.name}{sig}."
    op_def.builder = build
    return op_def


# --------------------------------------------------------------------------------------------
# Window attributes: expanded once when the call is built, as TVM does.

_WINDOW_EXPAND = {
    "strides": expand_window, "dilation": expand_window, "pool_size": expand_window,
    "output_padding": expand_window, "output_size": expand_window, "padding": expand_padding,
}


def window_normalize(op: str, d: int, layout_attr: str):
    """Expand window attrs to ``d`` spatial axes; out_layout defaults to the input layout."""
    def normalize(attrs: dict, exprs) -> dict:
        for name, value in attrs.items():
            if name in _WINDOW_EXPAND and value is not None:
                attrs[name] = _WINDOW_EXPAND[name](value, d, op, name)
        if attrs.get("out_layout") is None:
            attrs["out_layout"] = attrs[layout_attr]
        if attrs.get("out_dtype") == "void":
            attrs["out_dtype"] = None
        return attrs
    return normalize


def _check_positive(ctx, out: dict, spatial: str) -> None:
    for c in spatial:
        if out[c].is_const and out[c].value <= 0:
            raise ctx.error(f"output {c} would be {out[c].value}: the input is smaller than the "
                            "(dilated) window", 0, hint="add padding or use a smaller window")


def _indivisible(dim, by: int) -> bool:
    return dim.is_const and dim.value % by != 0


# --------------------------------------------------------------------------------------------
# Convolutions.

def conv_attrs(d: int, transpose: bool = False) -> list:
    one, zero = (1, 0) if d == 1 else ((1,) * d, (0,) * d)  # TVM's Python defaults
    spatial = SPATIAL_LETTERS[d]
    out_padding = [AttrDef("output_padding", "ints", zero)] if transpose else []
    return [
        AttrDef("strides", "ints", one), AttrDef("padding", "ints", zero), *out_padding,
        AttrDef("dilation", "ints", one), AttrDef("groups", "int", 1),
        AttrDef("data_layout", "str", "NC" + spatial),
        AttrDef("kernel_layout", "str", ("IO" if transpose else "OI") + spatial),
        AttrDef("out_layout", "str", None), AttrDef("out_dtype", "dtype", None),
    ]


def conv_infer(d: int, transpose: bool = False):
    """Inference of ``conv{d}d`` (or its transpose) on data and weight args 0 and 1."""
    letters = "NC" + SPATIAL_LETTERS[d]
    dims = _conv_transpose_dims if transpose else _conv_dims

    def infer(ctx):
        data, weight, attrs = ctx.tensor(0), ctx.tensor(1), ctx.attrs
        layout_positions(ctx, attrs.data_layout, letters, 0, "data_layout")
        layout_positions(ctx, attrs.kernel_layout, "OI" + letters[2:], 1, "kernel_layout")
        layout_positions(ctx, attrs.out_layout, letters, None, "out_layout")
        check_rank(ctx, data, d + 2, 0, f"data_layout {attrs.data_layout!r}")
        check_rank(ctx, weight, d + 2, 1, f"kernel_layout {attrs.kernel_layout!r}")
        dtype = result_dtype(ctx, [data, weight], attrs.out_dtype)
        if attrs.groups < 1:
            raise ctx.error(f"groups={attrs.groups} must be at least 1")
        if data.values is None or weight.values is None:
            return tensor(None, dtype, d + 2)
        x = by_letter(data.values, attrs.data_layout)
        w = by_letter(weight.values, attrs.kernel_layout)
        out = dims(ctx, x, w, attrs, letters[2:])
        _check_positive(ctx, out, letters[2:])
        return tensor([out[c] for c in attrs.out_layout], dtype)
    return infer


def _conv_dims(ctx, x: dict, w: dict, attrs, spatial: str) -> dict:
    groups, n = attrs.groups, len(spatial)
    if provably_differ(x["C"], w["I"] * groups):
        raise ctx.error(f"data has {x['C']} channels, but the weight takes I={w['I']} per group "
                        f"x groups={groups}", 1, hint="the weight must be [O, C / groups, "
                        f"kernel...] in kernel_layout {attrs.kernel_layout!r}; check groups")
    if _indivisible(w["O"], groups):
        raise ctx.error(f"output channels O={w['O']} are not divisible by groups={groups}", 1)
    out = {"N": x["N"], "C": w["O"]}
    for j, c in enumerate(spatial):
        out[c] = conv_out_dim(x[c], w[c], attrs.strides[j], attrs.padding[j],
                              attrs.padding[j + n], attrs.dilation[j])
    return out


def _conv_transpose_dims(ctx, x: dict, w: dict, attrs, spatial: str) -> dict:
    n = len(spatial)
    if provably_differ(x["C"], w["I"]):
        raise ctx.error(f"data has {x['C']} channels, but the weight's I is {w['I']}", 1,
                        hint=f"a transposed-conv weight is [C, O / groups, kernel...] in "
                        f"kernel_layout {attrs.kernel_layout!r}")
    for j in range(n):
        if attrs.output_padding[j] >= attrs.strides[j]:
            raise ctx.error(f"output_padding {list(attrs.output_padding)} must be smaller than "
                            f"strides {list(attrs.strides)}")
    out = {"N": x["N"], "C": w["O"] * attrs.groups}
    for j, c in enumerate(spatial):
        out[c] = conv_transpose_out_dim(x[c], w[c], attrs.strides[j], attrs.padding[j],
                                        attrs.padding[j + n], attrs.dilation[j],
                                        attrs.output_padding[j])
    return out


CONVS = {  # name: (spatial rank, transposed)
    "conv1d": (1, False), "conv2d": (2, False), "conv3d": (3, False),
    "conv1d_transpose": (1, True), "conv2d_transpose": (2, True), "conv3d_transpose": (3, True),
}
for _name, (_d, _transpose) in CONVS.items():
    register(f"nn.{_name}", [Arg("data"), Arg("weight")], conv_attrs(_d, _transpose),
             infer=conv_infer(_d, _transpose), family="conv",
             normalize=window_normalize(f"nn.{_name}", _d, "data_layout"))


# --------------------------------------------------------------------------------------------
# Pooling.

def _pool_attrs(d: int, count_include_pad: bool) -> list:
    one = (1,) * d
    return [
        AttrDef("pool_size", "ints", one), AttrDef("strides", "ints", one),
        AttrDef("dilation", "ints", one), AttrDef("padding", "ints", (0,) * max(d, 2)),
        AttrDef("ceil_mode", "bool", False),
        AttrDef("count_include_pad", "bool", count_include_pad),
        AttrDef("layout", "str", "NC" + SPATIAL_LETTERS[d]), AttrDef("out_layout", "str", None),
    ]


def _adaptive_attrs(d: int) -> list:
    return [AttrDef("output_size", "ints", None),
            AttrDef("layout", "str", "NC" + SPATIAL_LETTERS[d]), AttrDef("out_layout", "str", None)]


def _window_dims(attrs, x: dict, spatial: str) -> dict:
    n = len(spatial)
    return {c: pool_out_dim(x[c], attrs.pool_size[j], attrs.strides[j], attrs.padding[j],
                            attrs.padding[j + n], attrs.dilation[j], attrs.ceil_mode)
            for j, c in enumerate(spatial)}


def _adaptive_dims(attrs, x: dict, spatial: str) -> dict:
    sizes = attrs.output_size
    return {} if sizes is None else {c: tir.IntImm(s) for c, s in zip(spatial, sizes)}


def pool_infer(d: int, adaptive: bool = False):
    letters = "NC" + SPATIAL_LETTERS[d]
    dims = _adaptive_dims if adaptive else _window_dims

    def infer(ctx):
        data, attrs = ctx.tensor(0), ctx.attrs
        layout_positions(ctx, attrs.layout, letters, 0, "layout")
        layout_positions(ctx, attrs.out_layout, letters, None, "out_layout")
        check_rank(ctx, data, d + 2, 0, f"layout {attrs.layout!r}")
        if data.values is None:
            return tensor(None, data.dtype, d + 2)
        x = by_letter(data.values, attrs.layout)
        out = {**x, **dims(attrs, x, letters[2:])}
        _check_positive(ctx, out, letters[2:])
        return tensor([out[c] for c in attrs.out_layout], data.dtype)
    return infer


POOL_ORDER = ["data", "pool_size", "strides", "padding", "dilation", "ceil_mode",
              "count_include_pad", "layout", "out_layout"]
COUNT_INCLUDE_PAD = {"max": (False, False, False), "avg": (True, False, True)}  # per rank 1..3
for _kind, _includes in COUNT_INCLUDE_PAD.items():
    for _d, _include in enumerate(_includes, 1):
        _name = f"nn.{_kind}_pool{_d}d"
        python_order(register(_name, [Arg("data")], _pool_attrs(_d, _include),
                              infer=pool_infer(_d), family="pool",
                              normalize=window_normalize(_name, _d, "layout")), POOL_ORDER)
for _d in (1, 2, 3):
    _name = f"nn.adaptive_avg_pool{_d}d"
    register(_name, [Arg("data")], _adaptive_attrs(_d), infer=pool_infer(_d, adaptive=True),
             family="pool", normalize=window_normalize(_name, _d, "layout"))


# --------------------------------------------------------------------------------------------
# Normalization: every parameter tensor spans the data dims at some axes.

def _attr_axes(ctx, data) -> list:
    return normalize_axes(ctx, ctx.attrs.axes, data.ndim)


def _batch_axes(ctx, data) -> list:
    return [normalize_axis(ctx, ctx.attrs.axis, data.ndim)]


def _channel_axes(ctx, data) -> list:
    _attr_axes(ctx, data)  # validated, though the params span the channel axis only
    return [normalize_axis(ctx, ctx.attrs.channel_axis, data.ndim)]


def _group_axes(ctx, data) -> list:
    axes = _channel_axes(ctx, data)
    groups = ctx.attrs.num_groups
    if data.values is not None and _indivisible(data.values[axes[0]], groups):
        raise ctx.error(f"{data.values[axes[0]]} channels are not divisible by "
                        f"num_groups={groups}", 0)
    return axes


def _check_param(ctx, data, axes: list | None, i: int) -> None:
    param = ctx.tensor(i)
    if param.dtype != data.dtype and "void" not in (param.dtype, data.dtype):
        raise ctx.error(f"has dtype {param.dtype}, but data has {data.dtype}", i,
                        hint="a norm's inputs share one dtype; R.astype the parameter")
    if axes is None:
        return
    if param.ndim >= 0 and param.ndim != len(axes):
        raise ctx.error(f"has rank {param.ndim}, but it must span data axes {axes}", i)
    if param.values is None or data.values is None:
        return
    want = [data.values[a] for a in axes]
    if shapes_differ(param.values, want):
        raise ctx.error(f"has shape {list(param.values)}, but data's dims at axes {axes} "
                        f"are {want}", i)


def norm_infer(param_axes, result=None):
    def infer(ctx):
        data = ctx.tensor(0)
        require_float(ctx, data)
        axes = param_axes(ctx, data) if data.ndim >= 0 else None
        for i in range(1, len(ctx.args)):
            _check_param(ctx, data, axes, i)
        return result(ctx, data, axes) if result else data
    return infer


def _batch_norm_result(ctx, data, axes):
    """(normalized data, new running mean, new running var), as TVM returns them."""
    if axes is not None and data.values is not None:
        stat = tensor([data.values[axes[0]]], data.dtype)
    else:
        stat = ctx.tensor(3)
    return TupleStructInfo([data, stat, stat])


_FLAGS = [AttrDef("epsilon", "float", 1e-5), AttrDef("center", "bool", True),
          AttrDef("scale", "bool", True)]
_CHANNEL = [AttrDef("channel_axis", "int", REQUIRED), AttrDef("axes", "ints", REQUIRED)]
NORMS = {  # name: (params after data, attrs, param axes, result)
    "batch_norm": (("gamma", "beta", "moving_mean", "moving_var"),
                   [AttrDef("axis", "int", REQUIRED), *_FLAGS, AttrDef("momentum", "float", 0.1),
                    AttrDef("training", "bool", True)], _batch_axes, _batch_norm_result),
    "layer_norm": (("gamma", "beta"), [AttrDef("axes", "ints", REQUIRED), *_FLAGS],
                   _attr_axes, None),
    "group_norm": (("gamma", "beta"), [AttrDef("num_groups", "int", REQUIRED), *_CHANNEL,
                                       *_FLAGS], _group_axes, None),
    "instance_norm": (("gamma", "beta"), [*_CHANNEL, *_FLAGS], _channel_axes, None),
    "rms_norm": (("weight",), [AttrDef("axes", "ints", -1), AttrDef("epsilon", "float", 1e-5)],
                 _attr_axes, None),
}
# batch_norm's outputs 1 and 2 are the new running mean / var (statistics, not the result).
STAT_OUTPUTS = {"batch_norm": (1, 2)}
for _name, (_params, _attrs, _axes, _result) in NORMS.items():
    register(f"nn.{_name}", [Arg("data"), *(Arg(p) for p in _params)], _attrs,
             infer=norm_infer(_axes, _result), family="norm", float_only=True,
             stat_outputs=STAT_OUTPUTS.get(_name, ()))


# --------------------------------------------------------------------------------------------
# Activations and other shape-preserving ops.

def activation_infer(ctx):
    data = ctx.tensor(0)
    if ctx.op_def.float_only:
        require_float(ctx, data)
    if "axis" in ctx.attrs and data.ndim >= 0:
        normalize_axis(ctx, ctx.attrs.axis, data.ndim)
    return data


def dropout_infer(ctx):
    data = ctx.tensor(0)
    return TupleStructInfo([data, data])  # (output, mask), as TVM returns them


_AXIS = [AttrDef("axis", "int", -1)]
ACTIVATIONS = {  # name: (args after data, attrs, float inputs only)
    "relu": ((), [], False),
    "gelu": ((), [], True), "gelu_tanh": ((), [], True), "silu": ((), [], True),
    "selu": ((), [], True),
    "softplus": ((), [AttrDef("beta", "float", 1.0), AttrDef("threshold", "float", 20.0)], True),
    "leakyrelu": ((), [AttrDef("alpha", "float", 0.01)], True),
    "prelu": (("alpha",), [AttrDef("axis", "int", 1)], True),
    "softmax": ((), _AXIS, True), "log_softmax": ((), _AXIS, True),
}
_ROW_OPS = ("softmax", "log_softmax")  # each output reads its whole row: not pointwise
for _name, (_args, _attrs, _float) in ACTIVATIONS.items():
    register(f"nn.{_name}", [Arg("data"), *(Arg(a) for a in _args)], _attrs,
             infer=activation_infer, family="activation", float_only=_float,
             activation=_name not in _ROW_OPS)
register("nn.dropout", [Arg("data")], [AttrDef("rate", "float", 0.5)], infer=dropout_infer,
         family="activation", inference_identity=True)


def pad_infer(ctx):
    data, widths = ctx.tensor(0), ctx.attrs.pad_width
    if data.ndim >= 0 and len(widths) != 2 * data.ndim:
        raise ctx.error(f"pad_width has {len(widths)} values, but a rank-{data.ndim} input "
                        f"needs {2 * data.ndim}", 0, hint="give (before, after) for every axis")
    if data.values is None:
        return data
    return tensor([d + widths[2 * k] + widths[2 * k + 1] for k, d in enumerate(data.values)],
                  data.dtype)


def batch_flatten_infer(ctx):
    data = ctx.tensor(0)
    if 0 <= data.ndim < 2:
        raise ctx.error(f"needs rank >= 2, got {data.ndim}", 0)
    if data.values is None:
        return tensor(None, data.dtype, 2)
    return tensor([data.values[0], prod(data.values[1:])], data.dtype)


def pixel_shuffle_infer(ctx):
    data, r = ctx.tensor(0), ctx.attrs.upscale_factor
    if 0 <= data.ndim < 3:
        raise ctx.error(f"needs rank >= 3 ([..., C * r^2, H, W]), got {data.ndim}", 0)
    if data.values is None:
        return data
    *lead, c, h, w = data.values
    if _indivisible(c, r * r):
        raise ctx.error(f"{c} channels are not divisible by upscale_factor^2 = {r * r}", 0)
    return tensor([*lead, tir.floordiv(c, r * r), h * r, w * r], data.dtype)


python_order(register("nn.pad", [Arg("data")],
                      [AttrDef("pad_width", "ints", REQUIRED), AttrDef("pad_value", "float", 0.0),
                       AttrDef("pad_mode", "str", "constant")], infer=pad_infer, family="pad"),
             ["data", "pad_width", "pad_mode", "pad_value"])
register("nn.batch_flatten", [Arg("data")], infer=batch_flatten_infer, family="reshape",
         view=True, may_alias=True)
register("nn.pixel_shuffle", [Arg("data")], [AttrDef("upscale_factor", "int", REQUIRED)],
         infer=pixel_shuffle_infer, family="reshape", may_alias=True)


# --------------------------------------------------------------------------------------------
# Attention: query / key / value are [batch, seq_len, num_heads, head_dim] (BSNH).

def attention_dims(ctx, q, k, v, bias=None) -> list:
    """Output dims [b, s, n, h_v] of BSNH attention; ``bias`` is [b|1, n|1, s|1, s_kv]."""
    (b, s, n, h), (bk, sk, nk, hk), (bv, sv, nv, hv) = q, k, v
    pairs = [(bk, b, 1, "batch size"), (bv, b, 2, "batch size"), (hk, h, 1, "head dim"),
             (sv, sk, 2, "sequence length (must match key's)"),
             (nv, nk, 2, "number of heads (must match key's)")]
    for got, want, i, what in pairs:
        check_dim(ctx, got, want, i, what)
    if n.is_const and nk.is_const and n.value % nk.value:
        raise ctx.error(f"query has {n} heads, not a multiple of key's {nk}", 1)
    if bias is not None:
        for got, want, what in zip(bias, (b, n, s), ("batch size", "heads", "query length")):
            if not (got.is_const and got.value == 1):
                check_dim(ctx, got, want, 3, f"{what} (1 broadcasts)")
        check_dim(ctx, bias[3], sk, 3, "key sequence length (last dim)")
    return [b, s, n, hv]


def attention_infer(ctx):
    qkv = [ctx.tensor(i) for i in range(3)]
    with_bias = len(ctx.args) > 3 and ctx.arg_name(3) == "bias"
    inputs = qkv + ([ctx.tensor(3)] if with_bias else [])
    for i, s in enumerate(inputs):
        check_rank(ctx, s, 4, i, "attention ([batch, seq_len, num_heads, head_dim])")
    if any(s.values is None for s in inputs):
        return tensor(None, qkv[0].dtype, 4)
    return tensor(attention_dims(ctx, *(s.values for s in inputs)), qkv[0].dtype)


def _route_attention(values: dict) -> str:
    if values["bias"] is None:
        del values["bias"]
        return "nn.attention"
    return "nn.attention_bias"


def _default_kv_lengths(values: dict) -> str:
    for name in ("seqstart", "max_seqlen"):
        if values[f"{name}_k"] is None:
            values[f"{name}_k"] = values[f"{name}_q"]
    return "nn.attention_var_len"


ATTENTION_ATTRS = [AttrDef("scale", "float", None), AttrDef("causal_mask", "str", None),
                   AttrDef("window_size", "int", None)]
_QKV = [Arg("query"), Arg("key"), Arg("value")]
_ATTENTION_ORDER = ["query", "key", "value", "bias", "scale", "causal_mask", "window_size"]
for _name, _args in (("nn.attention", _QKV), ("nn.attention_bias", [*_QKV, Arg("bias")])):
    python_order(register(_name, _args, ATTENTION_ATTRS, infer=attention_infer,
                          family="attention"), _ATTENTION_ORDER, {"bias": None},
                 _route_attention)
python_order(
    register("nn.attention_var_len",
             [Arg(a) for a in ("queries", "keys", "values", "seqstart_q", "seqstart_k",
                               "max_seqlen_q", "max_seqlen_k")],
             ATTENTION_ATTRS, infer=attention_infer, family="attention"),
    ["queries", "keys", "values", "seqstart_q", "max_seqlen_q", "seqstart_k", "max_seqlen_k",
     "scale", "causal_mask", "window_size"], {"seqstart_k": None, "max_seqlen_k": None},
    _default_kv_lengths)


# --------------------------------------------------------------------------------------------
# Losses.

def cross_entropy_infer(ctx):
    pred, labels = ctx.tensor(0), ctx.tensor(1)
    dtype = common_dtype(ctx, [pred, labels])
    if min(pred.ndim, labels.ndim) >= 0 and pred.ndim != labels.ndim:
        raise ctx.error(f"has rank {labels.ndim}, but predictions have rank {pred.ndim}", 1)
    if shapes_differ(labels.values, pred.values):
        raise ctx.error(f"has shape {list(labels.values)}, but predictions have "
                        f"{list(pred.values)}", 1, hint="labels must match predictions")
    return tensor([], dtype)


def nll_loss_infer(ctx):
    pred, targets = ctx.tensor(0), ctx.tensor(1)
    if not targets.dtype.startswith(("int", "uint", "void")):
        raise ctx.error(f"needs integer class indices, got {targets.dtype}", 1,
                        hint="R.astype(targets, 'int64')")
    per_item = _nll_item_shape(ctx, pred, targets)
    if ctx.attrs.reduction != "none":
        return tensor([], pred.dtype)
    return tensor(per_item, pred.dtype, pred.ndim - 1 if pred.ndim >= 1 else targets.ndim)


def _nll_item_shape(ctx, pred, targets):
    """[N, d1..dk] from predictions [N, C, d1..dk] (or [] from [C]); checks the other args."""
    if 0 <= pred.ndim and 0 <= targets.ndim and targets.ndim != max(pred.ndim - 1, 0):
        raise ctx.error(f"has rank {targets.ndim}, but predictions of rank {pred.ndim} need "
                        f"{max(pred.ndim - 1, 0)}", 1, hint="targets are [N, d1..dk] for "
                        "predictions [N, C, d1..dk]")
    if pred.values is None:
        return targets.values
    items = [pred.values[0], *pred.values[2:]] if pred.ndim > 1 else []
    classes = pred.values[1] if pred.ndim > 1 else pred.values[0]
    if shapes_differ(targets.values, items):
        raise ctx.error(f"has shape {list(targets.values)}, expected {items}", 1)
    if len(ctx.args) > 2:
        weights = ctx.tensor(2)
        check_rank(ctx, weights, 1, 2, "nll_loss (one weight per class)")
        if weights.values is not None:
            check_dim(ctx, weights.values[0], classes, 2, "number of classes")
    return items


def _nll_normalize(attrs: dict, exprs) -> dict:
    if attrs["reduction"] not in ("none", "mean", "sum"):
        raise ValidationError(f"reduction={attrs['reduction']!r} is not supported",
                              op="nn.nll_loss", param="reduction", hint="use none, mean or sum")
    return attrs


register("nn.cross_entropy_with_logits", [Arg("predictions"), Arg("labels")],
         infer=cross_entropy_infer, family="loss")
register("nn.nll_loss", [Arg("predictions"), Arg("targets"), Arg("weights", default=None)],
         [AttrDef("reduction", "str", "mean"), AttrDef("ignore_index", "int", -100)],
         infer=nll_loss_infer, family="loss", normalize=_nll_normalize)
