"""Quantization ONNX ops: Quantize/DequantizeLinear (per tensor, per axis, blocked),
DynamicQuantizeLinear and the integer matmul / conv ops.

Per-tensor and per-axis QDQ on float16/float32 become ``R.quantize`` / ``R.dequantize``; the
rest (blocked, 4-bit, float8, int32 inputs) is written out with ONNX's arithmetic.
"""

from __future__ import annotations

import numpy as np

from msc import relax
from msc.tir import expr as tir

from .common import call, norm_axis, scalar
from .context import Context, OnnxNode
from .converters_nn import convert_conv
from .dtypes import relax_dtype

_INT_RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535),
               "int16": (-32768, 32767), "uint4": (0, 15), "int4": (-8, 7), "uint2": (0, 3),
               "int2": (-2, 1)}
_RELAX_QUANT = ("int8", "uint8", "int16", "uint16")
_FLOATS = ("float16", "float32")


def _per_axis(g: Context, param, x, axis: int, block: int):
    """scale / zero point shaped to broadcast against ``x`` (ONNX reshape_input)."""
    dims = g.shape(param)
    if dims is None or len(dims) == 0:
        return param
    if all(tir.as_int(d) == 1 for d in dims):
        return call("reshape", param, [])
    if block:
        size = tir.as_int(g.shape(x)[axis])
        rep = call("repeat", param, block, axis)
        return call("strided_slice", rep, [axis], [0], [size])
    shape = [1] * g.ndim(x)
    shape[axis] = -1
    return call("reshape", param, shape)


def _relax_ok(g: Context, node: OnnxNode, x, scale, out_dtype: str, float_side: str) -> bool:
    block = node.attrs.get("block_size") or 0
    # a rank-0 x has no axis the relax op could take (it normalizes axis -1 against rank 0)
    return (not block and out_dtype in _RELAX_QUANT and g.dtype(float_side) in _FLOATS
            and g.dtype(scale) in _FLOATS and g.ndim(scale) <= 1 and g.ndim(x) != 0)


def convert_quantize(g: Context, node: OnnxNode):
    x, scale, zero = node.inputs[:3]
    at = node.attrs
    out = g.dtype(zero) if zero is not None else relax_dtype(at.get("output_dtype") or 2)
    axis = _axis(g, node, x, scale)
    if zero is None:
        zero = relax.const(np.zeros(_shape_ints(g, scale), out))
    if _relax_ok(g, node, x, scale, out, x) and g.dtype(scale) == g.dtype(x):
        return g.emit(call("quantize", x, scale, zero, out_dtype=out, axis=axis))
    block = at.get("block_size") or 0
    s = _per_axis(g, scale, x, axis, block)
    precision = at.get("precision")
    if precision:
        x, s = (call("astype", v, relax_dtype(precision)) for v in (x, s))
    y = g.emit(call("divide", x, s))
    if out in _INT_RANGES:
        lo, hi = _INT_RANGES[out]
        z = call("astype", _per_axis(g, zero, x, axis, block), "int32")
        q = call("add", call("astype", call("round", y), "int32"), z)
        return g.emit(call("astype", call("clip", q, lo, hi), out))
    if out.startswith("float8") and at.get("saturate", 1):
        info = _finfo(out)
        y = call("clip", y, relax.PrimValue(float(info.min)), relax.PrimValue(float(info.max)))
    return g.emit(call("astype", y, out))


def _axis(g: Context, node: OnnxNode, x, scale) -> int:
    """The quantization axis; a per-tensor scale has none (any value is valid in ONNX)."""
    dims = g.shape(scale)
    if dims is not None and all(tir.as_int(d) == 1 for d in dims):
        return -1
    return norm_axis(node.attrs.get("axis", 1), g.ndim(x))


def _finfo(dtype: str):
    import ml_dtypes

    return ml_dtypes.finfo(getattr(ml_dtypes, dtype))


def _shape_ints(g: Context, x) -> list:
    return [tir.as_int(d) for d in g.shape(x)]


def convert_dequantize(g: Context, node: OnnxNode):
    x, scale, zero = node.inputs[:3]
    at = node.attrs
    out = relax_dtype(at["output_dtype"]) if at.get("output_dtype") else g.dtype(scale)
    axis = _axis(g, node, x, scale)
    quant = g.dtype(x)
    if zero is not None and _relax_ok(g, node, x, scale, quant, scale) and out in _FLOATS:
        return g.emit(call("dequantize", x, scale, zero, out_dtype=out, axis=axis))
    block = at.get("block_size") or 0
    dx = call("astype", x, "float32")
    if zero is not None and not quant.startswith("float"):
        z = call("astype", _per_axis(g, zero, x, axis, block), "float32")
        dx = call("subtract", dx, z)
    s = call("astype", _per_axis(g, scale, x, axis, block), "float32")
    return g.emit(call("astype", call("multiply", dx, s), out))


def convert_dynamic_quantize(g: Context, node: OnnxNode):
    x = node.inputs[0]
    hi = call("maximum", call("max", x), scalar(g, 0, x))
    lo = g.emit(call("minimum", call("min", x), scalar(g, 0, x)))
    span = g.emit(call("subtract", hi, lo))
    span = call("where", call("equal", span, scalar(g, 0, x)), scalar(g, 1, x), span)
    y_scale = g.emit(call("divide", span, scalar(g, 255, x)))
    zp = call("subtract", scalar(g, 0, x), call("divide", lo, y_scale))
    zp = g.emit(call("round", call("clip", zp, 0.0, 255.0)))
    q = call("add", call("round", call("divide", x, y_scale)), zp)
    y = g.emit(call("astype", call("clip", q, 0.0, 255.0), "uint8"))
    return [y, y_scale, g.emit(call("astype", zp, "uint8"))]


# --------------------------------------------------------------------------------------------
# Integer matmul / conv.

def _centered(g: Context, x, zero, axis_shape=None):
    """x - zero_point in int32 (zero point per tensor, or per row for weights)."""
    y = call("astype", x, "int32")
    if zero is None:
        return y
    z = call("astype", zero, "int32")
    if axis_shape is not None:
        z = call("reshape", z, axis_shape)
    return call("subtract", y, z)


def _row_shape(g: Context, zero, rank: int, axis: int):
    dims = g.shape(zero)
    if dims is None or len(dims) == 0 or all(tir.as_int(d) == 1 for d in dims):
        return []
    shape = [1] * rank
    shape[axis] = -1
    return shape


def convert_matmul_integer(g: Context, node: OnnxNode):
    a, b, za, zb = node.inputs[:4]
    a32 = _centered(g, a, za, _row_shape(g, za, g.ndim(a), -2) if za is not None else None)
    b32 = _centered(g, b, zb, _row_shape(g, zb, g.ndim(b), -1) if zb is not None else None)
    return g.emit(call("matmul", a32, b32))


def _requantize(g: Context, acc, scale, y_scale, y_zero, like):
    """round(acc * scale / y_scale) + y_zero, saturated to y_zero's (or like's) dtype."""
    out = g.dtype(y_zero) if y_zero is not None else g.dtype(like)
    factor = call("divide", call("astype", scale, "float32"),
                  call("astype", y_scale, "float32"))
    y = call("multiply", call("astype", acc, "float32"), factor)
    if y_zero is not None:
        y = call("add", y, call("astype", y_zero, "float32"))
    lo, hi = _INT_RANGES[out]
    return g.emit(call("astype", call("clip", call("round", y), float(lo), float(hi)), out))


def _zero(g: Context, like):
    """A scalar zero point of ``like``'s (quantized) type."""
    return relax.const(np.zeros((), g.dtype(like)))


def dequantized(g: Context, node: OnnxNode, x, scale, zero, axis: int = 1):
    """``DequantizeLinear(x, scale, zero)`` to float32 (per tensor, or per ``axis``)."""
    twin = OnnxNode("DequantizeLinear", node.name, "", 21,
                    [x, scale, zero if zero is not None else _zero(g, x)],
                    {"axis": axis, "block_size": 0}, 1)
    return convert_dequantize(g, twin)


def quantized(g: Context, node: OnnxNode, y, scale, zero, like):
    """``QuantizeLinear(y, scale, zero)`` to ``zero``'s type (``like``'s when absent)."""
    twin = OnnxNode("QuantizeLinear", node.name, "", 21,
                    [y, scale, zero if zero is not None else _zero(g, like)],
                    {"axis": 1, "block_size": 0, "saturate": 1}, 1)
    return convert_quantize(g, twin)


def kernel_weights(g: Context, w, scale, zero, axis: int) -> np.ndarray | None:
    """The float weights of a QLinearConv / QLinearMatMul taken in QDQ form, else None:
    constant int8 codes with zero points 0 and finite positive scales (per channel along
    ``axis``, or per tensor), as symmetric quantizers write them. With a code of +-127 under
    each scale they are the grid the backend's QDQ fold reads back exactly (int8 kernels,
    int32 sums); other codes (onnxruntime's quantizer shrinks a weight scale so an int32 bias
    fits) run as a float op on the dequantized values, as the same model in QDQ format does.
    Weights with zero points keep the integer form."""
    codes, s = g.value(w), g.value(scale)
    z = None if zero is None else g.value(zero)
    if codes is None or s is None or (zero is not None and z is None):
        return None
    codes, s = np.asarray(codes), np.asarray(s, np.float32)
    if codes.dtype != np.int8 or (z is not None and np.any(np.asarray(z) != 0)):
        return None
    if not (s.size and np.all(np.isfinite(s)) and np.all(s > 0)):
        return None
    if s.size == 1:
        return codes.astype(np.float32) * s.reshape(())
    if s.size != codes.shape[axis]:
        return None
    shape = [1] * codes.ndim
    shape[axis] = -1
    return codes.astype(np.float32) * s.reshape(shape)


def _as_qdq(g: Context, node: OnnxNode, x, sx, zx, sy, zy, float_op):
    """Q(float_op(DQ(x)), sy, zy): the form the backend's QDQ folds put on its int8 kernels
    (int32 sums, then the scales)."""
    return quantized(g, node, float_op(dequantized(g, node, x, sx, zx)), sy, zy, x)


def convert_qlinear_matmul(g: Context, node: OnnxNode):
    a, sa, za, b, sb, zb, sy, zy = node.inputs[:8]
    weights = kernel_weights(g, b, sb, zb, 1) if g.ndim(b) == 2 else None
    if weights is not None and g.dtype(a) in ("uint8", "int8") and g.ndim(sa) == 0:
        return _as_qdq(g, node, a, sa, za, sy, zy,
                       lambda fa: g.emit(call("matmul", fa, relax.const(weights))))
    acc = call("matmul", _centered(g, a, za), _centered(g, b, zb))
    scale = call("multiply", call("astype", sa, "float32"), call("astype", sb, "float32"))
    return _requantize(g, acc, scale, sy, zy, a)


def _int_conv(g: Context, node: OnnxNode, x, w, bias=None):
    conv_node = OnnxNode("Conv", node.name, node.domain, node.opset, [x, w, bias],
                         node.attrs, 1)
    return convert_conv(g, conv_node)


def convert_conv_integer(g: Context, node: OnnxNode):
    x, w, zx, zw = node.inputs[:4]
    rank = g.ndim(w)
    w32 = _centered(g, w, zw, _row_shape(g, zw, rank, 0) if zw is not None else None)
    return _int_conv(g, node, g.emit(_centered(g, x, zx)), g.emit(w32))


def convert_qlinear_conv(g: Context, node: OnnxNode):
    x, sx, zx, w, sw, zw, sy, zy, bias = node.inputs[:9]
    rank = g.ndim(w)
    weights = kernel_weights(g, w, sw, zw, 0) if rank == 4 else None
    if (weights is not None and g.ndim(sx) == 0 and g.dtype(x) in ("uint8", "int8")
            and g.value(sx) is not None and (bias is None or g.value(bias) is not None)):
        # the int32 bias has scale sx * sw[c] and zero point 0
        fb = None if bias is None else relax.const(
            (np.asarray(g.value(bias), np.float64) * np.float64(np.asarray(g.value(sx)))
             * np.asarray(g.value(sw), np.float64).reshape(-1)).astype(np.float32))
        return _as_qdq(g, node, x, sx, zx, sy, zy, lambda fx: _int_conv(
            g, node, fx, relax.const(weights), fb))
    w32 = _centered(g, w, zw, _row_shape(g, zw, rank, 0) if zw is not None else None)
    acc = _int_conv(g, node, g.emit(_centered(g, x, zx)), g.emit(w32), bias)
    sw = call("reshape", sw, [1, -1] + [1] * (rank - 2)) if _row_shape(g, sw, rank, 0) else sw
    scale = call("multiply", call("astype", sx, "float32"), call("astype", sw, "float32"))
    return _requantize(g, acc, scale, sy, zy, x)


CONVERTERS = {
    "QuantizeLinear": {10: convert_quantize}, "DequantizeLinear": {10: convert_dequantize},
    "DynamicQuantizeLinear": {11: convert_dynamic_quantize},
    "MatMulInteger": {10: convert_matmul_integer},
    "QLinearMatMul": {10: convert_qlinear_matmul},
    "ConvInteger": {10: convert_conv_integer}, "QLinearConv": {10: convert_qlinear_conv},
}
