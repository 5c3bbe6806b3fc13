"""Neural-network ONNX ops: convolutions, pools, normalizations, softmax, dropout, padding."""

from __future__ import annotations

import numpy as np

from msc import relax
from msc.tir import expr as tir

from . import runtime_axes
from .common import call, norm_axis, pad_axis, scalar
from .context import Context, OnnxNode
from .converters_manipulate import need_const

_LAYOUTS = {1: ("NCW", "OIW"), 2: ("NCHW", "OIHW"), 3: ("NCDHW", "OIDHW")}


# --------------------------------------------------------------------------------------------
# Window geometry shared by convolutions and pools.

def _window(g: Context, node: OnnxNode, x, kernel: list) -> dict:
    """strides, dilation and explicit padding (auto_pad resolved) for an N-d window op."""
    nd = len(kernel)
    strides = list(node.attrs.get("strides") or [1] * nd)
    dilation = list(node.attrs.get("dilations") or [1] * nd)
    pads = list(node.attrs.get("pads") or [0] * (2 * nd))
    auto_pad = node.attrs.get("auto_pad") or "NOTSET"
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        dims = [tir.as_int(d) for d in need_const(node, g.shape(x), "the input shape")[2:]]
        if any(d is None for d in dims):
            raise node.unsupported("auto_pad needs static spatial dims")
        pads = _same_pads(dims, kernel, strides, dilation, auto_pad == "SAME_UPPER")
    elif auto_pad == "VALID":
        pads = [0] * (2 * nd)
    return {"strides": strides, "dilation": dilation, "padding": pads}


def _same_pads(dims, kernel, strides, dilation, upper: bool) -> list:
    total = [max((-(-d // s) - 1) * s + (k - 1) * r + 1 - d, 0)
             for d, k, s, r in zip(dims, kernel, strides, dilation)]
    small = [t // 2 for t in total]
    big = [t - t // 2 for t in total]
    return small + big if upper else big + small


def _bias_shape(rank: int) -> list:
    return [1, -1] + [1] * (rank - 2)


# --------------------------------------------------------------------------------------------
# Convolutions.

def convert_conv(g: Context, node: OnnxNode):
    x, w, b = node.inputs[:3]
    nd = g.ndim(x) - 2
    kernel = node.attrs["kernel_shape"] or [tir.as_int(d) for d in g.shape(w)[2:]]
    data_layout, kernel_layout = _LAYOUTS[nd]
    window = _window(g, node, x, kernel)
    y = g.emit(call(f"nn.conv{nd}d", x, w, groups=node.attrs["group"],
                    data_layout=data_layout, kernel_layout=kernel_layout, **window))
    if b is None:
        return y
    return g.emit(call("add", y, call("reshape", b, _bias_shape(nd + 2))))


def convert_conv_transpose(g: Context, node: OnnxNode):
    x, w, b = node.inputs[:3]
    nd = g.ndim(x) - 2
    kernel = node.attrs["kernel_shape"] or [tir.as_int(d) for d in g.shape(w)[2:]]
    window = _window(g, node, x, kernel)
    extra = list(node.attrs["output_padding"] or [0] * nd)
    if node.attrs["output_shape"] or (node.attrs["auto_pad"] or "").startswith("SAME"):
        window["padding"], extra = _transpose_pads(g, node, x, kernel, window, extra)
    data_layout = _LAYOUTS[nd][0]
    y = g.emit(call(f"nn.conv{nd}d_transpose", x, w, output_padding=extra,
                    groups=node.attrs["group"], data_layout=data_layout,
                    kernel_layout="IO" + data_layout[2:], **window))
    if b is None:
        return y
    return g.emit(call("add", y, call("reshape", b, _bias_shape(nd + 2))))


def _transpose_pads(g: Context, node: OnnxNode, x, kernel, window, extra):
    """Padding that yields the requested ``output_shape`` (ONNX ConvTranspose rule)."""
    dims = [tir.as_int(d) for d in need_const(node, g.shape(x), "the input shape")[2:]]
    want = list(node.attrs["output_shape"] or [d * s for d, s in zip(dims,
                                                                       window["strides"])])
    want = want[-len(dims):]
    total = [s * (d - 1) + e + (k - 1) * r + 1 - o for d, k, s, r, e, o in
             zip(dims, kernel, window["strides"], window["dilation"], extra, want)]
    upper = (node.attrs.get("auto_pad") or "NOTSET") != "SAME_LOWER"
    small, big = [max(t, 0) // 2 for t in total], [max(t, 0) - max(t, 0) // 2 for t in total]
    pads = (small + big) if upper else (big + small)
    extra = [e - min(t, 0) for e, t in zip(extra, total)]
    return pads, extra


# --------------------------------------------------------------------------------------------
# Pools.

def pool(kind: str):
    def convert(g: Context, node: OnnxNode):
        x = node.inputs[0]
        if node.num_outputs > 1 and node.output_names[1]:
            raise node.unsupported("MaxPool's Indices output is not supported")
        nd = g.ndim(x) - 2
        kernel = list(node.attrs["kernel_shape"])
        window = _window(g, node, x, kernel)
        extra = {"count_include_pad": bool(node.attrs["count_include_pad"])} \
            if kind == "avg" else {}
        return g.emit(call(f"nn.{kind}_pool{nd}d", x, kernel, window["strides"],
                           window["dilation"], window["padding"],
                           bool(node.attrs.get("ceil_mode") or 0), layout=_LAYOUTS[nd][0],
                           **extra))

    convert.__name__ = f"convert_{kind}_pool"
    return convert


def convert_lp_pool(g: Context, node: OnnxNode):
    x, p = node.inputs[0], float(node.attrs["p"])
    nd = g.ndim(x) - 2
    kernel = list(node.attrs["kernel_shape"])
    window = _window(g, node, x, kernel)
    powered = call("power", call("abs", x), scalar(g, p, x))
    avg = call(f"nn.avg_pool{nd}d", powered, kernel, window["strides"], window["dilation"],
               window["padding"], bool(node.attrs.get("ceil_mode") or 0), True,
               layout=_LAYOUTS[nd][0])
    total = call("multiply", avg, scalar(g, int(np.prod(kernel)), x))
    return g.emit(call("power", total, scalar(g, 1.0 / p, x)))


def global_pool(kind: str):
    def convert(g: Context, node: OnnxNode):
        x = node.inputs[0]
        axes = list(range(2, g.ndim(x)))
        if kind == "avg":
            return g.emit(call("mean", x, axes, True))
        if kind == "max":
            return g.emit(call("max", x, axes, True))
        p = float(node.attrs["p"])
        total = call("sum", call("power", call("abs", x), scalar(g, p, x)), axes, True)
        return g.emit(call("power", total, scalar(g, 1.0 / p, x)))

    convert.__name__ = f"convert_global_{kind}_pool"
    return convert


def convert_max_unpool(g: Context, node: OnnxNode):
    x, indices, output_shape = node.inputs[:3]
    dims = need_const(node, g.shape(x), "the input shape")
    if output_shape is not None:
        out = need_const(node, g.ints(output_shape), "output_shape")
    else:
        kernel, strides = node.attrs["kernel_shape"], node.attrs["strides"] or [1] * (len(dims)
                                                                                      - 2)
        pads = node.attrs["pads"] or [0] * (2 * len(kernel))
        nd = len(kernel)
        out = list(dims[:2]) + [(tir.as_int(d) - 1) * s + k - pads[i] - pads[i + nd]
                                for i, (d, k, s) in enumerate(zip(dims[2:], kernel, strides))]
    total = int(np.prod([int(d) for d in out]))
    flat = call("zeros", [total], g.dtype(x))
    y = call("scatter_elements", flat, call("reshape", indices, [-1]),
             call("reshape", x, [-1]), 0)
    return g.emit(call("reshape", y, out))


# --------------------------------------------------------------------------------------------
# Normalizations.

def convert_batch_norm(g: Context, node: OnnxNode):
    x, scale, bias, mean, var = node.inputs[:5]
    eps = node.attrs["epsilon"]
    if node.attrs.get("training_mode"):
        return _batch_norm_training(g, node, x, scale, bias, mean, var)
    y = call("nn.batch_norm", x, scale, bias, mean, var, axis=1, epsilon=eps,
             momentum=node.attrs["momentum"], training=False)
    return g.emit(relax.TupleGetItem(g.emit(y), 0))


def _batch_norm_training(g: Context, node: OnnxNode, x, scale, bias, mean, var):
    axes = [0] + list(range(2, g.ndim(x)))
    shape = _bias_shape(g.ndim(x))
    batch_mean = g.emit(call("mean", x, axes))
    batch_var = g.emit(call("variance", x, axes))
    y = _affine(g, call("subtract", x, call("reshape", batch_mean, shape)),
                call("reshape", call("add", batch_var, scalar(g, node.attrs["epsilon"], x)),
                     shape), call("reshape", scale, shape), call("reshape", bias, shape))
    m = node.attrs["momentum"]

    def running(old, new):
        return g.emit(call("add", call("multiply", old, scalar(g, m, old)),
                           call("multiply", new, scalar(g, 1 - m, new))))

    return [y, running(mean, batch_mean), running(var, batch_var)]


def _affine(g: Context, centered, var_eps, scale, bias):
    normed = call("divide", centered, call("sqrt", var_eps))
    return g.emit(call("add", call("multiply", normed, scale), bias))


def convert_instance_norm(g: Context, node: OnnxNode):
    x, scale, bias = node.inputs[:3]
    axes = list(range(2, g.ndim(x)))
    return g.emit(call("nn.instance_norm", x, scale, bias, channel_axis=1, axes=axes,
                       epsilon=node.attrs["epsilon"]))


def convert_layer_norm(g: Context, node: OnnxNode):
    x, scale, bias = node.inputs[:3]
    rank = g.ndim(x)
    axes = list(range(norm_axis(node.attrs["axis"], rank), rank))
    eps = node.attrs["epsilon"]
    if node.num_outputs > 1 or not _matches_axes(g, x, scale, axes):
        return _layer_norm_decomposed(g, x, scale, bias, axes, eps)
    bias = bias if bias is not None else call("zeros_like", scale)
    return g.emit(call("nn.layer_norm", x, scale, bias, axes=axes, epsilon=eps))


def _matches_axes(g: Context, x, scale, axes) -> bool:
    dims, sdims = g.shape(x), g.shape(scale)
    return dims is not None and sdims is not None and list(sdims) == [dims[a] for a in axes]


def _layer_norm_decomposed(g: Context, x, scale, bias, axes, eps):
    mean = g.emit(call("mean", x, axes, True))
    centered = g.emit(call("subtract", x, mean))
    var = call("mean", call("multiply", centered, centered), axes, True)
    inv_std = g.emit(call("rsqrt", call("add", var, scalar(g, eps, x))))
    y = call("multiply", call("multiply", centered, inv_std), scale)
    y = g.emit(y if bias is None else call("add", y, bias))
    return [y, mean, inv_std]


def convert_group_norm_v18(g: Context, node: OnnxNode):
    """GroupNormalization-18: scale and bias per group, repeated over its channels."""
    x, scale, bias = node.inputs[:3]
    per = tir.as_int(tir.floordiv(g.shape(x)[1], node.attrs["num_groups"]))
    scale, bias = (g.emit(call("repeat", v, per, 0)) for v in (scale, bias))
    return _group_norm(g, node, x, scale, bias)


def convert_group_norm(g: Context, node: OnnxNode):
    """GroupNormalization-21: scale and bias per channel."""
    return _group_norm(g, node, *node.inputs[:3])


def _group_norm(g: Context, node: OnnxNode, x, scale, bias):
    groups = node.attrs["num_groups"]
    return g.emit(call("nn.group_norm", x, scale, bias, num_groups=groups, channel_axis=1,
                       axes=list(range(2, g.ndim(x))), epsilon=node.attrs["epsilon"]))


def convert_rms_norm(g: Context, node: OnnxNode):
    x, scale = node.inputs[:2]
    rank = g.ndim(x)
    axes = list(range(norm_axis(node.attrs["axis"], rank), rank))
    if not _matches_axes(g, x, scale, axes):
        ms = call("mean", call("multiply", x, x), axes, True)
        inv = call("rsqrt", call("add", ms, scalar(g, node.attrs["epsilon"], x)))
        return g.emit(call("multiply", call("multiply", x, inv), scale))
    return g.emit(call("nn.rms_norm", x, scale, axes=axes, epsilon=node.attrs["epsilon"]))


def convert_lrn(g: Context, node: OnnxNode):
    x, size = node.inputs[0], node.attrs["size"]
    n, c, *rest = need_const(node, g.shape(x), "the input shape")
    spatial = 1
    for d in rest:
        spatial = spatial * d
    sq = call("reshape", call("multiply", x, x), [n, 1, c, spatial])
    pads = [(size - 1) // 2, 0, size - 1 - (size - 1) // 2, 0]
    avg = call("nn.avg_pool2d", sq, [size, 1], [1, 1], [1, 1], pads, False, True)
    total = call("reshape", call("multiply", avg, scalar(g, size, x)), [n, c, *rest])
    alpha, beta, bias = node.attrs["alpha"], node.attrs["beta"], node.attrs["bias"]
    base = call("add", scalar(g, bias, x), call("multiply", total, scalar(g, alpha / size, x)))
    return g.emit(call("divide", x, call("power", base, scalar(g, beta, x))))


def convert_lp_norm(g: Context, node: OnnxNode):
    x, p = node.inputs[0], node.attrs["p"]
    axis = norm_axis(node.attrs["axis"], g.ndim(x))
    if p == 1:
        norm = call("sum", call("abs", x), [axis], True)
    else:
        norm = call("sqrt", call("sum", call("multiply", x, x), [axis], True))
    norm = g.emit(norm)
    zero = call("equal", norm, scalar(g, 0, x))
    return g.emit(call("where", zero, scalar(g, 0, x), call("divide", x, norm)))


def convert_mvn(g: Context, node: OnnxNode):
    x, axes = node.inputs[0], list(node.attrs["axes"])
    mean = call("mean", x, axes, True)
    centered = g.emit(call("subtract", x, mean))
    var = call("mean", call("multiply", centered, centered), axes, True)
    std = call("add", call("sqrt", var), scalar(g, 1e-9, x))
    return g.emit(call("divide", centered, std))


# --------------------------------------------------------------------------------------------
# Softmax family (before opset 13 they work on the input flattened to 2-D at ``axis``).

def softmax(op: str):
    """Softmax-13 family: along ``axis``."""
    def convert(g: Context, node: OnnxNode):
        x = node.inputs[0]
        return g.emit(_softmax_like(g, op, x, norm_axis(node.attrs["axis"], g.ndim(x))))

    convert.__name__ = f"convert_{op}"
    return convert


def softmax_v1(op: str):
    """Softmax-1/11 family: over the input flattened to 2-D at ``axis``."""
    def convert(g: Context, node: OnnxNode):
        x = node.inputs[0]
        axis = norm_axis(node.attrs["axis"], g.ndim(x))
        if axis == g.ndim(x) - 1:
            return g.emit(_softmax_like(g, op, x, axis))
        dims = need_const(node, g.shape(x), "the input shape")
        lead = 1
        for d in dims[:axis]:
            lead = lead * d
        flat = g.emit(call("reshape", x, [lead, -1]))
        return g.emit(call("reshape", _softmax_like(g, op, flat, 1), list(dims)))

    convert.__name__ = f"convert_{op}_v1"
    return convert


_SOFTMAX = {"Softmax": "softmax", "LogSoftmax": "log_softmax", "Hardmax": "hardmax"}


def _softmax_like(g: Context, op: str, x, axis: int):
    if op != "hardmax":
        return call(f"nn.{op}", x, axis)
    depth = tir.as_int(g.shape(x)[axis]) if g.shape(x) is not None else None
    if depth is None:
        raise ValueError("Hardmax needs a static size along its axis")
    hot = call("one_hot", call("argmax", x, axis), relax.PrimValue(_one(g, x, 1)),
               relax.PrimValue(_one(g, x, 0)), depth, axis)
    return hot


def _one(g: Context, x, value):
    dtype = g.dtype(x)
    return tir.FloatImm(float(value), dtype) if dtype.startswith("float") else \
        tir.IntImm(int(value), dtype)


# --------------------------------------------------------------------------------------------
# Dropout, padding.

def convert_dropout(g: Context, node: OnnxNode):
    x = node.inputs[0]
    training = node.inputs[2] if len(node.inputs) > 2 else None
    if training is not None and (g.value(training) is None or bool(g.value(training))):
        raise node.unsupported("Dropout in training mode is random")
    if node.num_outputs < 2:
        return x
    return [x, g.emit(call("ones_like", x, "bool"))]


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge",
              "wrap": "circular"}


def convert_pad_v1(g: Context, node: OnnxNode):
    """Pad-1/2: pads and value as attributes."""
    pads = list(node.attrs.get("pads") or node.attrs.get("paddings"))
    return _pad(g, node, node.inputs[0], pads, node.attrs["value"])


def convert_pad(g: Context, node: OnnxNode):
    """Pad-11+: pads, constant_value and (18) axes as inputs."""
    x, pads, value = node.inputs[:3]
    axes = node.inputs[3] if len(node.inputs) > 3 else None
    if g.ints(pads) is None or (value is not None and g.value(value) is None):
        return _pad_at_runtime(node, g, x, pads, value, axes)
    pads = g.ints(pads)
    if axes is not None and g.ints(axes) is None:
        return _pad_at_runtime(node, g, x, relax.const(np.asarray(pads, "int64")), value, axes)
    if axes is not None:
        pads = _pads_for_axes(node, g, pads, axes, g.ndim(x))
    return _pad(g, node, x, pads, 0 if value is None else g.value(value))


def _pad(g: Context, node: OnnxNode, x, pads: list, value):
    rank = g.ndim(x)
    value = np.asarray(value).reshape(-1)[0].item() if np.size(value) else 0
    widths = [w for k in range(rank) for w in (pads[k], pads[k + rank])]
    return _pad_and_crop(g, x, widths, value, _PAD_MODES[node.attrs["mode"]])


def _pad_at_runtime(node: OnnxNode, g: Context, x, pads, value, axes):
    """Padding by amounts (or along axes) known only at run time, one axis at a time:
    constant fill blocks concatenated on both sides (symbolic sizes), or, for the other
    modes, a gather of source indices; negative amounts crop."""
    rank = g.ndim(x)
    pads = need_const(node, g.runtime_ints(pads, "pad"), "pads (static length)")
    half = len(pads) // 2
    if axes is not None and g.ints(axes) is None:
        axes = runtime_axes.axes_at_runtime(g, node, axes, rank)
        befores, afters = (runtime_axes.pick_per_dim(axes, p, rank, 0)
                           for p in (pads[:half], pads[half:]))
        pads, axes = befores + afters, list(range(rank))
    else:
        axes = list(range(rank)) if axes is None else [
            norm_axis(a, rank) for a in need_const(node, g.ints(axes), "axes")]
    fill = scalar(g, 0, x) if value is None else call(
        "astype", call("reshape", value, []), g.dtype(x))
    mode = node.attrs["mode"]
    for i, axis in enumerate(axes):
        before, after = pads[i], pads[i + len(axes)]
        x = pad_axis(g, x, axis, before, after, fill) if mode == "constant" else \
            _pad_by_gather(g, x, axis, before, after, mode)
    return x


def _pad_by_gather(g: Context, x, axis: int, before, after, mode: str):
    """edge / reflect / wrap padding of one axis, as onnxruntime does it: negative amounts
    crop first, then a take of the source index of every output position."""
    n = g.shape(x)[axis]
    low, high = tir.max(-tir.convert(before), 0), tir.max(-tir.convert(after), 0)
    grow = [tir.max(tir.convert(v), 0) for v in (before, after)]
    kept = tir.convert(n) - low - high
    i = call("subtract", call("arange", 0, kept + grow[0] + grow[1], 1, "int64"),
             _int_tensor(grow[0]))
    size, one = _int_tensor(kept), relax.const(1, "int64")
    if mode == "edge":
        src = call("minimum", call("maximum", i, relax.const(0, "int64")),
                   call("subtract", size, one))
    elif mode == "wrap":
        src = call("floor_mod", i, size)
    else:  # reflect: period 2 (kept - 1), mirrored in its second half
        period = call("maximum", call("multiply", call("subtract", size, one),
                                      relax.const(2, "int64")), one)
        j = call("floor_mod", i, period)
        src = call("where", call("less", j, size), j, call("subtract", period, j))
    return g.emit(call("take", x, g.emit(call("add", src, _int_tensor(low))), axis))


def _int_tensor(value):
    """A 0-d int64 tensor of a (symbolic) int."""
    return call("reshape", call("shape_to_tensor", relax.ShapeExpr([value])), [])


def _pads_for_axes(node: OnnxNode, g: Context, pads, axes, rank: int) -> list:
    axes = [norm_axis(a, rank) for a in need_const(node, g.ints(axes), "axes")]
    full = [0] * (2 * rank)
    for i, a in enumerate(axes):
        full[a], full[a + rank] = pads[i], pads[i + len(axes)]
    return full


def _pad_and_crop(g: Context, x, widths: list, value, mode: str):
    """nn.pad for the positive widths, then a slice for the negative ones (ONNX crops)."""
    positive = [max(w, 0) for w in widths]
    if any(positive):
        x = g.emit(call("nn.pad", x, positive, float(value), mode))
    if not any(w < 0 for w in widths):
        return x
    axes = [k for k in range(len(widths) // 2) if min(widths[2 * k], widths[2 * k + 1]) < 0]
    begin = [-min(widths[2 * k], 0) for k in axes]
    end = [min(widths[2 * k + 1], 0) or np.iinfo(np.int64).max for k in axes]
    return g.emit(call("strided_slice", x, axes, begin, end))


CONVERTERS = {
    "Conv": {1: convert_conv}, "ConvTranspose": {1: convert_conv_transpose},
    "MaxPool": {1: pool("max")}, "AveragePool": {1: pool("avg")},
    "LpPool": {1: convert_lp_pool}, "GlobalAveragePool": {1: global_pool("avg")},
    "GlobalMaxPool": {1: global_pool("max")}, "GlobalLpPool": {2: global_pool("lp")},
    "MaxUnpool": {9: convert_max_unpool},
    "BatchNormalization": {1: convert_batch_norm},
    "InstanceNormalization": {1: convert_instance_norm},
    "LayerNormalization": {17: convert_layer_norm},
    "GroupNormalization": {18: convert_group_norm_v18, 21: convert_group_norm},
    "RMSNormalization": {23: convert_rms_norm}, "LRN": {1: convert_lrn},
    "LpNormalization": {1: convert_lp_norm},
    "MeanVarianceNormalization": {9: convert_mvn},
    **{op: {1: softmax_v1(name), 13: softmax(name)} for op, name in _SOFTMAX.items()},
    "Dropout": {1: convert_dropout}, "Pad": {1: convert_pad_v1, 11: convert_pad},
}
