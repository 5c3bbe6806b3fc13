"""onnxruntime's quantized contrib ops (domain ``com.microsoft``): what ``quantize_static``
writes in its QOperator format and what int8 models of the ONNX Model Zoo carry beside the
standard QLinearConv / QLinearMatMul.

Each op is its QDQ meaning: the quantized inputs dequantized, the float op (converted by the
standard op's own converter, so its attributes mean what they mean there), the result
quantized. The backend's QDQ folds (``msc.backend.fuse.qdq``) then run the chains on its int8
kernels, exactly as for the same model written in QDQ format::

    QLinearAdd(A, sA, zA, B, sB, zB, sC, zC)  ->  Q(DQ(A, sA, zA) + DQ(B, sB, zB), sC, zC)

An optional zero point left out is 0 of the quantized input's type; the output has that type.
The semantics are onnxruntime's (docs/ContribOperators.md of onnxruntime); msc compares
against onnxruntime running them.
"""

from __future__ import annotations

from . import converters_elementwise, converters_manipulate, converters_math, converters_nn
from .attrs import schema_defaults
from .common import call
from .context import Context, OnnxNode
from .converters_quant import convert_dequantize, convert_quantize, dequantized, quantized

MS = "com.microsoft"
# the families the float twins come from (not opset.converter_table: that one lists this one)
_FLOAT_FAMILIES = (converters_elementwise, converters_manipulate, converters_math,
                   converters_nn)


def standard(g: Context, node: OnnxNode, op_type: str, inputs: list, attrs: dict,
             opset: int = 21):
    """The standard ONNX op ``op_type`` (at ``opset``) on float ``inputs``, through its own
    converter; ``attrs`` over the schema's defaults."""
    versions = next(f.CONVERTERS[op_type] for f in _FLOAT_FAMILIES if op_type in f.CONVERTERS)
    convert = versions[max(v for v in versions if v <= opset)]
    merged = {**schema_defaults(op_type, opset), **attrs}
    return convert(g, OnnxNode(op_type, node.name, "", opset, inputs, merged, 1))


def _given(node: OnnxNode, *names) -> dict:
    return {k: node.attrs[k] for k in names if node.attrs.get(k) is not None}


# --------------------------------------------------------------------------------------------
# Elementwise.

def _binary(op_type: str):
    def convert(g: Context, node: OnnxNode):
        a, sa, za, b, sb, zb, sc, zc = (node.inputs + [None] * 8)[:8]
        y = standard(g, node, op_type, [dequantized(g, node, a, sa, za),
                                        dequantized(g, node, b, sb, zb)], {})
        return quantized(g, node, y, sc, zc, a)
    return convert


def _unary(op_type: str, attrs=lambda node: {}):
    def convert(g: Context, node: OnnxNode):
        x, sx, zx, sy, zy = (node.inputs + [None] * 5)[:5]
        y = standard(g, node, op_type, [dequantized(g, node, x, sx, zx)], attrs(node))
        return quantized(g, node, y, sy, zy, x)
    return convert


def convert_qlinear_softmax(g: Context, node: OnnxNode):
    """``opset`` (required) is the opset of the Softmax it replaced: below 13 the input is
    coerced to 2-D at ``axis`` (default 1 there), from 13 the softmax runs along ``axis``
    (default -1)."""
    x, sx, zx, sy, zy = (node.inputs + [None] * 5)[:5]
    version = int(node.attrs.get("opset") or 13)
    axis = node.attrs.get("axis")
    attrs = {} if axis is None else {"axis": int(axis)}
    y = standard(g, node, "Softmax", [dequantized(g, node, x, sx, zx)], attrs,
                 1 if version < 13 else 13)
    return quantized(g, node, y, sy, zy, x)


def convert_qlinear_where(g: Context, node: OnnxNode):
    cond, x, sx, zx, y, sy, zy, sz, zz = (node.inputs + [None] * 9)[:9]
    out = standard(g, node, "Where", [cond, dequantized(g, node, x, sx, zx),
                                      dequantized(g, node, y, sy, zy)], {}, 16)
    return quantized(g, node, out, sz, zz, x)


def convert_qlinear_concat(g: Context, node: OnnxNode):
    """Inputs: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input."""
    sy, zy, *rest = node.inputs
    if len(rest) % 3 or not rest:
        raise node.unsupported("QLinearConcat takes (X, X_scale, X_zero_point) triples "
                               "after Y_scale and Y_zero_point")
    triples = [rest[k:k + 3] for k in range(0, len(rest), 3)]
    parts = [dequantized(g, node, x, s, z) for x, s, z in triples]
    y = standard(g, node, "Concat", parts, {"axis": int(node.attrs["axis"])}, 13)
    return quantized(g, node, y, sy, zy, triples[0][0])


# --------------------------------------------------------------------------------------------
# Pools and reductions.

def _channels_first(g: Context, x, rank: int):
    return g.emit(call("permute_dims", x, [0, rank - 1, *range(1, rank - 1)]))


def _channels_last(g: Context, x, rank: int):
    return g.emit(call("permute_dims", x, [0, *range(2, rank), 1]))


def _pool(op_type: str, names: tuple):
    """QLinearGlobalAveragePool / QLinearAveragePool; ``channels_last=1`` is NHWC."""
    def convert(g: Context, node: OnnxNode):
        x, sx, zx, sy, zy = (node.inputs + [None] * 5)[:5]
        f = dequantized(g, node, x, sx, zx)
        last, rank = bool(node.attrs.get("channels_last")), g.ndim(x)
        if last:
            f = _channels_first(g, f, rank)
        y = standard(g, node, op_type, [f], _given(node, *names), 19)
        if last:
            y = _channels_last(g, y, rank)
        return quantized(g, node, y, sy, zy, x)
    return convert


def convert_qlinear_reduce_mean(g: Context, node: OnnxNode):
    x, sx, zx, sy, zy = (node.inputs + [None] * 5)[:5]
    axes = node.attrs.get("axes")
    if axes is None:
        raise node.unsupported("QLinearReduceMean needs its axes attribute")
    y = call("mean", dequantized(g, node, x, sx, zx), [int(a) for a in axes],
             bool(node.attrs.get("keepdims", 1)))
    return quantized(g, node, g.emit(y), sy, zy, x)


# --------------------------------------------------------------------------------------------
# QGemm.

def convert_qgemm(g: Context, node: OnnxNode):
    """``Y = alpha * A' B' + C``: A per tensor, B per tensor or per output column (its
    ``b_scale`` of N values), C an int32 bias of scale ``a_scale * b_scale`` and zero point
    0; Y quantized when ``y_scale`` is given, float otherwise."""
    a, sa, za, b, sb, zb, c, sy, zy = (node.inputs + [None] * 9)[:9]
    trans_b = int(node.attrs.get("transB") or 0)
    fa = dequantized(g, node, a, sa, za)
    fb = dequantized(g, node, b, sb, zb, axis=0 if trans_b else 1)
    inputs = [fa, fb]
    if c is not None:
        scale = g.emit(call("multiply", call("astype", sa, "float32"),
                            call("astype", sb, "float32")))
        inputs.append(g.emit(call("multiply", call("astype", c, "float32"), scale)))
    y = standard(g, node, "Gemm", inputs,
                 {"alpha": float(node.attrs.get("alpha") or 1.0), "beta": 1.0,
                  "transA": int(node.attrs.get("transA") or 0), "transB": trans_b}, 13)
    return y if sy is None else quantized(g, node, y, sy, zy, a)


def _standard_qdq(convert):
    """com.microsoft's QuantizeLinear / DequantizeLinear (older exporters' per-axis and
    16-bit forms): the standard converter, with the standard attributes."""
    def run(g: Context, node: OnnxNode):
        attrs = {"axis": node.attrs.get("axis", 1), "block_size": 0, "saturate": 1}
        return convert(g, OnnxNode(node.op_type, node.name, "", 21, node.inputs, attrs, 1))
    return run


CONVERTERS = {
    f"{MS}:QLinearAdd": {1: _binary("Add")},
    f"{MS}:QLinearMul": {1: _binary("Mul")},
    f"{MS}:QLinearSigmoid": {1: _unary("Sigmoid")},
    f"{MS}:QLinearLeakyRelu": {1: _unary(
        "LeakyRelu", lambda node: {"alpha": float(node.attrs.get("alpha", 0.01))})},
    f"{MS}:QLinearSoftmax": {1: convert_qlinear_softmax},
    f"{MS}:QLinearWhere": {1: convert_qlinear_where},
    f"{MS}:QLinearConcat": {1: convert_qlinear_concat},
    f"{MS}:QLinearGlobalAveragePool": {1: _pool("GlobalAveragePool", ())},
    f"{MS}:QLinearAveragePool": {1: _pool("AveragePool", (
        "auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"))},
    f"{MS}:QLinearReduceMean": {1: convert_qlinear_reduce_mean},
    f"{MS}:QGemm": {1: convert_qgemm},
    f"{MS}:QuantizeLinear": {1: _standard_qdq(convert_quantize)},
    f"{MS}:DequantizeLinear": {1: _standard_qdq(convert_dequantize)},
}
