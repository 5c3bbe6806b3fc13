"""Shared struct-info inference helpers for op families (broadcasting, axes, reductions).

Inference functions take an ``InferContext`` (see registry.py) and return a StructInfo. They
raise ``ctx.error(...)`` (a ShapeError naming the op and argument) on mismatch.
"""

from __future__ import annotations

from ...tir import expr as tir
from ..struct_info import TensorStructInfo

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def tensor(shape, dtype: str, ndim: int = -1) -> TensorStructInfo:
    """TensorStructInfo from dims (or None for unknown shape with known ``ndim``)."""
    if shape is None:
        return TensorStructInfo(None, dtype, ndim)
    return TensorStructInfo(list(shape), dtype)


def normalize_axis(ctx, axis: int, ndim: int, i: int = 0) -> int:
    if ndim < 0:
        return axis
    if not -ndim <= axis < ndim:
        raise ctx.error(f"axis {axis} is out of range for rank {ndim}", i)
    return axis % ndim


def normalize_axes(ctx, axes, ndim: int, i: int = 0) -> list[int]:
    axes = [axes] if isinstance(axes, int) else list(axes)
    out = [normalize_axis(ctx, a, ndim, i) for a in axes]
    if len(set(out)) != len(out):
        raise ctx.error(f"axes {list(axes)} repeat an axis", i)
    return out


def broadcast_dims(ctx, a: tuple, b: tuple) -> list:
    """numpy broadcasting over PrimExpr dims; a symbolic dim broadcasts against 1 or itself."""
    out = []
    for k in range(max(len(a), len(b))):
        da = a[len(a) - 1 - k] if k < len(a) else tir.IntImm(1)
        db = b[len(b) - 1 - k] if k < len(b) else tir.IntImm(1)
        out.append(_broadcast_dim(ctx, da, db))
    return out[::-1]


def _broadcast_dim(ctx, da, db):
    if da == 1:
        return db
    if db == 1 or da == db:
        return da
    if da.is_const and db.is_const:
        raise ctx.error(f"shapes do not broadcast: dim {da} vs {db}",
                        hint="the two inputs' dims must be equal or 1")
    # Symbolic vs anything: assume they match at run time, as TVM does; keep the symbolic.
    return da if not da.is_const else db


def broadcast_sinfo(ctx, sinfos: list, dtype: str | None = None) -> TensorStructInfo:
    dtype = dtype or sinfos[0].dtype
    if any(s.values is None for s in sinfos):
        return TensorStructInfo(None, dtype, max(s.ndim for s in sinfos))
    shape = sinfos[0].values
    for s in sinfos[1:]:
        shape = broadcast_dims(ctx, shape, s.values)
    return tensor(shape, dtype)


def common_dtype(ctx, sinfos: list) -> str:
    dtypes = {s.dtype for s in sinfos if s.dtype != "void"}
    if len(dtypes) > 1:
        raise ctx.error(f"inputs have different dtypes {sorted(dtypes)}",
                        hint="insert R.astype so both inputs have the same dtype")
    return dtypes.pop() if dtypes else "void"


def same_as_input(ctx) -> TensorStructInfo:
    return ctx.tensor(0)


def reduce_shape(values, axes: list[int], keepdims: bool) -> list:
    if keepdims:
        return [tir.IntImm(1) if i in axes else d for i, d in enumerate(values)]
    return [d for i, d in enumerate(values) if i not in axes]


def reduced(ctx, data: TensorStructInfo, axis, keepdims: bool, dtype: str | None = None):
    """Struct info of a reduction over ``axis`` (None: all axes)."""
    dtype = dtype or data.dtype
    if data.ndim < 0:
        return TensorStructInfo(None, dtype)
    axes = list(range(data.ndim)) if axis is None else normalize_axes(ctx, axis, data.ndim)
    if data.values is None:
        return TensorStructInfo(None, dtype, data.ndim if keepdims else data.ndim - len(axes))
    return tensor(reduce_shape(data.values, axes, keepdims), dtype)


def prod(values) -> tir.PrimExpr:
    out = tir.IntImm(1)
    for v in values:
        out = out * v
    return out


def conv_out_dim(size, kernel, stride: int, pad_before: int, pad_after: int, dilation: int,
                 ceil_mode: bool = False):
    """Output length of a convolution / pooling window along one axis."""
    effective = (kernel - 1) * dilation + 1
    span = size + pad_before + pad_after - effective
    if ceil_mode:
        return tir.floordiv(span + stride - 1, stride) + 1
    return tir.floordiv(span, stride) + 1
