"""ONNX rows of the nn ops, the fused ``msc.*`` joints and QDQ (see codegen/onnx/table.py).

Layouts: ONNX convolutions and pools are channel-first (NCHW / OIHW), so a joint in another
layout fails with the layout named. Fused joints become the standard op that ONNX has for
them (``msc.conv2d_bias`` -> Conv with B, ``msc.linear_bias`` on 2-D -> Gemm) or the short
sequence it stands for (attention: MatMul, Softmax, MatMul)."""

from __future__ import annotations

import math

import numpy as np

from .integer import integer_operands
from .rows import Row, axes_of, axis_of, plain

__all__ = ["NN_ROWS"]

# --------------------------------------------------------------------------------------------
# Convolutions and pools.


def _pads(padding, n: int) -> list[int]:
    """Relax padding (one per dim, begins+ends, or one for all) as ONNX pads (begins+ends)."""
    padding = [padding] if isinstance(padding, int) else list(padding)
    if len(padding) == 1:
        padding = padding * n
    return padding * 2 if len(padding) == n else padding


def _spatial(value, n: int) -> list[int]:
    value = [value] if isinstance(value, int) else list(value)
    return value * n if len(value) == 1 else value


def _conv_layouts(n: int, transpose: bool) -> tuple[str, str]:
    data = ("NCW", "NCHW", "NCDHW")[n - 1]
    return data, ("OI" if not transpose else "IO") + data[2:]


def _conv_attrs(ctx, n: int, transpose: bool) -> dict:
    """ONNX's attrs of a conv (its data and kernel already in ONNX's layouts)."""
    layouts = _conv_layouts(n, transpose)
    kernel = ctx.attr("kernel_layout")
    attrs = {"strides": _spatial(ctx.attr("strides"), n),
             "pads": _pads(ctx.attr("padding"), n),
             "dilations": _spatial(ctx.attr("dilation"), n), "group": ctx.attr("groups")}
    weight = ctx.node.input_at(1) if "weight" not in ctx.node.weights else \
        ctx.node.weight_at("weight")
    attrs["kernel_shape"] = [weight.shape[kernel.index(a)] for a in layouts[1][2:]]
    if transpose and any(ctx.attr("output_padding") if not isinstance(
            ctx.attr("output_padding"), int) else [ctx.attr("output_padding")]):
        attrs["output_padding"] = _spatial(ctx.attr("output_padding"), n)
    return attrs


def _to_layouts(ctx, conv, n: int, transpose: bool, x: str, w: str) -> tuple[str, str, list]:
    """Data and kernel in ONNX's layouts (NCHW / OIHW): Transposes where the joint's differ
    (a constant kernel is stored transposed); the permutation back to the output layout."""
    want_data, want_kernel = _conv_layouts(n, transpose)
    data, kernel = conv.attr("data_layout"), conv.attr("kernel_layout")
    out = conv.attr("out_layout") or data
    if sorted(data) != sorted(want_data) or sorted(kernel) != sorted(want_kernel) or \
            sorted(out) != sorted(want_data):
        raise ctx.fail(f"layouts {data}/{kernel}: ONNX convolutions are {want_data}/"
                       f"{want_kernel} (these are no permutation of them)")
    if data != want_data:
        x = ctx.emit("Transpose", [x], perm=[data.index(a) for a in want_data])
    if kernel != want_kernel:
        perm = [kernel.index(a) for a in want_kernel]
        data_w = ctx.const_of(w)
        w = ctx.const(np.transpose(data_w, perm), "weight") if data_w is not None else \
            ctx.emit("Transpose", [w], perm=perm)
    return x, w, [want_data.index(a) for a in out]


def _conv(n: int, transpose: bool = False, bias: bool = False) -> Row:
    def write(ctx):
        from msc.relax.op.registry import OPS

        conv_op = f"nn.conv{n}d" + ("_transpose" if transpose else "")
        conv = type(ctx)(ctx.writer, ctx.node)
        conv.op_def = OPS[conv_op]
        if not ctx.in_tensor(0).dtype.startswith(("float", "bfloat")):
            operands = None if transpose or bias else integer_operands(ctx)
            if operands is None or conv.attr("data_layout") != _conv_layouts(n, False)[0]:
                raise ctx.fail(f"ONNX convolutions take floats, or 8-bit ints widened to "
                               f"int32 in NCHW (ConvInteger), not {ctx.in_tensor(0).dtype}")
            return ctx.emit("ConvInteger", operands, **_conv_attrs(conv, n, transpose))
        x, w, back = _to_layouts(ctx, conv, n, transpose, ctx.input(0), ctx.tensor_arg("weight"))
        inputs = [x, w] + ([_bias_1d(ctx)] if bias else [])
        out = ctx.emit("ConvTranspose" if transpose else "Conv", inputs,
                       **_conv_attrs(conv, n, transpose))
        if back != sorted(back):
            out = ctx.emit("Transpose", [out], perm=back)
        return ctx.cast(out, ctx.in_tensor(0).dtype, ctx.attr("out_dtype"))
    return Row(write)


def _bias_1d(ctx) -> str:
    """A fused joint's bias as the 1-D tensor Conv / Gemm take."""
    data = ctx.weight_data("bias")
    if data is not None:
        return ctx.const(data.reshape(-1), "bias")
    return ctx.emit("Reshape", [ctx.weight("bias"), ctx.ints([-1], "flat")])


def _pool(kind: str, n: int) -> Row:
    def write(ctx):
        layout = ("NCW", "NCHW", "NCDHW")[n - 1]
        if ctx.attr("layout") != layout:
            raise ctx.fail(f"layout {ctx.attr('layout')}: ONNX pools are {layout}")
        attrs = {"kernel_shape": _spatial(ctx.attr("pool_size"), n),
                 "strides": _spatial(ctx.attr("strides"), n),
                 "pads": _pads(ctx.attr("padding"), n),
                 "ceil_mode": int(ctx.attr("ceil_mode"))}
        dilations = _spatial(ctx.attr("dilation"), n)
        if kind == "max":
            return ctx.emit("MaxPool", [ctx.input(0)], dilations=dilations, **attrs)
        if any(d != 1 for d in dilations):
            ctx.need(19, "a dilated average pool")
            attrs["dilations"] = dilations
        return ctx.emit("AveragePool", [ctx.input(0)], **attrs,
                        count_include_pad=int(ctx.attr("count_include_pad")))
    return Row(write)


def _adaptive_pool(n: int) -> Row:
    def write(ctx):
        src, out = ctx.in_tensor(0), ctx.out
        if ctx.attr("layout") != ("NCW", "NCHW", "NCDHW")[n - 1]:
            raise ctx.fail(f"layout {ctx.attr('layout')}: ONNX pools are channel-first")
        if all(d == 1 for d in out.shape[2:]):
            return ctx.emit("GlobalAveragePool", [ctx.input(0)])
        sizes, outs = src.shape[2:], out.shape[2:]
        if any(s < 0 for s in sizes):
            raise ctx.fail("an adaptive pool over dynamic spatial dims")
        if any(s % o for s, o in zip(sizes, outs)):
            return _uneven_pool(ctx, sizes, outs)
        kernel = [s // o for s, o in zip(sizes, outs)]
        return ctx.emit("AveragePool", [ctx.input(0)], kernel_shape=kernel, strides=kernel)
    return Row(write)


def _uneven_pool(ctx, sizes: list[int], outs: list[int]) -> str:
    """Windows of unequal sizes: a mean is separable, so each spatial axis in turn is cut into
    its windows (floor(i*in/out) .. ceil((i+1)*in/out)), each averaged, and concatenated."""
    x = ctx.input(0)
    for k, (size, out) in enumerate(zip(sizes, outs)):
        axis = 2 + k
        if size == out:
            continue
        cells = []
        for i in range(out):
            begin, end = (i * size) // out, -((-(i + 1) * size) // out)
            cut = ctx.emit("Slice", [x, ctx.ints([begin], "b"), ctx.ints([end], "e"),
                                     ctx.ints([axis], "axis")])
            cells.append(ctx.reduce("ReduceMean", cut, [axis], True))
        x = ctx.emit("Concat", cells, axis=axis)
    return x


# --------------------------------------------------------------------------------------------
# Normalization.


def _param(ctx, role: str, default: float, shape: list[int], flag: str | None = None) -> str:
    """A norm's gamma / beta, or ones / zeros when the op does not scale / center."""
    if (flag is None or ctx.attr(flag)) and ctx.tensor_arg(role) is not None:
        return ctx.tensor_arg(role)
    return ctx.const(np.full(shape, default, dtype=ctx.in_tensor(0).dtype), role)


def _batch_norm(ctx):
    channels = ctx.in_tensor(0).shape[axis_of(ctx.attr("axis"), ctx.in_tensor(0).ndim)]
    if axis_of(ctx.attr("axis"), ctx.in_tensor(0).ndim) != 1:
        raise ctx.fail("ONNX BatchNormalization takes channels at axis 1")
    args = [_param(ctx, "gamma", 1, [channels], "scale"),
            _param(ctx, "beta", 0, [channels], "center"),
            ctx.tensor_arg("moving_mean"), ctx.tensor_arg("moving_var")]
    if not ctx.attr("training"):
        return ctx.emit("BatchNormalization", [ctx.input(0), *args],
                        epsilon=ctx.attr("epsilon"))
    # Relax's training=True normalizes with the batch's own statistics (TVM's from_fx writes
    # it even for eval models); onnxruntime's inference kernels ignore training_mode, so the
    # statistics are computed here
    ndim = ctx.in_tensor(0).ndim
    normed = _normalize(ctx, ctx.input(0), [a for a in range(ndim) if a != 1],
                        ctx.attr("epsilon"))
    gamma = _channel_shaped(ctx, args[0], "gamma", ndim)
    return ctx.emit("Add", [ctx.emit("Mul", [normed, gamma]),
                            _channel_shaped(ctx, args[1], "beta", ndim)])


def _trailing(ctx, axes) -> list[int]:
    ndim = ctx.in_tensor(0).ndim
    axes = sorted(axes_of(axes, ndim))
    if axes != list(range(ndim - len(axes), ndim)):
        raise ctx.fail("ONNX normalizes trailing axes only")
    return axes


def _layer_norm(ctx):
    axes = _trailing(ctx, ctx.attr("axes"))
    shape = [ctx.in_tensor(0).shape[a] for a in axes]
    gamma = _param(ctx, "gamma", 1, shape, "scale")
    beta = _param(ctx, "beta", 0, shape, "center")
    if ctx.opset >= 17:
        return ctx.emit("LayerNormalization", [ctx.input(0), gamma, beta], axis=axes[0],
                        epsilon=ctx.attr("epsilon"))
    normed = _normalize(ctx, ctx.input(0), axes, ctx.attr("epsilon"))
    return ctx.emit("Add", [ctx.emit("Mul", [normed, gamma]), beta])


def _normalize(ctx, x: str, axes: list[int], eps: float) -> str:
    """(x - mean) / sqrt(var + eps) over ``axes``."""
    dtype = ctx.in_tensor(0).dtype
    diff = ctx.emit("Sub", [x, ctx.reduce("ReduceMean", x, axes, True)])
    var = ctx.reduce("ReduceMean", ctx.emit("Mul", [diff, diff]), axes, True)
    std = ctx.emit("Sqrt", [ctx.emit("Add", [var, ctx.scalar(eps, dtype, "eps")])])
    return ctx.emit("Div", [diff, std])


def _channel_shaped(ctx, value: str, role: str, ndim: int) -> str:
    """A per-channel [C] parameter as [C, 1, ...] (broadcasts over NC...)."""
    data = ctx.const_of(value)
    shape = [-1] + [1] * (ndim - 2)
    if data is not None:
        return ctx.const(data.reshape(shape), role)
    return ctx.emit("Reshape", [value, ctx.ints(shape, "shape")])


def _group_norm(ctx):
    x = ctx.in_tensor(0)
    if axis_of(ctx.attr("channel_axis"), x.ndim) != 1:
        raise ctx.fail("ONNX group norms take channels at axis 1")
    groups, channels = ctx.attr("num_groups"), x.shape[1]
    grouped = ctx.emit("Reshape", [ctx.input(0), ctx.ints([0, groups, -1], "groups")])
    normed = _normalize(ctx, grouped, [2], ctx.attr("epsilon"))
    back = ctx.emit("Reshape", [normed, ctx.emit("Shape", [ctx.input(0)])])
    gamma = _channel_shaped(ctx, _param(ctx, "gamma", 1, [channels], "scale"), "gamma", x.ndim)
    beta = _channel_shaped(ctx, _param(ctx, "beta", 0, [channels], "center"), "beta", x.ndim)
    return ctx.emit("Add", [ctx.emit("Mul", [back, gamma]), beta])


def _instance_norm(ctx):
    x = ctx.in_tensor(0)
    if axis_of(ctx.attr("channel_axis"), x.ndim) != 1:
        raise ctx.fail("ONNX InstanceNormalization takes channels at axis 1")
    channels = [x.shape[1]]
    return ctx.emit("InstanceNormalization", [
        ctx.input(0), _param(ctx, "gamma", 1, channels, "scale"),
        _param(ctx, "beta", 0, channels, "center")], epsilon=ctx.attr("epsilon"))


def _rms_norm(ctx):
    axes = _trailing(ctx, ctx.attr("axes"))
    x, dtype = ctx.input(0), ctx.in_tensor(0).dtype
    mean = ctx.reduce("ReduceMean", ctx.emit("Mul", [x, x]), axes, True)
    rms = ctx.emit("Sqrt", [ctx.emit("Add", [mean, ctx.scalar(ctx.attr("epsilon"), dtype,
                                                                "eps")])])
    return ctx.emit("Mul", [ctx.emit("Div", [x, rms]), ctx.tensor_arg("weight")])


# --------------------------------------------------------------------------------------------
# Activations.


def _gelu(approximate: str) -> Row:
    def write(ctx):
        x, dtype = ctx.input(0), ctx.in_tensor(0).dtype
        if ctx.opset >= 20:
            return ctx.emit("Gelu", [x], approximate=approximate)
        half = ctx.scalar(0.5, dtype, "half")
        one = ctx.scalar(1.0, dtype, "one")
        if approximate == "tanh":  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
            cube = ctx.emit("Mul", [ctx.emit("Mul", [x, x]), x])
            inner = ctx.emit("Add", [x, ctx.emit("Mul", [cube, ctx.scalar(0.044715, dtype,
                                                                          "c")])])
            inner = ctx.emit("Mul", [inner, ctx.scalar(math.sqrt(2 / math.pi), dtype, "k")])
            curve = ctx.emit("Tanh", [inner])
        else:  # 0.5 x (1 + erf(x / sqrt(2)))
            curve = ctx.emit("Erf", [ctx.emit("Div", [x, ctx.scalar(math.sqrt(2), dtype,
                                                                     "sqrt2")])])
        return ctx.emit("Mul", [ctx.emit("Mul", [x, half]), ctx.emit("Add", [curve, one])])
    return Row(write)


def _softplus(ctx):
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (torch's form); the
    threshold is written only where it changes a float32 (below ~16)."""
    x, dtype = ctx.input(0), ctx.in_tensor(0).dtype
    beta, threshold = float(ctx.attr("beta")), float(ctx.attr("threshold"))
    scaled = x if beta == 1.0 else ctx.emit("Mul", [x, ctx.scalar(beta, dtype, "beta")])
    out = ctx.emit("Softplus", [scaled])
    if beta != 1.0:
        out = ctx.emit("Div", [out, ctx.scalar(beta, dtype, "beta")])
    if threshold >= 16:
        return out
    above = ctx.emit("Greater", [scaled, ctx.scalar(threshold, dtype, "threshold")])
    return ctx.emit("Where", [above, x, out])


def _prelu(ctx):
    x = ctx.in_tensor(0)
    alpha = ctx.tensor_arg("alpha")
    axis = axis_of(ctx.attr("axis"), x.ndim)
    shape = [1] * (x.ndim - axis)
    shape[0] = -1
    data = ctx.const_of(alpha)
    alpha = ctx.const(data.reshape(shape), "alpha") if data is not None else \
        ctx.emit("Reshape", [alpha, ctx.ints(shape, "shape")])
    return ctx.emit("PRelu", [ctx.input(0), alpha])


def _pad(ctx):
    widths, mode = ctx.attr("pad_width"), ctx.attr("pad_mode")
    modes = {"constant": "constant", "reflect": "reflect", "edge": "edge",
             "replicate": "edge"}
    if mode not in modes:
        raise ctx.fail(f"pad_mode {mode!r} (ONNX pads constant, reflect, edge)")
    pads = ctx.ints(list(widths[0::2]) + list(widths[1::2]), "pads")
    inputs = [ctx.input(0), pads]
    if mode == "constant":
        inputs.append(ctx.scalar(ctx.attr("pad_value"), ctx.in_tensor(0).dtype, "value"))
    return ctx.emit("Pad", inputs, mode=modes[mode])


ACTIVATION = {
    "nn.relu": plain("Relu"), "nn.selu": plain("Selu"), "nn.gelu": _gelu("none"),
    "msc.gelu": _gelu("none"), "nn.gelu_tanh": _gelu("tanh"),
    "nn.silu": Row(lambda c: c.emit("Mul", [c.input(0), c.emit("Sigmoid", [c.input(0)])])),
    "nn.leakyrelu": plain("LeakyRelu", {"alpha": "alpha"}),
    "nn.softmax": plain("Softmax", {"axis": "axis"}),
    "nn.log_softmax": plain("LogSoftmax", {"axis": "axis"}),
    "nn.softplus": Row(_softplus), "nn.prelu": Row(_prelu), "nn.pad": Row(_pad),
    "nn.dropout": Row(lambda c: c.input(0)),
    "nn.pixel_shuffle": plain("DepthToSpace", {"upscale_factor": "blocksize"}, mode="CRD"),
}

# --------------------------------------------------------------------------------------------
# Linear algebra, attention, fused joints.


def _transposed_weight(ctx, role: str = "weight") -> str:
    """A stored [out, in] weight as the [in, out] MatMul takes (transposed once, offline)."""
    qweight = ctx.writer.quantized(ctx.node.weight_at(role))
    if qweight is not None and qweight.ndim == 2:  # int8 stays int8: DQ of the transposed
        return ctx.writer.dequantized(qweight.transposed(), f"{ctx.name}.{role}_t")
    data = ctx.weight_data(role)
    if data is not None:
        return ctx.const(np.ascontiguousarray(data.T), f"{role}_t")
    return ctx.emit("Transpose", [ctx.weight(role)], perm=[1, 0])


def _linear(ctx):
    x, bias = ctx.input(0), ctx.has_weight("bias")
    if bias and ctx.in_tensor(0).ndim == 2:
        out = ctx.emit("Gemm", [x, ctx.weight("weight"), _bias_1d(ctx)], transB=1)
    else:
        out = ctx.emit("MatMul", [x, _transposed_weight(ctx)])
        if bias:
            out = ctx.emit("Add", [out, _bias_1d(ctx)])
    return ctx.cast(out, ctx.in_tensor(0).dtype, ctx.attr("out_dtype"))


def _dense(ctx):
    x, w = ctx.input(0), ctx.tensor_arg("weight")
    data = ctx.const_of(w)
    w = ctx.const(data.T, "weight_t") if data is not None else \
        ctx.emit("Transpose", [w], perm=[1, 0])
    return ctx.cast(ctx.emit("MatMul", [x, w]), ctx.in_tensor(0).dtype, ctx.attr("out_dtype"))


def _last_two(ndim: int) -> list[int]:
    return list(range(ndim - 2)) + [ndim - 1, ndim - 2]


def _batch_matmul(ctx):
    x, y = ctx.inputs
    if ctx.attr("transpose_a"):
        x = ctx.emit("Transpose", [x], perm=_last_two(ctx.in_tensor(0).ndim))
    if ctx.attr("transpose_b"):
        y = ctx.emit("Transpose", [y], perm=_last_two(ctx.in_tensor(1).ndim))
    return ctx.cast(ctx.emit("MatMul", [x, y]), ctx.in_tensor(0).dtype, ctx.attr("out_dtype"))


def _bias_add(ctx):
    x = ctx.in_tensor(0)
    axis = axis_of(ctx.attr("axis"), x.ndim)
    shape = [-1] + [1] * (x.ndim - axis - 1)
    bias = ctx.tensor_arg("bias")
    data = ctx.const_of(bias)
    bias = ctx.const(data.reshape(shape), "bias") if data is not None else \
        ctx.emit("Reshape", [bias, ctx.ints(shape, "shape")])
    return ctx.emit("Add", [ctx.input(0), bias])


def _embedding(ctx):
    out = ctx.emit("Gather", [ctx.tensor_arg("weight"), ctx.input(0)], axis=0)
    if ctx.out.ndim == ctx.in_tensor(0).ndim + 1:
        return out
    return ctx.reshape(out, ctx.out)


_BHSD = [0, 2, 1, 3]  # Relax attention is [batch, seq, heads, dim]; the math is per head


def _permuted(ctx, x: str, perm: list[int]) -> str:
    return x if perm == sorted(perm) else ctx.emit("Transpose", [x], perm=perm)


def _sdpa(ctx, q: str, k: str, v: str, bias: str | None, q_dim: int, seqs: tuple) -> str:
    """softmax(q k^T * scale + bias [causal]) v on [b, h, s, d] values."""
    dtype = ctx.out.dtype
    if ctx.attr("window_size") is not None:
        raise ctx.fail("sliding-window attention has no ONNX form here")
    scale = ctx.attr("scale")
    scale = 1 / math.sqrt(q_dim) if scale is None else float(scale)
    causal = ctx.attr("causal_mask")
    if ctx.opset >= 23 and causal in (None, "TopLeft"):  # ONNX's own Attention op
        inputs = [q, k, v] + ([bias] if bias is not None else [])
        return ctx.emit("Attention", inputs, scale=scale, is_causal=int(causal is not None))
    scores = ctx.emit("MatMul", [q, ctx.emit("Transpose", [k], perm=[0, 1, 3, 2])])
    scores = ctx.emit("Mul", [scores, ctx.scalar(scale, dtype, "scale")])
    if bias is not None:
        scores = ctx.emit("Add", [scores, bias])
    if causal is not None:
        scores = _causal(ctx, scores, causal, seqs)
    return ctx.emit("MatMul", [ctx.emit("Softmax", [scores], axis=-1), v])


def _causal(ctx, scores: str, causal: str, seqs: tuple) -> str:
    s_q, s_k = seqs
    if s_q < 0 or s_k < 0 or causal not in ("TopLeft", "BottomRight"):
        raise ctx.fail(f"causal_mask {causal!r} over dynamic or unknown lengths")
    shift = 0 if causal == "TopLeft" else s_k - s_q
    keep = np.tril(np.ones((s_q, s_k), dtype=bool), shift)
    low = ctx.scalar(np.finfo(ctx.out.dtype).min, ctx.out.dtype, "masked")
    return ctx.emit("Where", [ctx.const(keep, "causal"), scores, low])


def _attention(ctx):
    q, k, v = (_permuted(ctx, ctx.input(i), _BHSD) for i in range(3))
    bias = ctx.input(3) if len(ctx.node.inputs) > 3 else None
    shape_q, shape_k = ctx.in_tensor(0).shape, ctx.in_tensor(1).shape
    out = _sdpa(ctx, q, k, v, bias, shape_q[3], (shape_q[1], shape_k[1]))
    return ctx.emit("Transpose", [out], perm=_BHSD)


def _msc_attention(ctx):
    """permute(attention(permute(q, axes), ...), axes_3): each pair of permutes is one."""
    qkv, seqs = [], []
    for i, key in enumerate(["axes", "axes_1", "axes_2"]):
        axes = ctx.raw(key, "ints", _BHSD)
        perm = [axes[j] for j in _BHSD]
        qkv.append(_permuted(ctx, ctx.input(i), perm))
        seqs.append(ctx.in_tensor(i).shape[perm[2]])
    q_dim = ctx.in_tensor(0).shape[ctx.raw("axes", "ints", _BHSD)[3]]
    bias = ctx.input(3) if len(ctx.node.inputs) > 3 else None
    out = _sdpa(ctx, *qkv, bias, q_dim, (seqs[0], seqs[1]))
    return _permuted(ctx, out, [_BHSD[a] for a in ctx.raw("axes_3", "ints", _BHSD)])


FUSED = {
    "msc.conv1d_bias": _conv(1, bias=True), "msc.conv2d_bias": _conv(2, bias=True),
    "msc.linear": Row(_linear), "msc.linear_bias": Row(_linear),
    "msc.embedding": Row(_embedding), "msc.attention": Row(_msc_attention),
    "nn.attention": Row(_attention), "nn.attention_bias": Row(_attention),
    "nn.dense": Row(_dense), "nn.batch_matmul": Row(_batch_matmul),
    "nn.bias_add": Row(_bias_add),
}

# --------------------------------------------------------------------------------------------
# Images, losses, QDQ.


_RESIZE_MODES = {"linear": "linear", "nearest_neighbor": "nearest", "cubic": "cubic"}
_NEAREST = {"round": "round_prefer_ceil", "floor": "floor", "ceil": "ceil",
            "round_prefer_floor": "round_prefer_floor", "round_prefer_ceil": "round_prefer_ceil",
            "": "round_prefer_floor"}


def _resize(n: int) -> Row:
    def write(ctx):
        layout = ("NCHW", "NCDHW")[n - 2]
        if ctx.attr("layout") != layout:
            raise ctx.fail(f"layout {ctx.attr('layout')}: ONNX Resize here is {layout}")
        method = ctx.attr("method")
        if method not in _RESIZE_MODES:
            raise ctx.fail(f"resize method {method!r}")
        attrs = {"mode": _RESIZE_MODES[method],
                 "coordinate_transformation_mode": ctx.attr("coordinate_transformation_mode"),
                 "cubic_coeff_a": float(ctx.attr("cubic_alpha")),
                 "exclude_outside": int(ctx.attr("cubic_exclude")),
                 "extrapolation_value": float(ctx.attr("extrapolation_value"))}
        if method == "nearest_neighbor":
            attrs["nearest_mode"] = _NEAREST.get(ctx.attr("rounding_method"), "round_prefer_ceil")
        return ctx.emit("Resize", [ctx.input(0), "", "", ctx.dims(ctx.out)], **attrs)
    return Row(write)


def _grid_sample(ctx):
    layout = ctx.attr("layout")
    if layout not in ("NCHW", "NCDHW"):
        raise ctx.fail("ONNX GridSample is NCHW / NCDHW")
    if layout == "NCDHW":
        ctx.need(20, "a 3-D GridSample as ONNX")
    method = {"bilinear": "bilinear" if ctx.opset < 20 else "linear", "nearest": "nearest",
              "bicubic": "bicubic" if ctx.opset < 20 else "cubic"}.get(ctx.attr("method"))
    if method is None:
        raise ctx.fail(f"grid_sample method {ctx.attr('method')!r}")
    rank = len(layout)  # ONNX's grid: [N, *out, d]
    grid = ctx.emit("Transpose", [ctx.input(1)], perm=[0, *range(2, rank), 1])
    return ctx.emit("GridSample", [ctx.input(0), grid], mode=method,
                    padding_mode=ctx.attr("padding_mode"),
                    align_corners=int(ctx.attr("align_corners")))


def _affine_grid(ctx):
    """ONNX's grid is [N, H, W, 2]; Relax's [N, 2, H, W]."""
    shapes = ctx.writer.shapes
    size = ctx.emit("Concat", [shapes.dim(ctx, ctx.out, 0), ctx.ints([1], "one"),
                               shapes.dim(ctx, ctx.out, 2), shapes.dim(ctx, ctx.out, 3)],
                    axis=0)
    grid = ctx.emit("AffineGrid", [ctx.input(0), size],
                    align_corners=int(ctx.attr("align_corners")))
    return ctx.emit("Transpose", [grid], perm=[0, 3, 1, 2])


def _nll_loss(ctx):
    inputs = [ctx.input(0), ctx.cast(ctx.input(1), ctx.in_tensor(1).dtype, "int64")]
    weight = ctx.tensor_arg("weights")
    if weight is not None:
        inputs.append(weight)
    return ctx.emit("NegativeLogLikelihoodLoss", inputs, reduction=ctx.attr("reduction"),
                    ignore_index=ctx.attr("ignore_index"))


def _cross_entropy(ctx):
    x, y = ctx.inputs
    total = ctx.emit("Neg", [ctx.reduce("ReduceSum", ctx.emit("Mul", [x, y]), None, False, 13)])
    if ctx.in_tensor(0).ndim != 2:
        return total
    batch = ctx.scalar(ctx.in_tensor(0).shape[0], ctx.out.dtype, "batch")
    return ctx.emit("Div", [total, batch])


def _qdq_param(ctx, i: int, dtype: str) -> str:
    """Scale / zero point as ONNX wants them: one value or one per channel, zero point in the
    quantized dtype."""
    value = ctx.cast(ctx.input(i), ctx.in_tensor(i).dtype, dtype)
    data = ctx.const_of(value)
    if data is not None and data.ndim == 1 and data.size == 1:
        return ctx.const(data.reshape(()), "scalar")
    return value


def _quantize(ctx):
    x = ctx.input(0)
    scale = _qdq_param(ctx, 1, ctx.in_tensor(0).dtype)
    zero = _qdq_param(ctx, 2, ctx.out.dtype)
    axis = axis_of(ctx.attr("axis"), ctx.in_tensor(0).ndim)
    return ctx.emit("QuantizeLinear", [x, scale, zero], axis=axis)


def _dequantize(ctx):
    scale = _qdq_param(ctx, 1, ctx.in_tensor(1).dtype)
    zero = _qdq_param(ctx, 2, ctx.in_tensor(0).dtype)
    axis = axis_of(ctx.attr("axis"), ctx.in_tensor(0).ndim)
    out = ctx.emit("DequantizeLinear", [ctx.input(0), scale, zero], axis=axis)
    return ctx.cast(out, ctx.in_tensor(1).dtype, ctx.attr("out_dtype"))


IMAGE_LOSS_QUANT = {
    "image.resize2d": _resize(2), "image.resize3d": _resize(3),
    "image.grid_sample": Row(_grid_sample, since=16),
    "image.affine_grid": Row(_affine_grid, since=20),
    "nn.nll_loss": Row(_nll_loss), "nn.cross_entropy_with_logits": Row(_cross_entropy),
    "quantize": Row(_quantize), "dequantize": Row(_dequantize),
}

NN_ROWS = {
    **{f"nn.conv{d}d": _conv(d) for d in (1, 2, 3)},
    **{f"nn.conv{d}d_transpose": _conv(d, transpose=True) for d in (1, 2, 3)},
    **{f"nn.{k}_pool{d}d": _pool(k, d) for k in ("max", "avg") for d in (1, 2, 3)},
    **{f"nn.adaptive_avg_pool{d}d": _adaptive_pool(d) for d in (1, 2, 3)},
    "nn.batch_norm": Row(_batch_norm), "nn.layer_norm": Row(_layer_norm),
    "nn.group_norm": Row(_group_norm), "nn.instance_norm": Row(_instance_norm),
    "nn.rms_norm": Row(_rms_norm),
    **ACTIVATION, **FUSED, **IMAGE_LOSS_QUANT,
}
