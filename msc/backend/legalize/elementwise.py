"""Elementwise ops: unary math, broadcasting binary and compare ops, astype, clip, where and
the activations. Each is one stage, written as one fused expression (gelu is one loop, not
TVM's five), so the compiled loop reads its inputs once and vectorizes."""

from __future__ import annotations

import functools
import math

import numpy as np

from ...relax.op.registry import ops_in, ops_with
from ...tir import expr as E
from . import te
from .common import attrs, broadcast, float_of, inputs, op_name, output, rule
from .te import cast, const, is_float


def _call(name: str, *args: E.PrimExpr) -> E.PrimExpr:
    return E.PrimCall(name, list(args), args[0].dtype)


def _bin(kind: str):
    return lambda a, b: E.BinaryOp(kind, a, b)


def _sign(x):
    one, zero = const(1, x.dtype), const(0, x.dtype)
    return te.select(E.BinaryOp("GT", x, zero), one,
                     te.select(E.BinaryOp("LT", x, zero), const(-1, x.dtype), zero))


# name -> fn(x); inputs of FLOAT_MATH ops are cast to float32 first when they are integers.
UNARY = {
    "abs": lambda x: _call("fabs" if is_float(x.dtype) else "abs", x),
    "negative": lambda x: E.BinaryOp("Sub", const(0, x.dtype), x),
    "square": lambda x: E.BinaryOp("Mul", x, x),
    "sign": _sign,
    "logical_not": lambda x: E.Not(cast(x, "bool")),
    "bitwise_not": lambda x: _call("bitwise_not", x),
    "isnan": lambda x: E.PrimCall("isnan", [x], "bool"),
    "isinf": lambda x: E.PrimCall("isinf", [x], "bool"),
    "isfinite": lambda x: E.PrimCall("isfinite", [x], "bool"),
}
for _name in sorted(ops_in("unary") - UNARY.keys()):  # the rest are T intrinsics of that name
    UNARY[_name] = functools.partial(_call, _name)
FLOAT_MATH = ops_with("float_only")  # the op trait: integer inputs are computed in float32


def _power(a, b):
    """T.pow in the inputs' dtype: integers are exact with numpy's wrap-around; a negative
    integer exponent gives 1 / a**-b truncated (numpy raises, see tir/ops.py int_pow)."""
    return _call("pow", a, b)


def _log_add_exp(a, b):
    big = E.BinaryOp("Max", a, b)
    gap = _call("fabs", E.BinaryOp("Sub", a, b))
    return E.BinaryOp("Add", big, _call("log1p", _call("exp", E.BinaryOp("Sub", const(0, a.dtype),
                                                                          gap))))


BINARY = {
    "add": _bin("Add"), "subtract": _bin("Sub"), "multiply": _bin("Mul"),
    "divide": _bin("Div"), "floor_divide": _bin("FloorDiv"), "floor_mod": _bin("FloorMod"),
    "mod": _bin("Mod"), "maximum": _bin("Max"), "minimum": _bin("Min"), "power": _power,
    "bitwise_and": lambda a, b: _call("bitwise_and", a, b),
    "bitwise_or": lambda a, b: _call("bitwise_or", a, b),
    "bitwise_xor": lambda a, b: _call("bitwise_xor", a, b),
    "left_shift": lambda a, b: _call("shift_left", a, b),
    "right_shift": lambda a, b: _call("shift_right", a, b),
    "log_add_exp": _log_add_exp,
    "equal": _bin("EQ"), "not_equal": _bin("NE"), "less": _bin("LT"),
    "less_equal": _bin("LE"), "greater": _bin("GT"), "greater_equal": _bin("GE"),
    "logical_and": lambda a, b: E.BinaryOp("And", cast(a, "bool"), cast(b, "bool")),
    "logical_or": lambda a, b: E.BinaryOp("Or", cast(a, "bool"), cast(b, "bool")),
    "logical_xor": lambda a, b: E.BinaryOp("NE", cast(a, "bool"), cast(b, "bool")),
}


def _unary_rule(call):
    b, (x,) = inputs(call)
    fn, out = UNARY[op_name(call)], output(call)
    float_math = op_name(call) in FLOAT_MATH and not is_float(x.dtype)

    def value(*i):
        v = x[i]
        return fn(cast(v, "float32") if float_math else v)
    y = b.compute(out.values, value, "compute", dtype=out.dtype, axis="i")
    return b.prim_func([y], op_name(call))


def _binary_rule(call):
    b, (x1, x2) = inputs(call)
    name, out = op_name(call), output(call)
    fn = BINARY[name]
    dims = out.values
    y = b.compute(dims, lambda *i: fn(broadcast(x1, i, dims), broadcast(x2, i, dims)),
                  "T_" + name, dtype=out.dtype)
    return b.prim_func([y], name)


rule(*UNARY)(_unary_rule)
rule(*BINARY)(_binary_rule)


def _unary_expr(fn, name: str):
    """A rule for an activation given as ``fn(x, attrs) -> expr`` (float32 math for halves)."""
    def legalize(call):
        b, (x, *rest) = inputs(call)
        out, a = output(call), attrs(call)
        y = b.compute(out.values, lambda *i: fn(x[i], a, *(r for r in rest), i), "compute",
                      dtype=out.dtype, axis="i")
        return b.prim_func([y], name)
    return legalize


def _f(value: float, like: E.PrimExpr) -> E.PrimExpr:
    return const(value, like.dtype)


def _gelu(x, a, i):
    inner = E.BinaryOp("Mul", x, _f(1 / math.sqrt(2), x))
    half = E.BinaryOp("Mul", x, _f(0.5, x))
    return E.BinaryOp("Mul", half, E.BinaryOp("Add", _f(1.0, x), _call("erf", inner)))


def _gelu_tanh(x, a, i):
    cube = E.BinaryOp("Mul", E.BinaryOp("Mul", x, x), x)
    inner = E.BinaryOp("Add", x, E.BinaryOp("Mul", _f(0.044715, x), cube))
    t = _call("tanh", E.BinaryOp("Mul", _f(math.sqrt(2 / math.pi), x), inner))
    return E.BinaryOp("Mul", E.BinaryOp("Mul", x, _f(0.5, x)), E.BinaryOp("Add", _f(1.0, x), t))


def _selu(x, a, i):
    alpha, scale = 1.6732632423543772, 1.0507009873554805
    neg = E.BinaryOp("Mul", _f(alpha, x), E.BinaryOp("Sub", _call("exp", x), _f(1.0, x)))
    return E.BinaryOp("Mul", _f(scale, x), te.select(E.BinaryOp("GT", x, _f(0, x)), x, neg))


def _softplus(x, a, i):
    beta, threshold = float(a["beta"]), float(a["threshold"])
    bx = E.BinaryOp("Mul", x, _f(beta, x))
    # log(1 + e^z) = max(z, 0) + log1p(e^-|z|): no overflow, no cancellation
    soft = E.BinaryOp("Add", E.BinaryOp("Max", bx, _f(0, x)),
                      _call("log1p", _call("exp", E.BinaryOp("Sub", _f(0, x), _call("fabs", bx)))))
    soft = E.BinaryOp("Div", soft, _f(beta, x)) if beta != 1.0 else soft
    return te.select(E.BinaryOp("GT", bx, _f(threshold, x)), x, soft)


def _prelu(x, a, alpha, i):
    axis = int(a["axis"]) % len(i)
    slope = alpha[(i[axis],)] if alpha.ndim == 1 else broadcast(alpha, i)
    return te.select(E.BinaryOp("GT", x, _f(0, x)), x, E.BinaryOp("Mul", x, cast(slope, x.dtype)))


ACTIVATIONS = {
    "nn.relu": lambda x, a, i: E.BinaryOp("Max", x, _f(0, x)),
    "nn.gelu": _gelu,
    "nn.gelu_tanh": _gelu_tanh,
    "nn.silu": lambda x, a, i: E.BinaryOp("Mul", x, _call("sigmoid", x)),
    "nn.selu": _selu,
    "nn.softplus": _softplus,
    "nn.leakyrelu": lambda x, a, i: te.select(
        E.BinaryOp("GT", x, _f(0, x)), x, E.BinaryOp("Mul", x, _f(float(a["alpha"]),
                                                                   x))),
    "nn.prelu": _prelu,
}
for _name, _fn in ACTIVATIONS.items():
    rule(_name)(_unary_expr(_fn, _name.removeprefix("nn.")))


@rule("astype")
def _astype(call):
    b, (x,) = inputs(call)
    out = output(call)
    y = b.compute(out.values, lambda *i: cast(x[i], out.dtype), "compute", axis="i")
    return b.prim_func([y], "cast")


def _bound(value, dtype: str) -> E.PrimExpr:
    """A clip bound as a constant of the data's dtype. numpy clips in a wider type and casts
    back, so an integer bound outside the dtype's range bounds nothing (int8 data clipped to
    1000 keeps its values, it does not meet 1000 wrapped to -24)."""
    if is_float(dtype) or dtype == "bool":
        return const(value, dtype)
    info = np.iinfo(dtype)
    return const(int(max(min(value, info.max), info.min)), dtype)


@rule("clip")
def _clip(call):
    from .create import const_arg

    b, (x,) = inputs(call)
    lo, hi = (_bound(const_arg(call, k), x.dtype) for k in (1, 2))
    out = output(call)
    # numpy's order: min(max(x, lo), hi), so hi wins when lo > hi
    y = b.compute(out.values, lambda *i: E.BinaryOp("Min", E.BinaryOp("Max", x[i], lo), hi),
                  "compute", axis="i")
    return b.prim_func([y], "clip")


@rule("where")
def _where(call):
    b, (c, x1, x2) = inputs(call)
    out = output(call)
    dims = out.values
    y = b.compute(dims, lambda *i: te.select(cast(broadcast(c, i, dims), "bool"),
                                             cast(broadcast(x1, i, dims), out.dtype),
                                             cast(broadcast(x2, i, dims), out.dtype)),
                  "T_where")
    return b.prim_func([y], "where")


@rule("nn.bias_add")
def _bias_add(call):
    b, (x, bias) = inputs(call)
    out = output(call)
    axis = int(attrs(call)["axis"]) % x.ndim
    y = b.compute(out.values, lambda *i: E.BinaryOp("Add", x[i], bias[(i[axis],)]), "T_add")
    return b.prim_func([y], "bias_add")


@rule("nn.dropout")
def _dropout(call):
    """Inference: the identity, and a mask of ones (TVM returns both)."""
    b, (x,) = inputs(call)
    out = output(call)
    y = b.compute(out.values, lambda *i: x[i], "T_dropout")
    mask = b.compute(out.values, lambda *i: const(1, out.dtype), "T_mask")
    return b.prim_func([y, mask], "dropout")


def _qparam(t, i, axis: int):
    """A quantization scale / zero point: per channel along ``axis``, or one value."""
    if t.ndim == 1 and not (isinstance(t.shape[0], E.IntImm) and t.shape[0].value == 1):
        return cast(t[(i[axis],)], "float64")
    return cast(t[(te.idx(0),) * t.ndim], "float64")


@rule("quantize")
def _quantize(call):
    """clip(round(x / scale) + zero_point), dividing in the input's precision (float32 for
    float32 and 16-bit inputs) as the reference and ONNX do: a float64 quotient can miss a .5
    tie (DynamicQuantizeLinear: 0.5 / (5 / 255) is 25.5 in float32, 25.4999 in float64)."""
    b, (x, scale, zero) = inputs(call)
    out, a = output(call), attrs(call)
    axis = int(a["axis"]) % x.ndim
    info = np.iinfo(out.dtype)
    dt = "float64" if x.dtype == "float64" else "float32"

    def value(*i):
        q = E.BinaryOp("Div", cast(x[i], dt), cast(_qparam(scale, i, axis), dt))
        q = E.BinaryOp("Add", cast(_call("round", q), "float64"), _qparam(zero, i, axis))
        q = E.BinaryOp("Max", E.BinaryOp("Min", q, const(info.max, "float64")),
                       const(info.min, "float64"))
        return cast(q, out.dtype)
    y = b.compute(out.values, value, "compute", axis="i")
    return b.prim_func([y], "quantize")


@rule("dequantize")
def _dequantize(call):
    b, (x, scale, zero) = inputs(call)
    out, a = output(call), attrs(call)
    axis = int(a["axis"]) % x.ndim
    y = b.compute(out.values, lambda *i: cast(E.BinaryOp(
        "Mul", E.BinaryOp("Sub", cast(x[i], "float64"), _qparam(zero, i, axis)),
        _qparam(scale, i, axis)), out.dtype), "compute", axis="i")
    return b.prim_func([y], "dequantize")


rule("msc.gelu")(_unary_expr(_gelu, "gelu"))

__all__ = ["ACTIVATIONS", "BINARY", "UNARY", "float_of"]
