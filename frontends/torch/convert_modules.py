"""``nn.Module`` calls: each module type is a row ``type: (converter, settings)``.

``settings(ctx, module)`` gives the keyword arguments the module passes to its functional
form (its tensors through ``ctx.param``, so constants are named by their state_dict keys); the
forward arguments bind positionally as usual::

    MODULES[nn.Conv2d]  # (conv2d, params("weight", "bias") + attrs("stride", ...))
    # self.conv(x) -> conv2d(ctx, x, weight=<conv.weight>, bias=<conv.bias>, stride=...)
"""

from __future__ import annotations

from torch import nn

from msc import relax

from . import convert_elementwise as ew
from . import convert_nn as fnn
from . import convert_tensor as tensor
from .common import dtype_of, ndim_of, shape_of, unsupported

__all__ = ["MODULES", "attrs", "params"]


def attrs(*names, **renames):
    """Module attributes as keyword arguments (``renames``: argument=attribute)."""
    pairs = [(n, n) for n in names] + list(renames.items())

    def settings(ctx, module):
        return {arg: getattr(module, attr) for arg, attr in pairs}

    return _Settings([settings])


def params(*names, **renames):
    """Module tensors (parameters/buffers) as constants named ``<module>.<name>``."""
    pairs = [(n, n) for n in names] + list(renames.items())

    def settings(ctx, module):
        return {arg: ctx.param(getattr(module, attr), attr) for arg, attr in pairs}

    return _Settings([settings])


def fixed(**values):
    return _Settings([lambda ctx, module: dict(values)])


class _Settings:
    """A sum of setting extractors (``params(...) + attrs(...)``)."""

    def __init__(self, parts):
        self.parts = parts

    def __add__(self, other: _Settings) -> _Settings:
        return _Settings(self.parts + other.parts)

    def __call__(self, ctx, module) -> dict:
        out = {}
        for part in self.parts:
            out.update(part(ctx, module))
        return out


NONE = _Settings([])
_CONV = params("weight", "bias") + attrs("stride", "padding", "dilation", "groups")
_POOL = attrs("kernel_size", "stride", "padding")


def _batch_norm_settings(ctx, module) -> dict:
    """Eval mode with running stats normalizes with them; otherwise with batch statistics."""
    track = module.track_running_stats and module.running_mean is not None
    return {"running_mean": ctx.param(module.running_mean, "running_mean") if track else None,
            "running_var": ctx.param(module.running_var, "running_var") if track else None,
            "weight": ctx.param(module.weight, "weight"), "bias": ctx.param(module.bias, "bias"),
            "training": module.training or not track, "momentum": module.momentum,
            "eps": module.eps}


def _instance_norm_settings(ctx, module) -> dict:
    eval_stats = module.track_running_stats and not module.training
    return {"running_mean": ctx.param(module.running_mean, "running_mean"),
            "running_var": ctx.param(module.running_var, "running_var"),
            "weight": ctx.param(module.weight, "weight"), "bias": ctx.param(module.bias, "bias"),
            "use_input_stats": not eval_stats, "eps": module.eps}


def _upsample_settings(ctx, module) -> dict:
    return {"size": module.size, "scale_factor": module.scale_factor, "mode": module.mode,
            "align_corners": module.align_corners}


# --------------------------------------------------------------------------------------------
# MultiheadAttention: projections, per-head attention, output projection.

def multi_head_attention(ctx, query, key, value, key_padding_mask=None, need_weights=True,
                         attn_mask=None, average_attn_weights=True, is_causal=False):
    m = ctx.module
    if key_padding_mask is not None or m.bias_k is not None or m.add_zero_attn:
        raise unsupported("MultiheadAttention with key_padding_mask, bias_k/v or "
                          "add_zero_attn")
    if not m.batch_first:
        query, key, value = (tensor.transpose(ctx, t, 0, 1) for t in (query, key, value))
    q, k, v = _mha_projections(ctx, m, query, key, value)
    heads, head_dim = m.num_heads, m.head_dim
    q, k, v = (_split_heads(ctx, t, heads, head_dim) for t in (q, k, v))
    if need_weights:
        out, weights = _explicit_attention(ctx, q, k, v, attn_mask, is_causal)
    else:
        out = fnn.scaled_dot_product_attention(ctx, q, k, v, attn_mask, 0.0, is_causal)
        weights = None
    out = tensor.transpose(ctx, out, 1, 2)
    dims = shape_of(out)
    out = tensor.reshape(ctx, out, dims[:2] + [heads * head_dim])
    out = fnn.linear(ctx, out, ctx.param(m.out_proj.weight, "out_proj.weight"),
                     ctx.param(m.out_proj.bias, "out_proj.bias"))
    if not m.batch_first:
        out = tensor.transpose(ctx, out, 0, 1)
    if weights is not None and average_attn_weights:
        weights = ctx.emit(relax.op.mean(weights, [1]))
    return relax.Tuple([out, weights]) if weights is not None else (out, None)


def _mha_projections(ctx, m, query, key, value):
    bias = m.in_proj_bias
    if m._qkv_same_embed_dim:
        weights = [ctx.param(m.in_proj_weight, "in_proj_weight")] * 3
        names = [None, None, None]
    else:
        weights = [ctx.param(getattr(m, f"{n}_proj_weight"), f"{n}_proj_weight")
                   for n in "qkv"]
        names = weights
    e = m.embed_dim
    outs = []
    for k, (x, w) in enumerate(zip((query, key, value), weights)):
        if names[k] is None:
            w = ctx.emit(relax.op.strided_slice(w, [0], [k * e], [(k + 1) * e]))
        b = None
        if bias is not None:
            b = ctx.emit(relax.op.strided_slice(ctx.param(bias, "in_proj_bias"), [0], [k * e],
                                                [(k + 1) * e]))
        outs.append(fnn.linear(ctx, x, w, b))
    return outs


def _split_heads(ctx, x, heads: int, head_dim: int):
    """[batch, seq, heads * dim] -> [batch, heads, seq, dim]."""
    batch, seq = shape_of(x)[:2]
    return tensor.transpose(ctx, tensor.reshape(ctx, x, [batch, seq, heads, head_dim]), 1, 2)


def _explicit_attention(ctx, q, k, v, attn_mask, is_causal):
    """softmax(q k^T / sqrt(d) + mask) v, keeping the weights MultiheadAttention returns."""
    dtype = dtype_of(q)
    scale = relax.const(1.0 / float(shape_of(q)[-1]) ** 0.5, dtype)
    scores = ctx.emit(relax.op.multiply(fnn.matmul(ctx, q, tensor.transpose(ctx, k, -2, -1)),
                                        scale))
    if is_causal and attn_mask is None:
        raise unsupported("MultiheadAttention is_causal without attn_mask")
    if attn_mask is not None:
        bias = fnn._attention_bias(ctx, attn_mask, q) if dtype_of(attn_mask) == "bool" or \
            ndim_of(attn_mask) < 4 else attn_mask
        scores = ctx.emit(relax.op.add(scores, bias))
    weights = ctx.emit(relax.op.nn.softmax(scores, -1))
    return fnn.matmul(ctx, weights, v), weights


MODULES = {
    # activations
    nn.ReLU: (ew.FUNCTIONS["relu"], NONE), nn.ReLU6: (ew.relu6, NONE),
    nn.LeakyReLU: (ew.leaky_relu, attrs("negative_slope")),
    nn.PReLU: (ew.prelu, params("weight")), nn.ELU: (ew.elu, attrs("alpha")),
    nn.CELU: (ew.celu, attrs("alpha")), nn.SELU: (ew.FUNCTIONS["selu"], NONE),
    nn.GELU: (ew.gelu, attrs("approximate")), nn.SiLU: (ew.FUNCTIONS["silu"], NONE),
    nn.Mish: (ew.mish, NONE), nn.Hardswish: (ew.hardswish, NONE),
    nn.Hardsigmoid: (ew.hardsigmoid, NONE), nn.Hardtanh: (ew.hardtanh,
                                                          attrs("min_val", "max_val")),
    nn.Sigmoid: (ew.FUNCTIONS["sigmoid"], NONE), nn.Tanh: (ew.FUNCTIONS["tanh"], NONE),
    nn.Softplus: (ew.softplus, attrs("beta", "threshold")), nn.Softsign: (ew.softsign, NONE),
    nn.Softmax: (ew.FUNCTIONS["softmax"], attrs("dim")),
    nn.LogSoftmax: (ew.FUNCTIONS["log_softmax"], attrs("dim")),
    nn.GLU: (ew.glu, attrs("dim")),
    # identities
    nn.Dropout: (ew.identity, NONE), nn.Dropout1d: (ew.identity, NONE),
    nn.Dropout2d: (ew.identity, NONE), nn.Dropout3d: (ew.identity, NONE),
    nn.AlphaDropout: (ew.identity, NONE), nn.Identity: (ew.identity, NONE),
    # convolution, linear, embedding
    **{getattr(nn, f"Conv{d}d"): (fnn.FUNCTIONS[f"conv{d}d"], _CONV + attrs("padding_mode"))
       for d in (1, 2, 3)},
    **{getattr(nn, f"ConvTranspose{d}d"): (fnn.FUNCTIONS[f"conv_transpose{d}d"],
                                          _CONV + attrs("output_padding"))
       for d in (1, 2, 3)},
    nn.Linear: (fnn.linear, params("weight", "bias")),
    nn.Embedding: (fnn.embedding, params("weight") + attrs("padding_idx", "max_norm")),
    # normalization
    **{getattr(nn, f"BatchNorm{d}d"): (fnn.batch_norm, _Settings([_batch_norm_settings]))
       for d in (1, 2, 3)},
    **{getattr(nn, f"InstanceNorm{d}d"): (fnn.instance_norm,
                                         _Settings([_instance_norm_settings]))
       for d in (1, 2, 3)},
    nn.LayerNorm: (fnn.layer_norm, params("weight", "bias") + attrs("normalized_shape", "eps")),
    nn.GroupNorm: (fnn.group_norm, params("weight", "bias") + attrs("num_groups", "eps")),
    nn.RMSNorm: (fnn.rms_norm, params("weight") + attrs("normalized_shape", "eps")),
    # pooling
    **{getattr(nn, f"MaxPool{d}d"): (fnn.FUNCTIONS[f"max_pool{d}d"],
                                    _POOL + attrs("dilation", "ceil_mode", "return_indices"))
       for d in (1, 2, 3)},
    **{getattr(nn, f"AvgPool{d}d"): (fnn.FUNCTIONS[f"avg_pool{d}d"],
                                    _POOL + attrs("ceil_mode", "count_include_pad"))
       for d in (1, 2, 3)},
    **{getattr(nn, f"AdaptiveAvgPool{d}d"): (fnn.FUNCTIONS[f"adaptive_avg_pool{d}d"],
                                            attrs("output_size"))
       for d in (1, 2, 3)},
    **{getattr(nn, f"AdaptiveMaxPool{d}d"): (fnn.FUNCTIONS[f"adaptive_max_pool{d}d"],
                                            attrs("output_size", "return_indices"))
       for d in (1, 2, 3)},
    # shapes and resampling
    nn.Flatten: (tensor.flatten, attrs("start_dim", "end_dim")),
    nn.Unflatten: (tensor.unflatten, attrs("dim", sizes_="unflattened_size")),
    nn.Upsample: (fnn.interpolate, _Settings([_upsample_settings])),
    nn.UpsamplingNearest2d: (fnn.interpolate, _Settings([_upsample_settings])),
    nn.UpsamplingBilinear2d: (fnn.interpolate,
                              _Settings([_upsample_settings]) + fixed(align_corners=True)),
    nn.PixelShuffle: (fnn.pixel_shuffle, attrs("upscale_factor")),
    nn.ZeroPad2d: (fnn.pad, attrs(pad="padding") + fixed(mode="constant")),
    nn.ConstantPad1d: (fnn.pad, attrs("value", pad="padding")),
    nn.ConstantPad2d: (fnn.pad, attrs("value", pad="padding")),
    nn.ReflectionPad2d: (fnn.pad, attrs(pad="padding") + fixed(mode="reflect")),
    nn.ReplicationPad2d: (fnn.pad, attrs(pad="padding") + fixed(mode="replicate")),
    # attention and losses
    nn.MultiheadAttention: (multi_head_attention, NONE),
    nn.CrossEntropyLoss: (fnn.cross_entropy, params("weight") +
                          attrs("ignore_index", "reduction", "label_smoothing")),
    nn.NLLLoss: (fnn.nll_loss, params("weight") + attrs("ignore_index", "reduction")),
    nn.Softmax2d: (ew.FUNCTIONS["softmax"], fixed(dim=-3)),
}
