"""Affine quantization: ``quantize`` (float -> int) and ``dequantize`` (int -> float).

TVM prints their attrs as ``out_dtype, axis`` but takes ``axis`` first in Python; the builders
keep TVM's Python order: ``quantize(data, scale, zero_point, axis=-1, out_dtype="int8")``.
"""

from __future__ import annotations

from .infer import normalize_axis, prod, provably_differ, tensor, with_dtype
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


# --------------------------------------------------------------------------------------------
# matmul_nbits: a matmul whose [N, K] weight is stored packed (weight-only quantization,
# compression/weight_only). onnxruntime's com.microsoft MatMulNBits, with msc's zero points
# one uint8 code per group (MatMulNBits packs int4 ones two per byte: to_onnx packs them).

def nbits_infer(ctx):
    """data [..., K] float; weight uint8 [N, groups, block_size * bits / 8]; scales float
    and zero_points uint8 [N, groups] -> [..., N]. The value of weight row n, group g is
    ``(code - zero_points[n, g]) * scales[n, g]``; codes past K (padding) are ignored."""
    data, weight, scales = ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)
    attrs = ctx.attrs
    if attrs.bits not in (4, 8):
        raise ctx.error(f"bits={attrs.bits} is not 4 or 8", hint="weights are int4 or int8")
    for i, dtype in ((1, "uint8"), (2, data.dtype), (3, "uint8")):
        if ctx.tensor(i).dtype not in (dtype, "void"):
            raise ctx.error(f"dtype {ctx.tensor(i).dtype}, expected {dtype}", i)
    if data.dtype not in ("float16", "float32", "void"):
        raise ctx.error(f"needs float data, got {data.dtype}", 0)
    ranks = [(1, 3, "weight [N, groups, block bytes]"), (2, 2, "scales [N, groups]"),
                  (3, 2, "zero_points [N, groups]")]
    for i, rank, why in ranks:
        if ctx.tensor(i).ndim not in (-1, rank):
            raise ctx.error(f"has rank {ctx.tensor(i).ndim}, {why} needs {rank}", i)
    if data.values is None or weight.values is None:
        return tensor(None, data.dtype, data.ndim)
    k, block = attrs.in_features, attrs.block_size
    n, groups, nbytes = weight.values
    for got, want, what in ((data.values[-1], k, "data's last dim (in_features)"),
                            (groups, -(-k // block), "weight dim 1 (groups)"),
                            (nbytes, block * attrs.bits // 8, "weight dim 2 (block bytes)")):
        if provably_differ(got, want):
            raise ctx.error(f"{what} is {got}, expected {want}", 1)
    if scales.values is not None and provably_differ(scales.values[0], n):
        raise ctx.error(f"scales has {scales.values[0]} rows, the weight {n}", 2)
    return tensor([*data.values[:-1], n], data.dtype)


def matmul_nbits(data, weight, scales, zero_points, in_features: int, bits: int = 4,
                 block_size: int = 32):
    """``R.matmul_nbits(x, w, scales, zero_points, bits=4, block_size=32, in_features=K)``."""
    return make_call("matmul_nbits", data, weight, scales, zero_points, bits=bits,
                     block_size=block_size, in_features=in_features)


register("matmul_nbits", [Arg("data"), Arg("weight"), Arg("scales"), Arg("zero_points")],
         [AttrDef("in_features", "int"), AttrDef("bits", "int", 4),
          AttrDef("block_size", "int", 32)],
         infer=nbits_infer, family="quant", builder=matmul_nbits)
