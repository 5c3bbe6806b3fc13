"""Elementwise ONNX ops: math, comparisons, logic, activations, casts.

One-to-one ops are rows (``UNARY``, ``BINARY``); the rest are small decompositions onto Relax
ops. ``CONVERTERS`` maps op type -> {since_opset: converter}.
"""

from __future__ import annotations

import numpy as np

from msc import relax

from .common import call, elementwise, scalar, unary
from .context import Context, OnnxNode
from .dtypes import relax_dtype

# ONNX op -> Relax op, one input.
UNARY = {
    "Abs": "abs", "Acos": "acos", "Acosh": "acosh", "Asin": "asin", "Asinh": "asinh",
    "Atan": "atan", "Atanh": "atanh", "BitwiseNot": "bitwise_not", "Ceil": "ceil",
    "Cos": "cos", "Cosh": "cosh", "Erf": "erf", "Exp": "exp", "Floor": "floor",
    "IsNaN": "isnan", "Log": "log", "Neg": "negative", "Not": "logical_not",
    "Relu": "nn.relu", "Round": "round", "Sigmoid": "sigmoid", "Sign": "sign", "Sin": "sin",
    "Sinh": "sinh", "Sqrt": "sqrt", "Tan": "tan", "Tanh": "tanh",
}
# ONNX op -> Relax op, two (or, for Sum/Max/Min, any number of) broadcasting inputs.
BINARY = {
    "Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide",
    "Equal": "equal", "Less": "less", "LessOrEqual": "less_equal", "Greater": "greater",
    "GreaterOrEqual": "greater_equal", "And": "logical_and", "Or": "logical_or",
    "Xor": "logical_xor", "BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or",
    "BitwiseXor": "bitwise_xor", "Sum": "add", "Max": "maximum", "Min": "minimum",
}


# --------------------------------------------------------------------------------------------
# Arithmetic.

def convert_pow(g: Context, node: OnnxNode):
    x, y = node.inputs[:2]
    if g.dtype(y) != g.dtype(x):
        y = g.emit(call("astype", y, g.dtype(x)))
    return g.emit(call("power", x, y))


def convert_mod(g: Context, node: OnnxNode):
    op = "mod" if node.attrs["fmod"] else "floor_mod"
    return g.emit(call(op, *node.inputs[:2]))


def convert_bit_shift(g: Context, node: OnnxNode):
    op = "left_shift" if node.attrs["direction"] == "LEFT" else "right_shift"
    return g.emit(call(op, *node.inputs[:2]))


def convert_mean(g: Context, node: OnnxNode):
    total = elementwise("add")(g, node)
    count = sum(x is not None for x in node.inputs)
    return g.emit(call("divide", total, scalar(g, count, total)))


def convert_reciprocal(g: Context, node: OnnxNode):
    x = node.inputs[0]
    return g.emit(call("divide", scalar(g, 1, x), x))


def convert_is_inf(g: Context, node: OnnxNode):
    x = node.inputs[0]
    out = g.emit(call("isinf", x))
    pos, neg = node.attrs["detect_positive"], node.attrs["detect_negative"]
    if pos and neg:
        return out
    sign = call("greater" if pos else "less", x, scalar(g, 0, x))
    return g.emit(call("logical_and", out, sign))


def convert_clip_v1(g: Context, node: OnnxNode):
    """Clip-1/6: bounds as attributes."""
    return _clip(g, node.inputs[0], node.attrs["min"], node.attrs["max"])


def convert_clip(g: Context, node: OnnxNode):
    """Clip-11+: optional bounds as inputs (tensors when not constant)."""
    x, lo, hi = node.inputs[:3]
    if any(b is not None and g.value(b) is None for b in (lo, hi)):
        return _clip_tensors(g, x, lo, hi)
    return _clip(g, x, *(None if b is None else g.value(b) for b in (lo, hi)))


def _clip(g: Context, x, lo, hi):
    info = np.finfo if np.dtype(g.dtype(x)).kind == "f" else np.iinfo
    lo = info(g.dtype(x)).min if lo is None else lo
    hi = info(g.dtype(x)).max if hi is None else hi
    return g.emit(call("clip", x, relax.PrimValue(_py(lo)), relax.PrimValue(_py(hi))))


def _py(value):
    return np.asarray(value).item()


def _clip_tensors(g: Context, x, lo, hi):
    if lo is not None:
        x = g.emit(call("maximum", x, lo))
    return x if hi is None else g.emit(call("minimum", x, hi))


def convert_where(g: Context, node: OnnxNode):
    return g.emit(call("where", *node.inputs[:3]))


# --------------------------------------------------------------------------------------------
# Activations without a Relax op of the same semantics.

def _where_positive(g: Context, x, neg):
    return g.emit(call("where", call("greater", x, scalar(g, 0, x)), x, neg))


def _expm1_scaled(g: Context, x, alpha, inner_scale=1.0):
    """alpha * (exp(x * inner_scale) - 1)."""
    y = x if inner_scale == 1.0 else call("multiply", x, scalar(g, inner_scale, x))
    e = call("subtract", call("exp", y), scalar(g, 1, x))
    return call("multiply", e, scalar(g, alpha, x))


def convert_elu(g: Context, node: OnnxNode):
    x = node.inputs[0]
    return _where_positive(g, x, _expm1_scaled(g, x, node.attrs["alpha"]))


def convert_celu(g: Context, node: OnnxNode):
    x, alpha = node.inputs[0], node.attrs["alpha"]
    neg = call("minimum", scalar(g, 0, x), _expm1_scaled(g, x, alpha, 1.0 / alpha))
    return g.emit(call("add", call("nn.relu", x), neg))


def convert_selu(g: Context, node: OnnxNode):
    x = node.inputs[0]
    elu = _where_positive(g, x, _expm1_scaled(g, x, node.attrs["alpha"]))
    return g.emit(call("multiply", elu, scalar(g, node.attrs["gamma"], x)))


def convert_thresholded_relu(g: Context, node: OnnxNode):
    x = node.inputs[0]
    keep = call("greater", x, scalar(g, node.attrs["alpha"], x))
    return g.emit(call("where", keep, x, scalar(g, 0, x)))


def _hard_sigmoid(g: Context, x, alpha: float, beta: float):
    y = call("add", call("multiply", x, scalar(g, alpha, x)), scalar(g, beta, x))
    return g.emit(call("clip", y, relax.PrimValue(0.0), relax.PrimValue(1.0)))


def convert_hard_sigmoid(g: Context, node: OnnxNode):
    return _hard_sigmoid(g, node.inputs[0], node.attrs["alpha"], node.attrs["beta"])


def convert_hard_swish(g: Context, node: OnnxNode):
    x = node.inputs[0]
    return g.emit(call("multiply", x, _hard_sigmoid(g, x, 1.0 / 6, 0.5)))


def convert_leaky_relu(g: Context, node: OnnxNode):
    return g.emit(call("nn.leakyrelu", node.inputs[0], alpha=node.attrs["alpha"]))


def convert_prelu(g: Context, node: OnnxNode):
    x, slope = node.inputs[:2]
    return _where_positive(g, x, call("multiply", x, slope))


def convert_softplus(g: Context, node: OnnxNode):
    x = node.inputs[0]
    return g.emit(call("log", call("add", call("exp", x), scalar(g, 1, x))))


def convert_softsign(g: Context, node: OnnxNode):
    x = node.inputs[0]
    return g.emit(call("divide", x, call("add", call("abs", x), scalar(g, 1, x))))


def convert_mish(g: Context, node: OnnxNode):
    x = node.inputs[0]
    softplus = call("log", call("add", call("exp", x), scalar(g, 1, x)))
    return g.emit(call("multiply", x, call("tanh", softplus)))


def convert_gelu(g: Context, node: OnnxNode):
    op = "nn.gelu_tanh" if node.attrs["approximate"] == "tanh" else "nn.gelu"
    return g.emit(call(op, node.inputs[0]))


def convert_swish(g: Context, node: OnnxNode):
    x = node.inputs[0]
    scaled = call("multiply", x, scalar(g, node.attrs["alpha"], x))
    return g.emit(call("multiply", x, call("sigmoid", scaled)))


def convert_shrink(g: Context, node: OnnxNode):
    x, bias, lambd = node.inputs[0], node.attrs["bias"], node.attrs["lambd"]
    low = call("less", x, scalar(g, -lambd, x))
    high = call("greater", x, scalar(g, lambd, x))
    inner = call("where", high, call("subtract", x, scalar(g, bias, x)), scalar(g, 0, x))
    return g.emit(call("where", low, call("add", x, scalar(g, bias, x)), inner))


# --------------------------------------------------------------------------------------------
# Casts and identity.

_SATURATING = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")


def _cast(g: Context, node: OnnxNode, x, dtype: str):
    """astype; casts to float8 saturate (clip to the finite range) unless saturate=0."""
    if dtype in _SATURATING and node.attrs.get("saturate", 1) and \
            g.dtype(x).startswith(("float", "bfloat")):
        import ml_dtypes

        info = ml_dtypes.finfo(getattr(ml_dtypes, dtype))
        x = call("clip", x, relax.PrimValue(float(info.min)), relax.PrimValue(float(info.max)))
    return g.emit(call("astype", x, dtype))


def convert_cast(g: Context, node: OnnxNode):
    return _cast(g, node, node.inputs[0], relax_dtype(node.attrs["to"]))


def convert_bitcast(g: Context, node: OnnxNode):
    """BitCast: the same bytes as another dtype of the same width."""
    return g.emit(call("reinterpret", node.inputs[0], relax_dtype(node.attrs["to"])))


def convert_binarizer(g: Context, node: OnnxNode):
    """ai.onnx.ml Binarizer: 1 where x > threshold, else 0, in x's dtype."""
    x = node.inputs[0]
    above = call("greater", x, scalar(g, node.attrs["threshold"] or 0.0, x))
    return g.emit(call("astype", above, g.dtype(x)))


def convert_array_feature_extractor(g: Context, node: OnnxNode):
    """ai.onnx.ml ArrayFeatureExtractor: the given indices of the last axis."""
    x, indices = node.inputs[:2]
    flat = g.emit(call("reshape", indices, [-1]))
    return g.emit(call("take", x, flat, g.ndim(x) - 1))


def convert_cast_like(g: Context, node: OnnxNode):
    x, like = node.inputs[:2]
    return _cast(g, node, x, g.dtype(like))


def convert_identity(g: Context, node: OnnxNode):
    return node.inputs[0]


CONVERTERS = {
    **{op: {1: unary(name)} for op, name in UNARY.items()},
    **{op: {1: elementwise(name)} for op, name in BINARY.items()},
    "Pow": {1: convert_pow}, "Mod": {10: convert_mod}, "BitShift": {11: convert_bit_shift},
    "Mean": {1: convert_mean}, "Reciprocal": {1: convert_reciprocal},
    "IsInf": {10: convert_is_inf}, "Clip": {1: convert_clip_v1, 11: convert_clip},
    "Where": {9: convert_where},
    "Elu": {1: convert_elu}, "Celu": {12: convert_celu}, "Selu": {1: convert_selu},
    "ThresholdedRelu": {10: convert_thresholded_relu},
    "HardSigmoid": {1: convert_hard_sigmoid}, "HardSwish": {14: convert_hard_swish},
    "LeakyRelu": {1: convert_leaky_relu}, "PRelu": {1: convert_prelu},
    "Softplus": {1: convert_softplus}, "Softsign": {1: convert_softsign},
    "Mish": {18: convert_mish}, "Gelu": {20: convert_gelu}, "Swish": {24: convert_swish},
    "Shrink": {9: convert_shrink},
    "Cast": {1: convert_cast}, "CastLike": {15: convert_cast_like},
    "BitCast": {26: convert_bitcast}, "ai.onnx.ml:Binarizer": {1: convert_binarizer},
    "ai.onnx.ml:ArrayFeatureExtractor": {1: convert_array_feature_extractor},
    "Identity": {1: convert_identity},
}
