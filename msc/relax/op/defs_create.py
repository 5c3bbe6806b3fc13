"""Tensor creation ops: full / ones / zeros (and their ``_like`` forms), arange, eye, tril/triu."""

from __future__ import annotations

import math

from ...tir import expr as tir
from ..expr import Attrs, Call
from ..struct_info import TensorStructInfo
from .infer import tensor, unknown, with_dtype
from .registry import Arg, AttrDef, make_call, register


def _from_shape(ctx, dtype: str) -> TensorStructInfo:
    values = ctx.shape_values(0)
    return tensor(values, dtype) if values is not None else unknown(dtype, ctx.sinfo[0].ndim)


def _scalar_fill(ctx, i: int) -> TensorStructInfo:
    fill = ctx.tensor(i)
    if fill.ndim > 0:
        raise ctx.error(f"fill_value must be a scalar tensor, got rank {fill.ndim}", i,
                        hint="pass R.const(value, dtype)")
    return fill


def full_infer(ctx):
    fill = _scalar_fill(ctx, 1)
    return _from_shape(ctx, ctx.attrs.dtype or fill.dtype)


def full_like_infer(ctx):
    data = ctx.tensor(0)
    _scalar_fill(ctx, 1)
    return with_dtype(data, ctx.attrs.dtype or data.dtype)


def init_infer(ctx):
    """ones / zeros: the shape arg with the dtype attr."""
    return _from_shape(ctx, ctx.attrs.dtype)


def like_infer(ctx):
    """ones_like / zeros_like / eye_like: the input's shape, ``dtype`` or the input's dtype."""
    data = ctx.tensor(0)
    if ctx.op_def.name == "eye_like" and data.ndim not in (-1, 2):
        raise ctx.error(f"needs a 2-D tensor, got rank {data.ndim}", 0)
    return with_dtype(data, ctx.attrs.dtype or data.dtype)


def tri_infer(ctx):
    data = ctx.tensor(0)
    if 0 <= data.ndim < 2:
        raise ctx.error(f"needs a tensor of rank >= 2, got rank {data.ndim}", 0)
    return data


# --------------------------------------------------------------------------------------------
# arange / eye: TVM's builders fill defaults that depend on other arguments.

def arange(start, end=None, step=1, dtype=None):
    """``R.arange(end)`` or ``R.arange(start, end, step)``; without a dtype, int64 when every
    bound is an integer, else float32 (as TVM)."""
    if end is None:
        start, end = 0, start
    call = make_call("arange", start, end, step, dtype)
    if dtype is None:
        ints = all(a.struct_info.dtype.startswith(("int", "uint")) for a in call.args)
        call = Call(call.op, call.args, Attrs({"dtype": "int64" if ints else "float32"}))
    return call


def arange_infer(ctx):
    start, end, step = (ctx.prim(i) for i in range(3))
    dtype = ctx.attrs.dtype
    if step is not None and step.is_const and step.value == 0:
        raise ctx.error("step must not be 0", 2)
    length = None if None in (start, end, step) else _arange_len(start, end, step)
    return tensor([length], dtype) if length is not None else unknown(dtype, 1)


def _arange_len(start, end, step):
    if all(v.is_const for v in (start, end, step)):  # exact, also for negative steps
        return tir.IntImm(max(math.ceil((end.value - start.value) / step.value), 0))
    if not all(v.dtype.startswith(("int", "uint")) for v in (start, end, step)):
        return None
    return tir.ceildiv(end - start, step)


def eye(n, m=None, k=0, dtype="float32"):
    """``R.eye(n, m=n, k=0, dtype="float32")``."""
    return make_call("eye", n, n if m is None else m, k, dtype)


def eye_infer(ctx):
    n, m = ctx.prim(0), ctx.prim(1)
    if n is None or m is None:
        return unknown(ctx.attrs.dtype, 2)
    return tensor([n, m], ctx.attrs.dtype)


def hamming_window_infer(ctx):
    size = ctx.prim(0)
    return tensor([size], ctx.attrs.dtype) if size is not None else unknown(ctx.attrs.dtype, 1)


_SHAPE = Arg("shape", "shape")
_DTYPE_OPT = AttrDef("dtype", "dtype", None)
register("full", [_SHAPE, Arg("fill_value")], [_DTYPE_OPT], infer=full_infer, family="create",
         shape_is_output=True)
register("full_like", [Arg("x"), Arg("fill_value")], [_DTYPE_OPT], infer=full_like_infer,
         family="create")
for _name in ("ones", "zeros"):
    register(_name, [_SHAPE], [AttrDef("dtype", "dtype")], infer=init_infer, family="create",
             shape_is_output=True)
    register(f"{_name}_like", [Arg("x")], [_DTYPE_OPT], infer=like_infer, family="create")
for _name in ("tril", "triu"):
    register(_name, [Arg("x"), Arg("k", "prim", 0)], infer=tri_infer, family="create")
register("arange", [Arg("start", "prim"), Arg("end", "prim"), Arg("step", "prim", 1)],
         [_DTYPE_OPT], infer=arange_infer, family="create", builder=arange)
register("eye", [Arg("n", "prim"), Arg("m", "prim"), Arg("k", "prim", 0)],
         [AttrDef("dtype", "dtype", "float32")], infer=eye_infer, family="create", builder=eye)
register("eye_like", [Arg("x"), Arg("k", "prim", 0)], [_DTYPE_OPT], infer=like_infer,
         family="create")
register("hamming_window", [Arg("window_size", "prim"), Arg("periodic", "prim"),
                            Arg("alpha", "prim"), Arg("beta", "prim")],
         [AttrDef("dtype", "dtype")], infer=hamming_window_infer, family="create")
