"""Reductions, statistics, arg-reductions, scans, sorting / searching, data-dependent ops."""

from __future__ import annotations

from ..struct_info import TupleStructInfo
from .infer import normalize_axis, prod, reduced, replace_dim, tensor, unknown, with_dtype
from .registry import Arg, AttrDef, register

REDUCE = ("sum", "mean", "max", "min", "prod", "std", "variance")
ARG_REDUCE = ("argmax", "argmin")
SCAN = ("cumsum", "cumprod")


def reduce_infer(ctx):
    return reduced(ctx, ctx.tensor(0), ctx.attrs.axis, ctx.attrs.keepdims)


def median_infer(ctx):
    """Values only when reducing every axis; (values, int64 indices) along given axes."""
    values = reduce_infer(ctx)
    if ctx.attrs.axis is None:
        return values
    return TupleStructInfo([values, with_dtype(values, "int64")])


def arg_reduce_infer(ctx):
    return reduced(ctx, ctx.tensor(0), ctx.attrs.axis, ctx.attrs.keepdims, "int64")


def scan_infer(ctx):
    """cumsum / cumprod: along ``axis``, or over the flattened input when axis is None."""
    data = ctx.tensor(0)
    dtype = ctx.attrs.dtype or data.dtype
    if ctx.attrs.axis is not None:
        normalize_axis(ctx, ctx.attrs.axis, data.ndim)
        return with_dtype(data, dtype)
    return tensor([prod(data.values)], dtype) if data.values is not None else unknown(dtype, 1)


def sort_infer(ctx):
    data = ctx.tensor(0)
    normalize_axis(ctx, ctx.attrs.axis, data.ndim)
    return data


def argsort_infer(ctx):
    return with_dtype(sort_infer(ctx), ctx.attrs.dtype)


def topk_infer(ctx):
    data, k, ret_type = ctx.tensor(0), ctx.attrs.k, ctx.attrs.ret_type
    if ret_type not in _TOPK_OUTPUTS:
        raise ctx.error(f"ret_type={ret_type!r} is not one of {sorted(_TOPK_OUTPUTS)}")
    axis = normalize_axis(ctx, ctx.attrs.axis, data.ndim)
    values = data
    if data.values is not None:
        dim = data.values[axis]
        # k < 1 keeps the whole axis; a static k past the end is clipped (as TVM).
        size = dim if k < 1 or (dim.is_const and dim.value < k) else k
        values = tensor(replace_dim(data.values, axis, size), data.dtype)
    indices = with_dtype(values, ctx.attrs.dtype)
    outputs = _TOPK_OUTPUTS[ret_type](values, indices)
    return outputs[0] if len(outputs) == 1 else TupleStructInfo(outputs)


_TOPK_OUTPUTS = {
    "both": lambda values, indices: [values, indices],
    "values": lambda values, indices: [values],
    "indices": lambda values, indices: [indices],
}


def nonzero_infer(ctx):
    """Coordinates of the nonzero elements: (rank, count); the count depends on the data."""
    ctx.tensor(0)
    return unknown("int64", 2)


def unique_infer(ctx):
    """Sizes depend on the data: only ranks are known. Flags add int64 outputs."""
    data = ctx.tensor(0)
    flags = [_flag(ctx, i) for i in range(2, 5)]  # return_index, return_inverse, return_counts
    has_axis = len(ctx.args) > 5
    if has_axis and ctx.prim(5) is not None:
        normalize_axis(ctx, _int_prim(ctx, 5), data.ndim, 5)
    values = unknown(data.dtype, data.ndim if has_axis else 1)
    extra = [unknown("int64", 1) for flag in flags if flag]
    return TupleStructInfo([values, *extra]) if extra else values


def _flag(ctx, i: int) -> bool:
    return bool(_int_prim(ctx, i))


def _int_prim(ctx, i: int) -> int:
    value = ctx.prim(i)
    if value is None or not value.is_const:
        raise ctx.error("must be a constant", i, hint="pass a Python bool / int")
    return value.value


_AXES_KEEP = [AttrDef("axis", "ints", None), AttrDef("keepdims", "bool", False)]
for _name in REDUCE:
    register(_name, [Arg("x")], _AXES_KEEP, infer=reduce_infer, family="reduce")
register("median", [Arg("x")], _AXES_KEEP, infer=median_infer, family="reduce")
for _name in ARG_REDUCE:
    register(_name, [Arg("x")], [AttrDef("axis", "int", None), AttrDef("keepdims", "bool", False)],
             infer=arg_reduce_infer, family="reduce")
for _name in SCAN:
    register(_name, [Arg("data")],
             [AttrDef("axis", "int", None), AttrDef("dtype", "dtype", None),
              AttrDef("exclusive", "bool", False)], infer=scan_infer, family="scan")
register("sort", [Arg("x")], [AttrDef("axis", "int", -1), AttrDef("descending", "bool", False)],
         infer=sort_infer, family="sort")
register("argsort", [Arg("data")],
         [AttrDef("axis", "int", -1), AttrDef("descending", "bool", False),
          AttrDef("dtype", "dtype", "int32")], infer=argsort_infer, family="sort")
register("topk", [Arg("data")],
         [AttrDef("k", "int", 1), AttrDef("axis", "int", -1), AttrDef("ret_type", "str", "both"),
          AttrDef("largest", "bool", True), AttrDef("dtype", "dtype", "int32")],
         infer=topk_infer, family="sort")
register("nonzero", [Arg("x")], infer=nonzero_infer, family="search")
register("unique", [Arg("x"), Arg("sorted", "prim", True), Arg("return_index", "prim", False),
                    Arg("return_inverse", "prim", False), Arg("return_counts", "prim", False),
                    Arg("axis", "prim", None)], infer=unique_infer, family="search")
