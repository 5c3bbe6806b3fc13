"""Elementwise converters: unary math, activations, binary arithmetic and comparisons.

Rows of ``UNARY`` and ``BINARY`` are one-to-one (torch name -> Relax op); the functions below
cover the ones that take extra arguments or expand into a few Relax calls::

    UNARY["exp"]          # "exp": torch.exp(x) -> R.exp(x)
    BINARY["sub"]         # ("subtract", operator.sub) for tensors / plain Python values
"""

from __future__ import annotations

import functools
import math
import operator

from msc import relax
from msc.relax.op.registry import make_call
from msc.tir import expr as tir

from .common import dtype_of, is_tensor, ndim_of, promote, unsupported

__all__ = ["BINARY", "FUNCTIONS", "UNARY"]

FLOATS = ("float16", "bfloat16", "float32", "float64")

# torch name -> Relax op (one input, same semantics).
UNARY = {
    "abs": "abs", "acos": "acos", "acosh": "acosh", "asin": "asin", "asinh": "asinh",
    "atan": "atan", "atanh": "atanh", "bitwise_not": "bitwise_not", "ceil": "ceil",
    "cos": "cos", "cosh": "cosh", "erf": "erf", "exp": "exp", "floor": "floor",
    "isfinite": "isfinite", "isinf": "isinf", "isnan": "isnan", "log": "log",
    "neg": "negative", "negative": "negative", "relu": "nn.relu", "selu": "nn.selu",
    "sigmoid": "sigmoid", "sign": "sign", "silu": "nn.silu", "sin": "sin", "sinh": "sinh",
    "square": "square", "tan": "tan", "tanh": "tanh", "trunc": "trunc",
}


def _python_max(*values):
    if any(isinstance(v, tir.PrimExpr) for v in values):
        return functools.reduce(tir.max, values)
    return max(*values)


def _python_min(*values):
    if any(isinstance(v, tir.PrimExpr) for v in values):
        return functools.reduce(tir.min, values)
    return min(*values)


# torch name -> (Relax op, the Python operator used when both operands are plain values).
BINARY = {
    "add": ("add", operator.add), "iadd": ("add", operator.add),
    "sub": ("subtract", operator.sub), "isub": ("subtract", operator.sub),
    "mul": ("multiply", operator.mul), "imul": ("multiply", operator.mul),
    "floordiv": ("floor_divide", operator.floordiv),
    "mod": ("floor_mod", operator.mod), "remainder": ("floor_mod", operator.mod),
    "pow": ("power", operator.pow),
    "eq": ("equal", operator.eq), "ne": ("not_equal", operator.ne),
    "lt": ("less", operator.lt), "le": ("less_equal", operator.le),
    "gt": ("greater", operator.gt), "ge": ("greater_equal", operator.ge),
    "and_": ("bitwise_and", operator.and_), "__and__": ("bitwise_and", operator.and_),
    "or_": ("bitwise_or", operator.or_), "__or__": ("bitwise_or", operator.or_),
    "xor": ("bitwise_xor", operator.xor), "__xor__": ("bitwise_xor", operator.xor),
    "bitwise_and": ("bitwise_and", operator.and_), "bitwise_or": ("bitwise_or", operator.or_),
    "bitwise_xor": ("bitwise_xor", operator.xor),
    "maximum": ("maximum", _python_max), "minimum": ("minimum", _python_min),
    "greater": ("greater", operator.gt),
    "less": ("less", operator.lt), "not_equal": ("not_equal", operator.ne),
    "greater_equal": ("greater_equal", operator.ge), "less_equal": ("less_equal", operator.le),
}


def emit_op(ctx, op_name: str, *args, **attrs):
    return ctx.emit(make_call(op_name, *args, **attrs))


# Python-level math on plain values (``math.sqrt(d)`` in a traced forward).
_PYTHON_UNARY = {"abs": abs, "neg": operator.neg, "negative": operator.neg}


def _python_unary(name: str, value):
    fn = _PYTHON_UNARY.get(name) or getattr(math, name, None)
    if fn is None:
        raise unsupported(f"{name} of the plain value {value!r}")
    return fn(value)


def _unary(op_name: str, name: str):
    def convert(ctx, input, *_, **__):
        if not is_tensor(input):
            return _python_unary(name, input)
        return emit_op(ctx, op_name, input)

    convert.__name__ = op_name.rsplit(".", 1)[-1]
    return convert


# --------------------------------------------------------------------------------------------
# Binary ops.

def operands(ctx, lhs, rhs):
    """Both operands as tensors of one dtype (torch's promotion); scalars become constants."""
    if is_tensor(lhs) and is_tensor(rhs):
        dtype = promote(dtype_of(lhs), dtype_of(rhs))
        return ctx.cast(lhs, dtype), ctx.cast(rhs, dtype)
    if is_tensor(lhs):
        rhs = ctx.tensor(rhs, lhs)
        return ctx.cast(lhs, dtype_of(rhs)), rhs
    lhs = ctx.tensor(lhs, rhs)
    return lhs, ctx.cast(rhs, dtype_of(lhs))


def binary(ctx, op_name: str, lhs, rhs):
    lhs, rhs = operands(ctx, lhs, rhs)
    return emit_op(ctx, op_name, lhs, rhs)


def _binary(op_name: str, python_op):
    def convert(ctx, input, other, *, alpha=1):
        if not is_tensor(input) and not is_tensor(other):
            return python_op(input, other)
        if alpha != 1:
            other = binary(ctx, "multiply", other, alpha)
        return binary(ctx, op_name, input, other)

    convert.__name__ = op_name
    return convert


def _logical(op_name: str):
    def convert(ctx, input, other):
        return emit_op(ctx, op_name, ctx.cast(input, "bool"), ctx.cast(ctx.tensor(other, input),
                                                                       "bool"))

    return convert


def logical_not(ctx, input):
    return emit_op(ctx, "logical_not", ctx.cast(input, "bool"))


def _as_float(ctx, x):
    return x if dtype_of(x) in FLOATS else ctx.cast(x, "float32")


def div(ctx, input, other, *, rounding_mode=None):
    if not is_tensor(input) and not is_tensor(other):
        return input / other if rounding_mode is None else input // other
    lhs, rhs = operands(ctx, input, other)
    if rounding_mode is None:
        return emit_op(ctx, "divide", _as_float(ctx, lhs), _as_float(ctx, rhs))
    if rounding_mode == "floor":
        return emit_op(ctx, "floor_divide", lhs, rhs)
    if dtype_of(lhs) in FLOATS:
        return emit_op(ctx, "trunc", ctx.emit(relax.op.divide(lhs, rhs)))
    return emit_op(ctx, "divide", lhs, rhs)  # integer divide truncates, as rounding "trunc"


def rsub(ctx, input, other, alpha=1):
    if alpha != 1:
        input = binary(ctx, "multiply", input, alpha)
    return binary(ctx, "subtract", other, input)


def threshold(ctx, input, threshold, value, inplace=False):
    """x where x > threshold, else value (``nn.Threshold``)."""
    above = binary(ctx, "greater", input, threshold)
    return ctx.emit(relax.op.where(above, input, relax.const(value, dtype_of(input))))


def addcmul(ctx, input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2 (ConvNeXt-V2's global response norm)."""
    product = binary(ctx, "multiply", tensor1, tensor2)
    return binary(ctx, "add", input, product if value == 1 else
                  binary(ctx, "multiply", product, value))


def addcdiv(ctx, input, tensor1, tensor2, *, value=1):
    quotient = div(ctx, tensor1, tensor2)
    return binary(ctx, "add", input, quotient if value == 1 else
                  binary(ctx, "multiply", quotient, value))


def aten_elu(ctx, input, alpha=1.0, scale=1.0, input_scale=1.0):
    """``aten.elu(self, alpha, scale, input_scale)``: scale * elu(x) with input_scale inside."""
    if input_scale != 1:
        input = binary(ctx, "multiply", input, input_scale)
    out = elu(ctx, input, alpha)
    return out if scale == 1 else binary(ctx, "multiply", out, scale)


def fmod(ctx, input, other):
    lhs, rhs = operands(ctx, input, other)
    return emit_op(ctx, "mod", lhs, rhs)


def pow_(ctx, input, exponent):
    if not is_tensor(input) and not is_tensor(exponent):
        return input ** exponent
    if is_tensor(input) and dtype_of(input) not in FLOATS and isinstance(exponent, float):
        input = ctx.cast(input, "float32")
    return binary(ctx, "power", input, exponent)


def max_(ctx, input, dim=None, keepdim=False, *rest):
    """``torch.max``: elementwise with a tensor, a reduction without, (values, indices) with
    a dim; Python ``max`` of plain values."""
    return _extreme(ctx, "max", "maximum", "argmax", _python_max, input, dim, keepdim, rest)


def min_(ctx, input, dim=None, keepdim=False, *rest):
    return _extreme(ctx, "min", "minimum", "argmin", _python_min, input, dim, keepdim, rest)


def _extreme(ctx, reduce, elementwise, arg, python_op, input, dim, keepdim, rest):
    if not is_tensor(input):
        values = [v for v in (input, dim, *rest) if v is not None]
        return python_op(*values) if len(values) > 1 else python_op(values[0])
    if is_tensor(dim):
        return binary(ctx, elementwise, input, dim)
    if dim is None:
        return emit_op(ctx, reduce, input)
    values = emit_op(ctx, reduce, input, dim, keepdim)
    indices = emit_op(ctx, arg, input, dim, keepdim)
    return relax.Tuple([values, indices])


def _dims(dim) -> list | None:
    if isinstance(dim, (list, tuple)):
        return list(dim) or None
    return None if dim is None else [dim]


def amax(ctx, input, dim=(), keepdim=False):
    return emit_op(ctx, "max", input, _dims(dim), keepdim)


def amin(ctx, input, dim=(), keepdim=False):
    return emit_op(ctx, "min", input, _dims(dim), keepdim)


# --------------------------------------------------------------------------------------------
# Activations and unary math with arguments.

def relu6(ctx, input, inplace=False):
    return emit_op(ctx, "clip", input, 0.0, 6.0)


def hardtanh(ctx, input, min_val=-1.0, max_val=1.0, inplace=False):
    return emit_op(ctx, "clip", input, min_val, max_val)


def clamp(ctx, input, min=None, max=None):
    """``torch.clamp``: scalar bounds become one clip; tensor bounds maximum/minimum."""
    low, high = -math.inf, math.inf
    if is_tensor(min):
        input = binary(ctx, "maximum", input, min)
    elif min is not None:
        low = min
    if is_tensor(max):
        input = binary(ctx, "minimum", input, max)
    elif max is not None:
        high = max
    if low == -math.inf and high == math.inf:
        return input
    return emit_op(ctx, "clip", input, low, high)


def clamp_min(ctx, input, min):
    return clamp(ctx, input, min=min)


def clamp_max(ctx, input, max):
    return clamp(ctx, input, max=max)


def gelu(ctx, input, approximate="none"):
    op_name = {"none": "nn.gelu", "tanh": "nn.gelu_tanh"}.get(approximate)
    if op_name is None:
        raise unsupported(f"gelu approximate={approximate!r}", hint="use 'none' or 'tanh'")
    return emit_op(ctx, op_name, input)


def leaky_relu(ctx, input, negative_slope=0.01, inplace=False):
    return emit_op(ctx, "nn.leakyrelu", input, negative_slope)


def elu(ctx, input, alpha=1.0, inplace=False):
    """alpha * (exp(x) - 1) for x < 0, x otherwise, as -alpha * relu(1 - exp(x)) + relu(x)."""
    dtype = dtype_of(input)
    one_minus = relax.op.subtract(relax.const(1, dtype), relax.op.exp(input))
    neg = relax.op.multiply(relax.const(-alpha, dtype), relax.op.nn.relu(one_minus))
    return ctx.emit(relax.op.add(neg, relax.op.nn.relu(input)))


def celu(ctx, input, alpha=1.0, inplace=False):
    dtype = dtype_of(input)
    scaled = relax.op.subtract(relax.op.exp(relax.op.divide(input, relax.const(alpha, dtype))),
                               relax.const(1, dtype))
    neg = relax.op.multiply(relax.const(alpha, dtype),
                            relax.op.minimum(relax.const(0, dtype), scaled))
    return ctx.emit(relax.op.add(neg, relax.op.nn.relu(input)))


def hardsigmoid(ctx, input, inplace=False):
    dtype = dtype_of(input)
    clipped = relax.op.clip(relax.op.add(input, relax.const(3, dtype)), 0, 6)
    return ctx.emit(relax.op.divide(clipped, relax.const(6, dtype)))


def hardswish(ctx, input, inplace=False):
    dtype = dtype_of(input)
    clipped = relax.op.clip(relax.op.add(input, relax.const(3, dtype)), 0, 6)
    return ctx.emit(relax.op.multiply(input, relax.op.divide(clipped, relax.const(6, dtype))))


def mish(ctx, input, inplace=False):
    return ctx.emit(relax.op.multiply(input, relax.op.tanh(relax.op.nn.softplus(input))))


def softplus(ctx, input, beta=1.0, threshold=20.0):
    return emit_op(ctx, "nn.softplus", input, beta, threshold)


def softsign(ctx, input):
    one = relax.const(1, dtype_of(input))
    return ctx.emit(relax.op.divide(input, relax.op.add(relax.op.abs(input), one)))


def _softmax(op_name: str):
    def convert(ctx, input, dim=None, _stacklevel=3, dtype=None, half_to_float=False):
        if dtype is not None:
            input = ctx.cast(input, str(dtype).removeprefix("torch."))
        return emit_op(ctx, op_name, input, -1 if dim is None else dim)

    return convert


def _aten_softmax(op_name: str):
    """``aten.softmax.int(self, dim, dtype=None)`` (the functional form has _stacklevel
    before dtype)."""
    def convert(ctx, input, dim, dtype=None):
        return _softmax(op_name)(ctx, input, dim, dtype=dtype)

    return convert


def prelu(ctx, input, weight):
    return emit_op(ctx, "nn.prelu", input, weight, 0 if ndim_of(input) == 1 else 1)


def glu(ctx, input, dim=-1):
    halves = ctx.emit(relax.op.split(input, 2, dim))
    a, b = ctx.emit(relax.TupleGetItem(halves, 0)), ctx.emit(relax.TupleGetItem(halves, 1))
    return ctx.emit(relax.op.multiply(a, relax.op.sigmoid(b)))


def sqrt(ctx, input):
    if not is_tensor(input):
        return _python_unary("sqrt", input)
    return emit_op(ctx, "sqrt", _as_float(ctx, input))


def rsqrt(ctx, input):
    return emit_op(ctx, "rsqrt", _as_float(ctx, input))


def reciprocal(ctx, input):
    x = _as_float(ctx, input)
    return ctx.emit(relax.op.divide(relax.const(1.0, dtype_of(x)), x))


def _log_base(base: float):
    def convert(ctx, input):
        x = _as_float(ctx, input)
        return ctx.emit(relax.op.divide(relax.op.log(x), relax.const(math.log(base),
                                                                     dtype_of(x))))

    return convert


def log1p(ctx, input):
    x = _as_float(ctx, input)
    return ctx.emit(relax.op.log(relax.op.add(x, relax.const(1, dtype_of(x)))))


def expm1(ctx, input):
    x = _as_float(ctx, input)
    return ctx.emit(relax.op.subtract(relax.op.exp(x), relax.const(1, dtype_of(x))))


def round_(ctx, input, decimals=0):
    if decimals == 0:
        return emit_op(ctx, "round", input)
    scale = relax.const(10.0 ** abs(decimals), dtype_of(input))
    scale_op, unscale_op = ((relax.op.multiply, relax.op.divide) if decimals > 0
                            else (relax.op.divide, relax.op.multiply))
    return ctx.emit(unscale_op(relax.op.round(scale_op(input, scale)), scale))


def identity(ctx, input, *_, **__):
    """Dropout (eval), contiguous, clone, detach...: the value itself."""
    return input


FUNCTIONS = {
    **{name: _unary(op_name, name) for name, op_name in UNARY.items()},
    **{name: _binary(op_name, fn) for name, (op_name, fn) in BINARY.items()},
    "logical_and": _logical("logical_and"), "logical_or": _logical("logical_or"),
    "logical_xor": _logical("logical_xor"),
    "logical_not": logical_not, "div": div, "truediv": div, "divide": div, "itruediv": div,
    "true_divide": div, "floor_divide": _binary("floor_divide", operator.floordiv),
    "rsub": rsub, "fmod": fmod, "pow": pow_, "max": max_, "min": min_, "amax": amax,
    "amin": amin, "relu6": relu6, "hardtanh": hardtanh, "clamp": clamp, "clip": clamp,
    "clamp_min": clamp_min, "clamp_max": clamp_max, "gelu": gelu, "leaky_relu": leaky_relu,
    "elu": elu, "celu": celu, "hardsigmoid": hardsigmoid, "hardswish": hardswish, "mish": mish,
    "softplus": softplus, "softsign": softsign, "softmax": _softmax("nn.softmax"),
    "log_softmax": _softmax("nn.log_softmax"), "prelu": prelu, "glu": glu, "sqrt": sqrt,
    "rsqrt": rsqrt, "reciprocal": reciprocal, "log2": _log_base(2.0),
    "log10": _log_base(10.0), "log1p": log1p, "expm1": expm1, "round": round_,
    "dropout": identity, "dropout1d": identity, "dropout2d": identity,
    "dropout3d": identity, "alpha_dropout": identity, "feature_alpha_dropout": identity,
    "contiguous": identity, "clone": identity, "detach": identity, "alias": identity,
    "lift_fresh_copy": identity, "requires_grad_": identity, "cpu": identity,
    "addcmul": addcmul, "addcdiv": addcdiv, "threshold": threshold, "_threshold": threshold,
}

# ATen overloads whose positional arguments differ from the functional forms.
ATEN = {"softmax.int": _aten_softmax("nn.softmax"),
        "log_softmax.int": _aten_softmax("nn.log_softmax"), "elu": aten_elu}
