"""Affine quantization: ``quantize`` (float -> int) and ``dequantize`` (int -> float).

TVM prints their attrs as ``out_dtype, axis`` but takes ``axis`` first in Python; the builders
keep TVM's Python order: ``quantize(data, scale, zero_point, axis=-1, out_dtype="int8")``.
"""

from __future__ import annotations

from .infer import normalize_axis, prod, provably_differ, with_dtype
from .registry import Arg, AttrDef, make_call, register

# dtype rules of TVM 0.27, per op and argument.
_QUANT_DTYPES = {
    "quantize": {
        "data": ("float16", "float32"),
        "out_dtype": ("int8", "uint8", "int16", "uint16", "float8_e4m3fn", "float8_e5m2"),
    },
    "dequantize": {
        "data": ("int8", "uint8", "int16", "uint16", "int32", "uint32", "float8_e4m3fn",
                 "float8_e5m2", "float16", "float32"),
        "out_dtype": ("float16", "float32"),
    },
}
_SCALE_DTYPES = ("float16", "float32")
_ZERO_POINT_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "float16")


def quant_infer(ctx):
    data, out_dtype = ctx.tensor(0), ctx.attrs.out_dtype
    rules = _QUANT_DTYPES[ctx.op_def.name]
    if out_dtype not in rules["out_dtype"]:
        raise ctx.error(f"out_dtype={out_dtype!r} is not one of {list(rules['out_dtype'])}")
    _check_dtype(ctx, 0, rules["data"])
    _check_dtype(ctx, 1, _SCALE_DTYPES)
    _check_dtype(ctx, 2, _ZERO_POINT_DTYPES)
    axis = normalize_axis(ctx, ctx.attrs.axis, data.ndim)
    for i in (1, 2):
        _check_param_size(ctx, i, data, axis)
    return with_dtype(data, out_dtype)


def _check_dtype(ctx, i: int, allowed: tuple) -> None:
    dtype = ctx.tensor(i).dtype
    if dtype not in allowed + ("void",):
        raise ctx.error(f"dtype {dtype} is not one of {list(allowed)}", i)


def _check_param_size(ctx, i: int, data, axis: int) -> None:
    """scale / zero_point: one value, or one per element of ``data``'s ``axis``."""
    param = ctx.tensor(i)
    if param.values is None or data.values is None:
        return
    size = prod(param.values)
    if provably_differ(size, 1) and (len(param.values) > 1 or
                                     provably_differ(size, data.values[axis])):
        raise ctx.error(f"has shape {list(param.values)}, but data axis {axis} has "
                        f"{data.values[axis]} elements", i,
                        hint="pass a scalar or a 1-D tensor with one value per channel")


def quantize(data, scale, zero_point, axis: int = -1, out_dtype: str = "int8"):
    """``R.quantize(x, scale, zero_point, axis=-1, out_dtype="int8")``."""
    return make_call("quantize", data, scale, zero_point, out_dtype=out_dtype, axis=axis)


def dequantize(data, scale, zero_point, axis: int = -1, out_dtype: str = "float32"):
    """``R.dequantize(x, scale, zero_point, axis=-1, out_dtype="float32")``."""
    return make_call("dequantize", data, scale, zero_point, out_dtype=out_dtype, axis=axis)


_QUANT_ARGS = [Arg("data"), Arg("scale"), Arg("zero_point")]
register("quantize", _QUANT_ARGS, [AttrDef("out_dtype", "dtype", "int8"),
                                   AttrDef("axis", "int", -1)],
         infer=quant_infer, family="quant", builder=quantize)
register("dequantize", _QUANT_ARGS, [AttrDef("out_dtype", "dtype", "float32"),
                                     AttrDef("axis", "int", -1)],
         infer=quant_infer, family="quant", builder=dequantize)
