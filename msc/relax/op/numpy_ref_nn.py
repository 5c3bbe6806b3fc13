"""numpy references for the nn, quantization and msc.* ops (see numpy_ref.py for the contract).

Layouts follow the op attrs (``data_layout="NHWC"``, ``kernel_layout="HWIO"``, ...): inputs
are transposed to the canonical NC<spatial> / OI<spatial> order, computed there and
transposed to ``out_layout``. Convolutions and pools read windows with
``sliding_window_view`` and contract with ``einsum``.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ...errors import UnsupportedOpError

SPATIAL = {1: "W", 2: "HW", 3: "DHW"}


def _ints(value) -> tuple:
    if value is None:
        return ()
    if np.ndim(value) == 0:
        return (int(value),)
    return tuple(int(v) for v in np.asarray(value).reshape(-1))


def per_dim(value, nd: int) -> tuple:
    v = _ints(value)
    return v * nd if len(v) == 1 else v


def _pads(padding, nd: int) -> tuple[tuple, tuple]:
    """TVM's padding (1, nd or 2*nd values: all befores, then all afters)."""
    p = _ints(padding) or (0,)
    if len(p) == 1:
        p = p * (2 * nd)
    elif len(p) == nd:
        p = p * 2
    return p[:nd], p[nd:]


def to_layout(x: np.ndarray, src: str, dst: str) -> np.ndarray:
    """Transpose ``x`` from layout ``src`` to ``dst`` (same letters, e.g. NHWC -> NCHW)."""
    if src == dst:
        return x
    return np.transpose(x, [src.index(c) for c in dst])


def accum(x: np.ndarray) -> np.ndarray:
    """Float inputs accumulate in float64 (closer to a fused kernel than float32 sums)."""
    return x.astype(np.float64) if x.dtype.kind == "f" else x


def _windows(x: np.ndarray, kernel, strides, dilation) -> np.ndarray:
    """(N, C, *out, *kernel) windows of an already padded NC<spatial> array."""
    nd = len(kernel)
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
    view = sliding_window_view(x, extent, axis=tuple(range(2, 2 + nd)))
    index = (slice(None),) * 2 + tuple(slice(None, None, s) for s in strides)
    return view[index + tuple(slice(None, None, d) for d in dilation)]


# --------------------------------------------------------------------------------------------
# Convolutions.

def conv_ncx(x, w, strides, pads, dilation, groups: int) -> np.ndarray:
    """Grouped N-d convolution of NC<spatial> data with OI<spatial> weights."""
    nd = x.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + list(zip(*pads)))
    win = _windows(x, w.shape[2:], strides, dilation)
    n, c, out = win.shape[0], win.shape[1], win.shape[2:2 + nd]
    win = win.reshape(n, groups, c // groups, *out, *w.shape[2:])
    wg = w.reshape(groups, w.shape[0] // groups, *w.shape[1:])
    sp, ks = "xyz"[:nd], "ijk"[:nd]
    res = np.einsum(f"ngc{sp}{ks},gmc{ks}->ngm{sp}", accum(win), accum(wg), optimize=True)
    return res.reshape(n, w.shape[0], *out)


def _conv(nd: int):
    def apply(args, attrs):
        sp = SPATIAL[nd]
        data_layout = attrs["data_layout"]
        x = to_layout(args[0], data_layout, "NC" + sp)
        w = to_layout(args[1], attrs["kernel_layout"], "OI" + sp)
        out = conv_ncx(x, w, per_dim(attrs["strides"], nd),
                       _pads(attrs["padding"], nd),
                       per_dim(attrs["dilation"], nd), int(attrs["groups"]))
        return to_layout(out, "NC" + sp, attrs["out_layout"] or data_layout)
    return apply


def _conv_transpose(nd: int):
    def apply(args, attrs):
        sp = SPATIAL[nd]
        data_layout = attrs["data_layout"]
        x = to_layout(args[0], data_layout, "NC" + sp)
        w = to_layout(args[1], attrs["kernel_layout"], "IO" + sp)
        out = _deconv(x, w, attrs, nd)
        return to_layout(out, "NC" + sp, attrs["out_layout"] or data_layout)
    return apply


def _deconv(x, w, attrs, nd: int) -> np.ndarray:
    """Transposed conv = stride-dilated input, flipped kernel, stride-1 convolution."""
    strides = per_dim(attrs["strides"], nd)
    dilation = per_dim(attrs["dilation"], nd)
    before, after = _pads(attrs["padding"], nd)
    extra = per_dim(attrs["output_padding"], nd)
    groups = int(attrs["groups"])
    up = np.zeros(x.shape[:2] + tuple((n - 1) * s + 1 for n, s in zip(x.shape[2:], strides)),
                  x.dtype)
    up[(slice(None),) * 2 + tuple(slice(None, None, s) for s in strides)] = x
    kernel = w.shape[2:]
    full = [d * (k - 1) for k, d in zip(kernel, dilation)]
    pads = ([f - b for f, b in zip(full, before)],
            [f - a + e for f, a, e in zip(full, after, extra)])
    cin, cout_g = w.shape[:2]
    wg = w.reshape(groups, cin // groups, cout_g, *kernel).swapaxes(1, 2)
    wg = np.flip(wg.reshape(groups * cout_g, cin // groups, *kernel), tuple(range(2, 2 + nd)))
    up, pads = _crop_negative(up, pads)
    return conv_ncx(up, wg, (1,) * nd, pads, dilation, groups)


def _crop_negative(x, pads):
    """Negative padding crops instead."""
    index = [slice(None)] * 2
    for b, a, n in zip(*pads, x.shape[2:]):
        index.append(slice(max(-b, 0), n - max(-a, 0)))
    return x[tuple(index)], ([max(b, 0) for b in pads[0]], [max(a, 0) for a in pads[1]])


# --------------------------------------------------------------------------------------------
# Pooling.

def _pool_geometry(shape, attrs, nd: int):
    kernel = per_dim(attrs["pool_size"], nd)
    strides = per_dim(attrs["strides"], nd)
    dilation = per_dim(attrs["dilation"], nd)
    before, after = _pads(attrs["padding"], nd)
    ceil = bool(attrs["ceil_mode"])
    extra = []
    for n, k, s, d, b, a in zip(shape, kernel, strides, dilation, before, after):
        span = n + b + a - ((k - 1) * d + 1)
        out = (span + (s - 1 if ceil else 0)) // s + 1
        extra.append(max((out - 1) * s - span, 0))
    return kernel, strides, dilation, before, after, extra


def _pool(nd: int, kind: str):
    def apply(args, attrs):
        sp = SPATIAL[nd]
        layout = attrs["layout"]
        x = to_layout(args[0], layout, "NC" + sp)
        out = (_max_pool if kind == "max" else _avg_pool)(x, attrs, nd)
        return to_layout(out, "NC" + sp, attrs["out_layout"] or layout)
    return apply


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _max_pool(x, attrs, nd: int):
    kernel, strides, dilation, before, after, extra = _pool_geometry(x.shape[2:], attrs, nd)
    pad = [(0, 0)] * 2 + [(b, a + e) for b, a, e in zip(before, after, extra)]
    x = np.pad(x, pad, constant_values=_lowest(x.dtype))
    win = _windows(x, kernel, strides, dilation)
    return win.max(axis=tuple(range(-nd, 0)))


def _avg_pool(x, attrs, nd: int):
    kernel, strides, dilation, before, after, extra = _pool_geometry(x.shape[2:], attrs, nd)
    explicit = [(0, 0)] * 2 + list(zip(before, after))
    ceil_pad = [(0, 0)] * 2 + [(0, e) for e in extra]
    ones = np.ones((1, 1) + x.shape[2:])
    if attrs["count_include_pad"]:
        ones = np.pad(ones, explicit, constant_values=1)
    else:
        ones = np.pad(ones, explicit)
    x = np.pad(np.pad(accum(x), explicit), ceil_pad)
    axes = tuple(range(-nd, 0))
    total = _windows(x, kernel, strides, dilation).sum(axis=axes)
    count = _windows(np.pad(ones, ceil_pad), kernel, strides, dilation).sum(axis=axes)
    return total / np.maximum(count, 1)


def _adaptive_avg_pool(nd: int):
    def apply(args, attrs):
        sp = SPATIAL[nd]
        layout = attrs["layout"]
        x = accum(to_layout(args[0], layout, "NC" + sp))
        sizes = attrs["output_size"]
        sizes = x.shape[2:] if sizes is None else per_dim(sizes, nd)
        for axis, size in enumerate(sizes, start=2):
            x = _adaptive_axis(x, axis, int(size))
        return to_layout(x, "NC" + sp, attrs["out_layout"] or layout)
    return apply


def _adaptive_axis(x, axis: int, size: int) -> np.ndarray:
    """Average pooling is separable: pool one axis at a time over PyTorch's bins."""
    n = x.shape[axis]
    bins = [(i * n // size, -(-(i + 1) * n // size)) for i in range(size)]
    parts = [np.take(x, range(a, b), axis=axis).mean(axis=axis, keepdims=True)
             for a, b in bins]
    return np.concatenate(parts, axis=axis)


# --------------------------------------------------------------------------------------------
# Normalization and activations.

def _along(v, axis: int, ndim: int) -> np.ndarray:
    """A 1-D per-channel vector shaped to broadcast along ``axis``."""
    shape = [1] * ndim
    shape[axis % ndim] = -1
    return np.reshape(v, shape)


def _over(v, axes, ndim: int) -> np.ndarray:
    """A vector shaped like the ``axes`` dims of the data, broadcast over the others."""
    axes = [a % ndim for a in axes]
    shape = [1] * ndim
    for a, d in zip(sorted(axes), np.shape(v)):
        shape[a] = d
    return np.reshape(v, shape)


def _standardize(x, axes, eps: float):
    x = accum(x)
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


def _affine(y, gamma, beta, attrs, shape_of):
    if attrs["scale"]:
        y = y * shape_of(gamma)
    if attrs["center"]:
        y = y + shape_of(beta)
    return y


def _layer_norm(args, attrs):
    x, gamma, beta = args[:3]
    axes = tuple(a % x.ndim for a in _ints(attrs["axes"]))
    y = _standardize(x, axes, float(attrs["epsilon"]))
    return _affine(y, gamma, beta, attrs, lambda v: _over(v, axes, x.ndim))


def _group_norm(args, attrs):
    x, gamma, beta = args[:3]
    groups, channel = int(attrs["num_groups"]), int(attrs["channel_axis"]) % x.ndim
    shape = list(x.shape)
    grouped = shape[:channel] + [groups, shape[channel] // groups] + shape[channel + 1:]
    axes = [channel + 1] + [a % x.ndim + (a % x.ndim > channel) for a in _ints(attrs["axes"])]
    y = _standardize(x.reshape(grouped), tuple(axes), float(attrs["epsilon"]))
    y = y.reshape(shape)
    return _affine(y, gamma, beta, attrs, lambda v: _along(v, channel, x.ndim))


def _instance_norm(args, attrs):
    x, gamma, beta = args[:3]
    axes = tuple(a % x.ndim for a in _ints(attrs["axes"]))
    y = _standardize(x, axes, float(attrs["epsilon"]))
    return _affine(y, gamma, beta, attrs, lambda v: _along(v, attrs["channel_axis"], x.ndim))


def _rms_norm(args, attrs):
    x, weight = accum(args[0]), args[1]
    axes = tuple(a % x.ndim for a in _ints(attrs["axes"]))
    rms = np.sqrt((x * x).mean(axis=axes, keepdims=True) + float(attrs["epsilon"]))
    return x / rms * _over(weight, axes, x.ndim)


def _batch_norm(args, attrs):
    """Returns (out, mean, var); in training mode the batch statistics normalize and the
    moving ones are updated with ``momentum`` (TVM: biased batch variance)."""
    x, gamma, beta, moving_mean, moving_var = (accum(np.asarray(a)) for a in args[:5])
    axis, eps = int(attrs["axis"]) % x.ndim, float(attrs["epsilon"])
    if attrs["training"]:
        reduce = tuple(i for i in range(x.ndim) if i != axis)
        mean, var = x.mean(axis=reduce), x.var(axis=reduce)
        m = float(attrs["momentum"])
        moving_mean, moving_var = (1 - m) * moving_mean + m * mean, (1 - m) * moving_var + m * var
    else:
        mean, var = moving_mean, moving_var
    y = (x - _along(mean, axis, x.ndim)) / np.sqrt(_along(var, axis, x.ndim) + eps)
    y = _affine(y, gamma, beta, attrs, lambda v: _along(v, axis, x.ndim))
    return y, moving_mean, moving_var


def _softmax(args, attrs):
    x, axis = accum(args[0]), int(attrs["axis"])
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(args, attrs):
    x, axis = accum(args[0]), int(attrs["axis"])
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _softplus(args, attrs):
    x = accum(args[0])
    beta, threshold = float(attrs["beta"]), float(attrs["threshold"])
    return np.where(x * beta > threshold, x, np.logaddexp(0, beta * x) / beta)


def _selu(x):
    alpha, scale = 1.6732632423543772, 1.0507009873554805
    return scale * np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _act(fn):
    return lambda args, attrs: fn(accum(args[0]))


ACTIVATIONS = {
    "nn.relu": lambda x: np.maximum(x, 0), "nn.relu6": lambda x: np.clip(x, 0, 6),
    "nn.gelu": lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2))), "nn.gelu_tanh": _gelu_tanh,
    "nn.silu": lambda x: x / (1 + np.exp(-x)), "nn.selu": _selu,
}


def _prelu(args, attrs):
    x, alpha = accum(args[0]), accum(args[1])
    return np.where(x > 0, x, x * _along(alpha, int(attrs["axis"]), x.ndim))


_PAD_MODES = {"constant": "constant", "edge": "edge", "replicate": "edge",
              "reflect": "reflect", "circular": "wrap"}


def _pad(args, attrs):
    x, widths = args[0], _ints(attrs["pad_width"])
    mode = _PAD_MODES[attrs["pad_mode"] or "constant"]
    pairs = list(zip(widths[0::2], widths[1::2]))
    if mode != "constant":
        return np.pad(x, pairs, mode=mode)
    return np.pad(x, pairs, constant_values=np.asarray(attrs["pad_value"]).astype(x.dtype))


def _pixel_shuffle(args, attrs):
    x, r = args[0], int(attrs["upscale_factor"])
    *lead, c, h, w = x.shape
    k, c = len(lead), c // (r * r)
    y = x.reshape(*lead, c, r, r, h, w).transpose(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return y.reshape(*lead, c, h * r, w * r)


def _attention(args, attrs):
    """q, k, v are (batch, seq, heads, head_dim); the result has q's layout."""
    q, k, v = (accum(np.asarray(a)).swapaxes(1, 2) for a in args[:3])
    if attrs["window_size"] is not None:
        raise UnsupportedOpError("sliding-window attention has no numpy reference",
                                 op="nn.attention", hint="window_size must be None")
    scale = attrs["scale"]
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    scores = q @ k.swapaxes(-1, -2) * scale
    if len(args) > 3 and args[3] is not None:
        scores = scores + args[3]
    scores = _causal(scores, attrs["causal_mask"])
    return (_softmax([scores], {"axis": -1}) @ v).swapaxes(1, 2)


def _attention_var_len(args, attrs):
    """Sequences packed along dim 1 of [1, total, heads, dim]; seqstart_* give the bounds."""
    q, k, v, starts_q, starts_k = (np.asarray(a) for a in args[:5])
    parts = [_attention([q[:, a:b], k[:, c:d], v[:, c:d]], attrs)
             for a, b, c, d in zip(starts_q[:-1], starts_q[1:], starts_k[:-1], starts_k[1:])]
    return np.concatenate(parts, axis=1)


def _causal(scores, mode):
    if mode is None:
        return scores
    s, t = scores.shape[-2:]
    offset = {"TopLeft": 0, "BottomRight": t - s}[mode]
    keep = np.arange(t)[None, :] <= np.arange(s)[:, None] + offset
    return np.where(keep, scores, -np.inf)


def _nll_loss(args, attrs):
    pred, target = accum(np.asarray(args[0])), np.asarray(args[1]).astype(np.int64)
    classes = pred.shape[1 if pred.ndim > 1 else 0]
    weights = np.asarray(args[2]) if len(args) > 2 else np.ones(classes)
    if pred.ndim == 1:
        pred, target = pred[None], target[None]
    ignore = target == int(attrs["ignore_index"])
    safe = np.where(ignore, 0, target)
    picked = np.take_along_axis(pred, np.expand_dims(safe, 1), axis=1).squeeze(1)
    w = np.where(ignore, 0, weights[safe])
    loss = -picked * w
    reduction = attrs["reduction"]
    if reduction == "none":
        return loss.reshape(np.shape(args[1]))
    return loss.sum() / (w.sum() if reduction == "mean" else 1)


def _cross_entropy(args, attrs):
    x, y = accum(np.asarray(args[0])), np.asarray(args[1])
    return -(x * y).sum() / (x.shape[0] if x.ndim == 2 else 1)


# --------------------------------------------------------------------------------------------
# Quantization.

def _qparam(v, axis: int, ndim: int):
    return _along(v, axis, ndim) if np.ndim(v) == 1 and np.size(v) > 1 else v


def _quantize(args, attrs):
    # Divide in the input's precision (float32 for float32 models), as ONNX and TVM do:
    # float64 division moves ties and changes the rounding of x / scale.
    x, axis = np.asarray(args[0]), int(attrs["axis"])
    x = x if x.dtype == np.float64 else x.astype(np.float32)
    scale, zero = (_qparam(np.asarray(a), axis, x.ndim) for a in args[1:3])
    info = np.iinfo(attrs["out_dtype"])
    scaled = np.round(x / scale.astype(x.dtype))
    return np.clip(scaled + zero, info.min, info.max)


def _dequantize(args, attrs):
    x, axis = np.asarray(args[0]).astype(np.float64), int(attrs["axis"])
    scale, zero = (_qparam(np.asarray(a), axis, x.ndim) for a in args[1:3])
    return (x - zero) * scale


# --------------------------------------------------------------------------------------------
# Relay-era ops and msc's fused patterns (weights [out, in], conv weights OI<spatial>).

def _dense(args, attrs):
    return np.matmul(accum(args[0]), accum(args[1]).T)


def dequantize_nbits(weight, scales, zero_points, bits: int, block_size: int, k: int):
    """matmul_nbits' weight as float32 [N, K]: ``(code - zero_point) * scale`` per group,
    int4 codes two per byte (element 2j in the low nibble), padding past K dropped."""
    weight = np.asarray(weight, np.uint8)
    n, groups = weight.shape[:2]
    if bits == 4:
        codes = np.empty((n, groups, weight.shape[2] * 2), np.uint8)
        codes[..., 0::2], codes[..., 1::2] = weight & 0xF, weight >> 4
    else:
        codes = weight
    zeros = np.asarray(zero_points, np.float32)[..., None]
    value = (codes.astype(np.float32) - zeros) * np.asarray(scales, np.float32)[..., None]
    return np.ascontiguousarray(value.reshape(n, groups * block_size)[:, :k], np.float32)


def _matmul_nbits(args, attrs):
    w = dequantize_nbits(*args[1:4], attrs["bits"], attrs["block_size"], attrs["in_features"])
    return np.matmul(accum(args[0]), w.astype(np.float64).T)


def _batch_matmul(args, attrs):
    x, y = accum(args[0]), accum(args[1])
    x = x.swapaxes(-1, -2) if attrs["transpose_a"] else x
    y = y.swapaxes(-1, -2) if attrs["transpose_b"] else y
    return np.matmul(x, y)


def _bias_add(args, attrs):
    x = args[0]
    return x + _along(args[1], int(attrs["axis"]), x.ndim)


def _with_bias(fn, axis_of):
    """``fn`` plus a bias that is 1-D along the output channel axis or of the output's rank."""
    def apply(args, attrs):
        out = fn(args[:2], attrs)
        bias = np.asarray(args[2])
        return out + (_along(bias, axis_of(out, attrs), out.ndim) if bias.ndim == 1 else bias)
    return apply


def _channel_axis(out, attrs):
    return (attrs["out_layout"] or attrs["data_layout"]).index("C")


def _msc_attention(args, attrs):
    """msc.attention takes [batch, heads, seq, dim] tensors (the permutes are fused in)."""
    qkv = [np.swapaxes(a, 1, 2) for a in args[:3]]
    return _attention(qkv + list(args[3:]), attrs).swapaxes(1, 2)


MSC = {
    "nn.dense": _dense, "nn.batch_matmul": _batch_matmul, "nn.bias_add": _bias_add,
    "msc.linear": _dense, "msc.linear_bias": _with_bias(_dense, lambda out, attrs: -1),
    "msc.conv1d_bias": _with_bias(_conv(1), _channel_axis),
    "msc.conv2d_bias": _with_bias(_conv(2), _channel_axis),
    "msc.embedding": lambda args, attrs: np.take(args[1], np.asarray(args[0]), axis=0),
    "msc.attention": _msc_attention,
    "msc.gelu": lambda args, attrs: ACTIVATIONS["nn.gelu"](accum(args[0])),
    "msc.matmul": lambda args, attrs: np.matmul(accum(args[0]), accum(args[1])),
}


FACTS = {
    **{f"nn.conv{nd}d": _conv(nd) for nd in (1, 2, 3)},
    **{f"nn.conv{nd}d_transpose": _conv_transpose(nd) for nd in (1, 2, 3)},
    **{f"nn.max_pool{nd}d": _pool(nd, "max") for nd in (1, 2, 3)},
    **{f"nn.avg_pool{nd}d": _pool(nd, "avg") for nd in (1, 2, 3)},
    **{f"nn.adaptive_avg_pool{nd}d": _adaptive_avg_pool(nd) for nd in (1, 2, 3)},
    **{name: _act(fn) for name, fn in ACTIVATIONS.items()},
    "nn.leakyrelu": lambda a, t: np.where(a[0] > 0, a[0], a[0] * float(t["alpha"])),
    "nn.softplus": _softplus, "nn.prelu": _prelu, "nn.softmax": _softmax,
    "nn.log_softmax": _log_softmax, "nn.layer_norm": _layer_norm,
    "nn.group_norm": _group_norm, "nn.instance_norm": _instance_norm, "nn.rms_norm": _rms_norm,
    "nn.batch_norm": _batch_norm, "nn.pad": _pad, "nn.pixel_shuffle": _pixel_shuffle,
    "nn.attention": _attention, "nn.attention_bias": _attention, "nn.nll_loss": _nll_loss,
    "nn.attention_var_len": _attention_var_len,
    "nn.cross_entropy_with_logits": _cross_entropy,
    "nn.batch_flatten": lambda a, t: np.reshape(a[0], (np.shape(a[0])[0], -1)),
    "quantize": _quantize, "dequantize": _dequantize, "matmul_nbits": _matmul_nbits, **MSC,
}
