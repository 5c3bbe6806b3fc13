"""Neural-network converters: convolution, linear, normalization, pooling, attention, losses.

Each converter has the signature of its ``torch.nn.functional`` function; module calls reach
the same converters with the module's tensors and settings as keyword arguments (see
``convert_modules``)::

    conv2d(ctx, x, weight, bias, stride=1, padding=0, dilation=1, groups=1)
    # -> R.nn.conv2d(x, weight, ...) ; R.reshape(bias, (1, -1, 1, 1)) ; R.add(...)
"""

from __future__ import annotations

import math

import numpy as np

from msc import relax

from .common import dtype_of, is_tensor, ndim_of, shape_of, unsupported
from .convert_elementwise import emit_op
from .convert_tensor import dims_of

__all__ = ["FUNCTIONS"]

_LAYOUTS = {1: ("NCW", "OIW", "IOW"), 2: ("NCHW", "OIHW", "IOHW"),
            3: ("NCDHW", "OIDHW", "IODHW")}


def _tuple(value, d: int) -> tuple:
    if isinstance(value, relax.ShapeExpr):
        return tuple(dims_of(value))
    return tuple(value) if isinstance(value, (list, tuple)) else (value,) * d


def _add_channel_bias(ctx, out, bias):
    """``out + bias`` with the bias reshaped to ``(1, C, 1, ...)`` (torch's channel axis 1)."""
    if bias is None:
        return out
    bias = relax.op.reshape(bias, (1, -1) + (1,) * (ndim_of(out) - 2))
    return ctx.emit(relax.op.add(out, bias))


# --------------------------------------------------------------------------------------------
# Convolution.

def _same_padding(weight, dilation, d: int) -> tuple:
    kernel = shape_of(weight)[2:]
    total = [dil * (k - 1) for dil, k in zip(_tuple(dilation, d), kernel)]
    return tuple(t // 2 for t in total) + tuple(t - t // 2 for t in total)


def _conv_padding(ctx, x, weight, padding, dilation, padding_mode: str, d: int):
    """Relax padding for torch's ``padding`` (ints, 'same' or 'valid'); non-zero padding
    modes pad explicitly first."""
    if padding == "valid":
        padding = 0
    pads = _same_padding(weight, dilation, d) if padding == "same" else _tuple(padding, d)
    if padding_mode == "zeros":
        return x, pads
    begin, end = (pads[:d], pads[d:]) if len(pads) == 2 * d else (pads, pads)
    widths = [0, 0, 0, 0] + [w for pair in zip(begin, end) for w in pair]
    return emit_op(ctx, "nn.pad", x, widths, pad_mode=padding_mode), 0


def _conv(d: int):
    data_layout, kernel_layout, _ = _LAYOUTS[d]

    def convert(ctx, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1,
                padding_mode="zeros"):
        x, pads = _conv_padding(ctx, input, weight, padding, dilation, padding_mode, d)
        out = emit_op(ctx, f"nn.conv{d}d", x, weight, strides=stride, padding=pads,
                      dilation=dilation, groups=groups, data_layout=data_layout,
                      kernel_layout=kernel_layout, out_dtype=dtype_of(input))
        return _add_channel_bias(ctx, out, bias)

    convert.__name__ = f"conv{d}d"
    return convert


def _conv_transpose(d: int):
    data_layout, _, kernel_layout = _LAYOUTS[d]

    def convert(ctx, input, weight, bias=None, stride=1, padding=0, output_padding=0,
                groups=1, dilation=1):
        out = emit_op(ctx, f"nn.conv{d}d_transpose", input, weight, strides=stride,
                      padding=padding, output_padding=output_padding, dilation=dilation,
                      groups=groups, data_layout=data_layout, kernel_layout=kernel_layout,
                      out_dtype=dtype_of(input))
        return _add_channel_bias(ctx, out, bias)

    convert.__name__ = f"conv_transpose{d}d"
    return convert


def convolution(ctx, input, weight, bias, stride, padding, dilation, transposed,
                output_padding, groups):
    """``aten.convolution``: the transposed flag picks the converter."""
    d = ndim_of(input) - 2
    if transposed:
        return _conv_transpose(d)(ctx, input, weight, bias, stride, padding, output_padding,
                                  groups, dilation)
    return _conv(d)(ctx, input, weight, bias, stride, padding, dilation, groups)


# --------------------------------------------------------------------------------------------
# Linear algebra.

def linear(ctx, input, weight, bias=None):
    """``x @ weight.T + bias`` as permute_dims + matmul + add (MSC fuses it to msc.linear)."""
    out = ctx.emit(relax.op.matmul(input, relax.op.permute_dims(weight),
                                   out_dtype=dtype_of(input)))
    return out if bias is None else ctx.emit(relax.op.add(out, bias))


def matmul(ctx, input, other):
    return ctx.emit(relax.op.matmul(input, other, out_dtype=dtype_of(input)))


def _scaled_add(ctx, product, addend, alpha, beta):
    """``beta * addend + alpha * product`` (torch's addmm/baddbmm), skipping unit factors."""
    if alpha != 1:
        product = ctx.emit(relax.op.multiply(product, relax.const(alpha, dtype_of(product))))
    if beta == 0:
        return product
    if beta != 1:
        addend = ctx.emit(relax.op.multiply(addend, relax.const(beta, dtype_of(addend))))
    return ctx.emit(relax.op.add(addend, product))


def addmm(ctx, input, mat1, mat2, *, beta=1, alpha=1):
    return _scaled_add(ctx, matmul(ctx, mat1, mat2), input, alpha, beta)


def baddbmm(ctx, input, batch1, batch2, *, beta=1, alpha=1):
    return _scaled_add(ctx, matmul(ctx, batch1, batch2), input, alpha, beta)


def einsum(ctx, equation, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = operands[0]
    return ctx.emit(relax.op.einsum(list(operands), equation))


def outer(ctx, input, vec2):
    return emit_op(ctx, "outer", input, vec2)


def embedding(ctx, input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """take(weight, astype(indices, int32)); rank > 1 indices are flattened and restored."""
    if max_norm is not None:
        raise unsupported("embedding with max_norm (it renormalizes the weight in place)")
    indices = ctx.emit(relax.op.astype(input, "int32"))
    if ndim_of(indices) == 1:
        return ctx.emit(relax.op.take(weight, indices, axis=0))
    dims = shape_of(indices) + shape_of(weight)[-1:]
    flat = ctx.emit(relax.op.reshape(indices, [-1]))
    return ctx.emit(relax.op.reshape(ctx.emit(relax.op.take(weight, flat, axis=0)), dims))


def aten_embedding(ctx, weight, indices, padding_idx=-1, scale_grad_by_freq=False,
                   sparse=False):
    return embedding(ctx, indices, weight)


# --------------------------------------------------------------------------------------------
# Normalization.

def _ones(ctx, like, dims) -> relax.Constant:
    return relax.const(np.ones([int(d) for d in dims], dtype_of(like)))


def _zeros(ctx, like, dims) -> relax.Constant:
    return relax.const(np.zeros([int(d) for d in dims], dtype_of(like)))


def batch_norm(ctx, input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """nn.batch_norm + get_item 0. Eval mode uses the running statistics (training=False)."""
    channels = shape_of(input)[1:2]
    weight = _ones(ctx, input, channels) if weight is None else weight
    bias = _zeros(ctx, input, channels) if bias is None else bias
    if running_mean is None:
        training = True
        running_mean, running_var = _zeros(ctx, input, channels), _ones(ctx, input, channels)
    out = ctx.emit(relax.op.nn.batch_norm(input, weight, bias, running_mean, running_var,
                                          axis=1, epsilon=eps, momentum=momentum or 0.1,
                                          training=bool(training)))
    return ctx.emit(relax.TupleGetItem(out, 0))


def native_batch_norm_no_training(ctx, input, weight, bias, running_mean, running_var,
                                  momentum, eps):
    """``aten._native_batch_norm_legit_no_training``: (out, save_mean, save_invstd)."""
    out = batch_norm(ctx, input, running_mean, running_var, weight, bias, False, momentum, eps)
    return (out, None, None)


def aten_batch_norm(ctx, input, weight, bias, running_mean, running_var, training, momentum,
                    eps, cudnn_enabled=True):
    return batch_norm(ctx, input, running_mean, running_var, weight, bias, training, momentum,
                      eps)


def layer_norm(ctx, input, normalized_shape, weight=None, bias=None, eps=1e-5,
               cudnn_enable=True):
    dims = _tuple(normalized_shape, 1)
    weight = _ones(ctx, input, dims) if weight is None else weight
    bias = _zeros(ctx, input, dims) if bias is None else bias
    axes = list(range(-len(dims), 0))
    return ctx.emit(relax.op.nn.layer_norm(input, weight, bias, axes=axes, epsilon=eps))


def native_layer_norm(ctx, input, normalized_shape, weight, bias, eps):
    return (layer_norm(ctx, input, normalized_shape, weight, bias, eps), None, None)


def group_norm(ctx, input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    channels = shape_of(input)[1:2]
    weight = _ones(ctx, input, channels) if weight is None else weight
    bias = _zeros(ctx, input, channels) if bias is None else bias
    return ctx.emit(relax.op.nn.group_norm(input, weight, bias, num_groups=num_groups,
                                           channel_axis=1,
                                           axes=list(range(2, ndim_of(input))), epsilon=eps))


def instance_norm(ctx, input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5, cudnn_enabled=False):
    if not use_input_stats:
        return batch_norm(ctx, input, running_mean, running_var, weight, bias, False,
                          momentum, eps)
    channels = shape_of(input)[1:2]
    weight = _ones(ctx, input, channels) if weight is None else weight
    bias = _zeros(ctx, input, channels) if bias is None else bias
    return ctx.emit(relax.op.nn.instance_norm(input, weight, bias, channel_axis=1,
                                              axes=list(range(2, ndim_of(input))),
                                              epsilon=eps))


def rms_norm(ctx, input, normalized_shape, weight=None, eps=None):
    dims = _tuple(normalized_shape, 1)
    weight = _ones(ctx, input, dims) if weight is None else weight
    if eps is None:
        eps = float(np.finfo(dtype_of(input)).eps)
    axes = list(range(-len(dims), 0))
    return ctx.emit(relax.op.nn.rms_norm(input, weight, axes=axes, epsilon=eps))


# --------------------------------------------------------------------------------------------
# Pooling. Unbatched inputs get a batch axis for the op and lose it after.

def _batched(ctx, x, d: int, emit):
    if ndim_of(x) == d + 2:
        return emit(x)
    out = emit(relax.op.expand_dims(x, axis=0))
    return ctx.emit(relax.op.squeeze(out, axis=[0]))


def _max_pool(d: int):
    layout = _LAYOUTS[d][0]

    def convert(ctx, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                return_indices=False):
        if return_indices:
            raise unsupported("max_pool with return_indices=True")
        strides = kernel_size if stride in (None, [], ()) else stride
        return _batched(ctx, input, d, lambda x: emit_op(
            ctx, f"nn.max_pool{d}d", x, pool_size=kernel_size, strides=strides,
            padding=padding, dilation=dilation, ceil_mode=ceil_mode, layout=layout))

    convert.__name__ = f"max_pool{d}d"
    return convert


def _avg_pool(d: int):
    layout = _LAYOUTS[d][0]

    def convert(ctx, input, kernel_size, stride=None, padding=0, ceil_mode=False,
                count_include_pad=True, divisor_override=None):
        if divisor_override is not None:
            raise unsupported("avg_pool with divisor_override")
        strides = kernel_size if stride in (None, [], ()) else stride
        return _batched(ctx, input, d, lambda x: emit_op(
            ctx, f"nn.avg_pool{d}d", x, pool_size=kernel_size, strides=strides,
            padding=padding, ceil_mode=ceil_mode, count_include_pad=count_include_pad,
            layout=layout))

    convert.__name__ = f"avg_pool{d}d"
    return convert


def _adaptive_avg_pool(d: int):
    layout = _LAYOUTS[d][0]

    def convert(ctx, input, output_size):
        spatial = shape_of(input)[-d:]  # None in output_size keeps that input size
        sizes = [s if o is None else o for s, o in zip(spatial, _tuple(output_size, d))]
        return _batched(ctx, input, d, lambda x: emit_op(
            ctx, f"nn.adaptive_avg_pool{d}d", x, sizes, layout=layout))

    convert.__name__ = f"adaptive_avg_pool{d}d"
    return convert


def _adaptive_max_pool(d: int):
    """Relax has no adaptive max pool: an output size dividing the input is a max pool with
    kernel = stride = input // output."""
    def convert(ctx, input, output_size, return_indices=False):
        spatial = shape_of(input)[-d:]
        sizes = [s if o is None else o for s, o in zip(spatial, _tuple(output_size, d))]
        if not all(isinstance(s, int) and s % o == 0 for s, o in zip(spatial, sizes)):
            raise unsupported(f"adaptive_max_pool{d}d from {spatial} to {sizes}: only output "
                              "sizes that divide static input sizes convert")
        kernel = [s // o for s, o in zip(spatial, sizes)]
        return _max_pool(d)(ctx, input, kernel, kernel, 0, 1, False, return_indices)

    convert.__name__ = f"adaptive_max_pool{d}d"
    return convert


# --------------------------------------------------------------------------------------------
# Resampling, padding, pixel shuffle.

_RESIZE_METHODS = {"nearest": "nearest_neighbor", "nearest-exact": "nearest_neighbor",
                   "linear": "linear", "bilinear": "linear", "trilinear": "linear",
                   "bicubic": "cubic"}


def _resize_attrs(mode: str, align_corners) -> dict:
    """torch's coordinate mapping: nearest floors src = dst * in / out; nearest-exact
    rounds (dst + 0.5) * in / out - 0.5 up at halves; the others map pixel centres."""
    if mode == "nearest":
        return {"coordinate_transformation_mode": "asymmetric", "rounding_method": "floor"}
    if mode == "nearest-exact":
        return {"coordinate_transformation_mode": "half_pixel",
                "rounding_method": "round_prefer_ceil"}
    return {"coordinate_transformation_mode": "align_corners" if align_corners
            else "half_pixel"}


def _output_size(x, size, scale_factor, d: int, recompute=None) -> list:
    if size is not None:
        return list(_tuple(size, d))
    spatial = shape_of(x)[-d:]
    scales = _tuple(scale_factor, d)
    if not recompute and any(not float(f).is_integer() and not (
            isinstance(s, int) and float(s * f).is_integer()) for s, f in zip(spatial, scales)):
        # torch maps output pixels back with 1 / scale_factor, not input / output size
        raise unsupported(f"interpolate with scale_factor={scale_factor} on sizes {spatial}: "
                          "the output sizes are not whole, and torch then samples at 1 / scale, "
                          "which image.resize cannot express; pass size=... or "
                          "recompute_scale_factor=True")
    return [s * int(f) if float(f).is_integer() else math.floor(s * f)
            for s, f in zip(spatial, scales)]


def interpolate(ctx, input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    if mode not in _RESIZE_METHODS or antialias:
        raise unsupported(f"interpolate mode={mode!r} antialias={antialias}")
    d = ndim_of(input) - 2
    out_size = _output_size(input, size, scale_factor, d, recompute_scale_factor)
    attrs = dict(method=_RESIZE_METHODS[mode], **_resize_attrs(mode, align_corners))
    if d == 3:
        return emit_op(ctx, "image.resize3d", input, out_size, layout="NCDHW", **attrs)
    if d == 2:
        return emit_op(ctx, "image.resize2d", input, out_size, layout="NCHW", **attrs)
    x = ctx.emit(relax.op.expand_dims(input, axis=2))
    out = emit_op(ctx, "image.resize2d", x, [1] + out_size, layout="NCHW", **attrs)
    return ctx.emit(relax.op.squeeze(out, axis=[2]))


def upsample_nearest(ctx, input, output_size=None, scale_factors=None, *scales):
    """``aten.upsample_nearest*d.vec`` (and the per-dim-scale overloads)."""
    return interpolate(ctx, input, output_size, scale_factors, "nearest")


def upsample_nearest_exact(ctx, input, output_size=None, scale_factors=None, *scales):
    """``aten._upsample_nearest_exact*d.vec``: interpolate(mode="nearest-exact")."""
    return interpolate(ctx, input, output_size, scale_factors, "nearest-exact")


def upsample_linear(mode: str):
    def convert(ctx, input, output_size=None, align_corners=False, scale_factors=None,
                *scales):
        return interpolate(ctx, input, output_size, scale_factors, mode, align_corners)

    return convert


def pad(ctx, input, pad, mode="constant", value=None):
    """torch pads the last dims first, in (begin, end) pairs; Relax lists every dim."""
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise unsupported(f"pad mode {mode!r}")
    pairs = [list(pad[i:i + 2]) for i in range(0, len(pad), 2)][::-1]
    widths = [0] * (2 * (ndim_of(input) - len(pairs))) + [w for p in pairs for w in p]
    return ctx.emit(relax.op.nn.pad(input, widths, mode, 0.0 if value is None else value))


def constant_pad_nd(ctx, input, pad_, value=0):
    return pad(ctx, input, pad_, "constant", value)


def pixel_shuffle(ctx, input, upscale_factor):
    return emit_op(ctx, "nn.pixel_shuffle", input, upscale_factor)


# --------------------------------------------------------------------------------------------
# Attention.

def _attention_bias(ctx, mask, like):
    """torch's attn_mask as an additive float bias of rank 4: a bool mask keeps True."""
    if dtype_of(mask) == "bool":
        dtype = dtype_of(like)
        mask = ctx.emit(relax.op.where(mask, relax.const(0.0, dtype),
                                       relax.const(-math.inf, dtype)))
    if ndim_of(mask) < 4:
        mask = ctx.emit(relax.op.reshape(mask, [1] * (4 - ndim_of(mask)) + shape_of(mask)))
    return mask


def scaled_dot_product_attention(ctx, query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """torch's [batch, heads, seq, dim] tensors permuted to Relax's [batch, seq, heads, dim]
    around nn.attention (MSC fuses the pattern into msc.attention)."""
    if ndim_of(query) != 4:
        raise unsupported(f"scaled_dot_product_attention on rank {ndim_of(query)} inputs",
                          hint="batch the inputs as [batch, heads, seq, dim]")
    q, k, v = (ctx.emit(relax.op.permute_dims(t, [0, 2, 1, 3])) for t in (query, key, value))
    bias = None if attn_mask is None else _attention_bias(ctx, attn_mask, query)
    out = ctx.emit(relax.op.nn.attention(q, k, v, bias, scale,
                                         "TopLeft" if is_causal else None))
    return ctx.emit(relax.op.permute_dims(out, [0, 2, 1, 3]))


# --------------------------------------------------------------------------------------------
# Losses.

_REDUCTIONS = ("mean", "sum", "none")


def nll_loss(ctx, input, target, weight=None, size_average=None, ignore_index=-100,
             reduce=None, reduction="mean"):
    if reduction not in _REDUCTIONS or size_average is not None or reduce is not None:
        raise unsupported("nll_loss with the legacy size_average/reduce arguments",
                          hint="use reduction='mean'|'sum'|'none'")
    return ctx.emit(relax.op.nn.nll_loss(input, target, weight, reduction, ignore_index))


def cross_entropy(ctx, input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    if label_smoothing or not is_tensor(target) or dtype_of(target).startswith("float"):
        raise unsupported("cross_entropy with label smoothing or probability targets")
    log_probs = relax.op.nn.log_softmax(input, -1 if ndim_of(input) <= 2 else 1)
    return nll_loss(ctx, log_probs, target, weight, size_average, ignore_index, reduce,
                    reduction)


# ATen's reduction enum.
_ATEN_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def aten_nll_loss(ctx, input, target, weight=None, reduction=1, ignore_index=-100):
    return nll_loss(ctx, input, target, weight, reduction=_ATEN_REDUCTIONS[reduction],
                    ignore_index=ignore_index)


def aten_cross_entropy(ctx, input, target, weight=None, reduction=1, ignore_index=-100,
                       label_smoothing=0.0):
    return cross_entropy(ctx, input, target, weight, ignore_index=ignore_index,
                         reduction=_ATEN_REDUCTIONS[reduction], label_smoothing=label_smoothing)


def _with_indices(convert):
    """ATen's pooling-with-indices ops return (values, indices); only values convert."""
    def aten(ctx, *args, **kwargs):
        return (convert(ctx, *args, **kwargs), None)

    return aten


def normalize(ctx, input, p=2.0, dim=1, eps=1e-12, out=None):
    """x / max(||x||_p over dim, eps)."""
    dtype = dtype_of(input)
    if p == 2:
        norm = relax.op.sqrt(relax.op.sum(relax.op.multiply(input, input), [dim], keepdims=True))
    else:
        powered = relax.op.power(relax.op.abs(input), relax.const(p, dtype))
        norm = relax.op.power(relax.op.sum(powered, [dim], keepdims=True),
                              relax.const(1.0 / p, dtype))
    norm = ctx.emit(relax.op.maximum(norm, relax.const(eps, dtype)))
    return ctx.emit(relax.op.divide(input, norm))


def weight_norm(ctx, v, g, dim=0):
    """``torch._weight_norm``: v * g / ||v||, the norm over every axis but ``dim`` (-1: all)."""
    rank = ndim_of(v)
    axes = list(range(rank)) if dim == -1 else [a for a in range(rank) if a != dim % rank]
    norm = relax.op.sqrt(relax.op.sum(relax.op.multiply(v, v), axes, keepdims=True))
    return ctx.emit(relax.op.multiply(v, relax.op.divide(g, norm)))


FUNCTIONS = {
    "_weight_norm": weight_norm,
    **{f"conv{d}d": _conv(d) for d in (1, 2, 3)},
    **{f"conv_transpose{d}d": _conv_transpose(d) for d in (1, 2, 3)},
    **{f"max_pool{d}d": _max_pool(d) for d in (1, 2, 3)},
    **{f"avg_pool{d}d": _avg_pool(d) for d in (1, 2, 3)},
    **{f"adaptive_avg_pool{d}d": _adaptive_avg_pool(d) for d in (1, 2, 3)},
    **{f"adaptive_max_pool{d}d": _adaptive_max_pool(d) for d in (1, 2, 3)},
    "linear": linear, "matmul": matmul, "bmm": matmul, "mm": matmul, "addmm": addmm,
    "baddbmm": baddbmm, "einsum": einsum, "outer": outer, "embedding": embedding,
    "batch_norm": batch_norm, "layer_norm": layer_norm, "group_norm": group_norm,
    "instance_norm": instance_norm, "normalize": normalize, "rms_norm": rms_norm,
    "interpolate": interpolate,
    "upsample": interpolate, "pad": pad, "pixel_shuffle": pixel_shuffle,
    "scaled_dot_product_attention": scaled_dot_product_attention, "nll_loss": nll_loss,
    "cross_entropy": cross_entropy,
}

def aten_instance_norm(ctx, input, weight, bias, running_mean, running_var, use_input_stats,
                       momentum, eps, cudnn_enabled=False):
    """``aten.instance_norm`` takes weight and bias before the running statistics."""
    return instance_norm(ctx, input, running_mean, running_var, weight, bias, use_input_stats,
                         momentum, eps)


# ATen overloads whose signatures differ from the functional forms.
ATEN = {
    "instance_norm": aten_instance_norm,
    "convolution": convolution, "conv_transpose1d": _conv_transpose(1),
    "embedding": aten_embedding, "batch_norm": aten_batch_norm,
    "_native_batch_norm_legit_no_training": native_batch_norm_no_training,
    "native_layer_norm": native_layer_norm, "constant_pad_nd": constant_pad_nd,
    "upsample_nearest1d": upsample_nearest, "upsample_nearest2d": upsample_nearest,
    **{f"_upsample_nearest_exact{d}d": upsample_nearest_exact for d in (1, 2, 3)},
    "upsample_nearest3d": upsample_nearest, "upsample_bilinear2d": upsample_linear("bilinear"),
    "upsample_linear1d": upsample_linear("linear"),
    "upsample_trilinear3d": upsample_linear("trilinear"),
    "upsample_bicubic2d": upsample_linear("bicubic"), "nll_loss": aten_nll_loss,
    "nll_loss_nd": aten_nll_loss, "nll_loss_forward": _with_indices(aten_nll_loss),
    "cross_entropy_loss": aten_cross_entropy,
    **{f"adaptive_max_pool{d}d": _with_indices(_adaptive_max_pool(d)) for d in (1, 2, 3)},
    **{f"max_pool{d}d_with_indices": _with_indices(_max_pool(d)) for d in (1, 2, 3)},
}
