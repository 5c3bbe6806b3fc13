"""Elementwise ops: unary math, binary arithmetic with broadcasting, comparisons, logic."""

from __future__ import annotations

from .infer import FLOAT_DTYPES, broadcast_sinfo, common_dtype
from .registry import Arg, register

UNARY = (
    "abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "bitwise_not", "ceil", "cos",
    "cosh", "erf", "exp", "floor", "log", "negative", "round", "rsqrt", "sigmoid", "sign", "sin",
    "sinh", "square", "sqrt", "tan", "tanh", "trunc", "logical_not",
)
# Unary ops whose result is bool.
UNARY_CHECK = ("isfinite", "isinf", "isnan")
# Unary ops that only make sense on floats (TVM rejects integer inputs for these).
FLOAT_ONLY = ("acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "erf", "exp",
              "log", "rsqrt", "sigmoid", "sin", "sinh", "sqrt", "tan", "tanh")

ARITH = (
    "add", "subtract", "multiply", "divide", "floor_divide", "floor_mod", "mod", "power",
    "maximum", "minimum", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
    "right_shift", "log_add_exp",
)
# Binary ops whose two arguments may be swapped.
COMMUTATIVE = ("add", "multiply", "maximum", "minimum", "bitwise_and", "bitwise_or",
               "bitwise_xor", "log_add_exp", "equal", "not_equal", "logical_and", "logical_or",
               "logical_xor")
COMPARE = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
           "logical_and", "logical_or", "logical_xor")


def unary_infer(ctx):
    data = ctx.tensor(0)
    if ctx.op_def.float_only and data.dtype not in FLOAT_DTYPES + ("void",):
        raise ctx.error(f"needs a float input, got {data.dtype}", 0,
                        hint="cast the input with R.astype(x, 'float32') first")
    return data


def check_infer(ctx):
    data = ctx.tensor(0)
    return type(data)(data.shape, "bool", data.ndim)


def binary_infer(ctx):
    a, b = ctx.tensor(0), ctx.tensor(1)
    return broadcast_sinfo(ctx, [a, b], common_dtype(ctx, [a, b]))


def compare_infer(ctx):
    a, b = ctx.tensor(0), ctx.tensor(1)
    common_dtype(ctx, [a, b])
    return broadcast_sinfo(ctx, [a, b], "bool")


for _name in UNARY:
    register(_name, [Arg("x")], infer=unary_infer, family="unary",
             float_only=_name in FLOAT_ONLY)
for _name in UNARY_CHECK:
    register(_name, [Arg("x")], infer=check_infer, family="unary")
for _name in ARITH:
    register(_name, [Arg("x1"), Arg("x2")], infer=binary_infer, family="binary",
             commutative=_name in COMMUTATIVE)
for _name in COMPARE:
    register(_name, [Arg("x1"), Arg("x2")], infer=compare_infer, family="compare",
             commutative=_name in COMMUTATIVE)
