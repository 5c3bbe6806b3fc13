"""Indexing ops: slicing, take / gather / scatter, one_hot, advanced indexing."""

from __future__ import annotations

from functools import partial

from ...tir import expr as tir
from ..expr import Constant
from .infer import (
    INT_DTYPES,
    broadcast_dims,
    const_ints,
    int_attr_values,
    nonneg,
    normalize_axes,
    normalize_axis,
    tensor,
    unknown,
    with_dtype,
)
from .registry import Arg, AttrDef, register

# Ends at or past this are "to the end" sentinels (torch/ONNX pass INT64_MAX / INT32_MAX).
_TO_END = 2**31 - 1


def _require_int(ctx, i: int) -> None:
    s = ctx.tensor(i)
    if s.dtype not in INT_DTYPES + ("void",):
        raise ctx.error(f"indices must be an integer tensor, got {s.dtype}", i,
                        hint="cast with R.astype(indices, 'int64')")


# --------------------------------------------------------------------------------------------
# strided_slice

def strided_slice_infer(ctx):
    data = ctx.tensor(0)
    axes = const_ints(ctx, int_attr_values(ctx, 1, "axes"), 1, "axes")
    specs = [int_attr_values(ctx, i, name) for i, name in _SLICE_ARGS if i < len(ctx.args)]
    specs += [[tir.IntImm(1)] * len(axes)] * (3 - len(specs))  # strides default to 1
    for (i, name), values in zip(_SLICE_ARGS, specs):
        if values is not None and len(values) != len(axes):
            raise ctx.error(f"{name} has {len(values)} values but axes has {len(axes)}", i,
                            hint="give one begin/end/stride per sliced axis")
    if data.ndim < 0:
        return data
    axes = normalize_axes(ctx, axes, data.ndim, 1)
    if data.values is None or None in specs:
        return unknown(data.dtype, data.ndim)
    dims = list(data.values)
    for axis, begin, end, stride in zip(axes, *specs):
        dims[axis] = _slice_len(ctx, dims[axis], begin, end, stride, ctx.attrs.assume_inbound)
    return unknown(data.dtype, data.ndim) if None in dims else tensor(dims, data.dtype)


_SLICE_ARGS = ((2, "begin"), (3, "end"), (4, "strides"))


def _slice_len(ctx, dim, begin, end, stride, inbound: bool):
    """Length of dim[begin:end:stride] (Python slice semantics; None if not expressible)."""
    if not stride.is_const:
        return None
    if stride.value == 0:
        raise ctx.error("strides must not be 0", 4)
    if all(v.is_const for v in (dim, begin, end)):
        return tir.IntImm(len(range(*slice(begin.value, end.value, stride.value)
                                    .indices(dim.value))))
    step = stride.value
    if inbound:
        begin, end = _wrap(begin, dim), _wrap(end, dim)
    else:
        begin, end = _clamp(begin, dim, step), _clamp(end, dim, step)
    span = end - begin if step > 0 else begin - end
    return tir.ceildiv(span if inbound else nonneg(span), abs(step))


def _wrap(index, dim):
    return index + dim if index.is_const and index.value < 0 else index


def _clamp(index, dim, step: int):
    """A slice bound moved into range: [0, dim] for forward steps, [-1, dim - 1] backward."""
    low, high = (0, dim) if step > 0 else (-1, dim - 1)
    if index.is_const and abs(index.value) >= _TO_END:
        return high if index.value > 0 else low
    if index == dim:  # x[:n] on a dim of n
        return high
    if index.is_const:
        # A non-negative constant on a symbolic dim is taken as in range (as TVM's begin).
        return tir.max(index + dim, low) if index.value < 0 else index
    wrapped = tir.if_then_else(tir.binary("LT", index, 0), index + dim, index)
    return tir.min(tir.max(wrapped, low), high)


def dynamic_strided_slice_infer(ctx):
    """x[b0:e0:s0, b1:e1:s1, ...]: the exact shape when begin / end / strides are constants
    (TVM 0.27 leaves it unknown even then), else unknown; the shape follows numpy's slices."""
    data = ctx.tensor(0)
    for i in (1, 2, 3):
        _require_int(ctx, i)
    specs = [_const_vector(ctx, i) for i in (1, 2, 3)]
    if data.values is None or None in specs:
        return unknown(data.dtype, data.ndim)
    if len({len(v) for v in specs}) > 1 or len(specs[0]) > data.ndim:
        raise ctx.error(f"begin / end / strides have {[len(v) for v in specs]} values for a "
                        f"rank {data.ndim} input", 1, hint="give one value per sliced axis")
    dims = list(data.values)
    for axis, (begin, end, stride) in enumerate(zip(*specs)):
        if stride == 0:
            raise ctx.error("strides must not be 0", 3)
        dims[axis] = _dyn_slice_len(dims[axis], begin, end, stride)
    return tensor(dims, data.dtype)


def _const_vector(ctx, i: int) -> list[int] | None:
    """The values of a 1-D relax.Constant argument, or None when it is not one."""
    arg = ctx.args[i]
    if not isinstance(arg, Constant) or arg.data.ndim != 1:
        return None
    return [int(v) for v in arg.data]


def _dyn_slice_len(dim, begin: int, end: int, stride: int):
    """len(range(n)[begin:end:stride]), exact on symbolic dims too (unlike _slice_len, which
    takes a non-negative begin as in range, as TVM's strided_slice does)."""
    if dim.is_const:
        return tir.IntImm(len(range(dim.value)[begin:end:stride]))
    low, high = (0, dim) if stride > 0 else (-1, dim - 1)
    first, last = (_bound(v, dim, low, high) for v in (begin, end))
    span = last - first if stride > 0 else first - last
    return tir.ceildiv(nonneg(span), abs(stride))


def _bound(index: int, dim, low, high):
    """A constant slice bound moved into [low, high] on a symbolic dim (numpy's rule)."""
    if abs(index) >= _TO_END:
        return high if index > 0 else low
    return tir.min(tir.IntImm(index), high) if index >= 0 else tir.max(index + dim, low)


# --------------------------------------------------------------------------------------------
# take / gather / scatter

def take_infer(ctx):
    data, indices, axis = ctx.tensor(0), ctx.tensor(1), ctx.attrs.axis
    _require_int(ctx, 1)
    if axis is None:
        if data.ndim not in (-1, 1):
            raise ctx.error(f"axis=None needs a 1-D input, got rank {data.ndim}", 0,
                            hint="pass an axis, or flatten the input first")
        axis = 0
    if data.ndim < 0 or indices.ndim < 0:
        return unknown(data.dtype)
    axis = normalize_axis(ctx, axis, data.ndim)
    if data.values is None or indices.values is None:
        return unknown(data.dtype, data.ndim - 1 + indices.ndim)
    dims = data.values[:axis] + indices.values + data.values[axis + 1:]
    return tensor(dims, data.dtype)


def gather_elements_infer(ctx):
    data, indices = ctx.tensor(0), ctx.tensor(1)
    _require_int(ctx, 1)
    _same_rank(ctx, data, indices, 1)
    normalize_axis(ctx, ctx.attrs.axis, data.ndim)
    return with_dtype(indices, data.dtype)


def gather_nd_infer(ctx):
    data, indices, batch = ctx.tensor(0), ctx.tensor(1), ctx.attrs.batch_dims
    _require_int(ctx, 1)
    if indices.values is None or data.values is None or not indices.values[-1].is_const:
        return unknown(data.dtype)
    depth = indices.values[-1].value
    if batch + depth > data.ndim:
        raise ctx.error(f"batch_dims {batch} + index depth {depth} exceed the data rank "
                        f"{data.ndim}", 1)
    return tensor(indices.values[:-1] + data.values[batch + depth:], data.dtype)


def scatter_elements_infer(ctx):
    data, indices, updates = ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)
    _require_int(ctx, 1)
    _same_rank(ctx, data, indices, 1)
    _same_rank(ctx, indices, updates, 2)
    normalize_axis(ctx, ctx.attrs.axis, data.ndim)
    return data


def scatter_nd_infer(ctx):
    data, updates = ctx.tensor(0), ctx.tensor(2)
    _require_int(ctx, 1)
    if updates.dtype != data.dtype:
        raise ctx.error(f"updates dtype {updates.dtype} differs from data dtype {data.dtype}", 2)
    return data


def _same_rank(ctx, a, b, i: int) -> None:
    if a.ndim >= 0 and b.ndim >= 0 and a.ndim != b.ndim:
        raise ctx.error(f"has rank {b.ndim}, expected rank {a.ndim}", i)


# --------------------------------------------------------------------------------------------
# one_hot, advanced indexing, scatter-like ops that keep the input's struct info.

def one_hot_infer(ctx):
    indices = ctx.tensor(0)
    _require_int(ctx, 0)
    dtype, off_dtype = _prim_dtype(ctx, 1), _prim_dtype(ctx, 2)
    if dtype != off_dtype:
        raise ctx.error(f"on_value ({dtype}) and off_value ({off_dtype}) differ in dtype", 2)
    if indices.ndim < 0:
        return unknown(dtype)
    axis = normalize_axis(ctx, ctx.attrs.axis, indices.ndim + 1)
    if indices.values is None:
        return unknown(dtype, indices.ndim + 1)
    dims = list(indices.values)
    return tensor(dims[:axis] + [tir.IntImm(ctx.attrs.depth)] + dims[axis:], dtype)


def _prim_dtype(ctx, i: int) -> str:
    ctx.prim(i)  # a scalar (PrimValue) argument
    return ctx.sinfo[i].dtype


def index_tensor_infer(ctx):
    """data[i0, i1, ...]: the broadcast index shape, then the data's remaining dims."""
    data, indices = ctx.tensor(0), ctx.tensors(1)
    if data.ndim >= 0 and len(indices) > data.ndim:
        raise ctx.error(f"{len(indices)} index tensors for a rank {data.ndim} input", 1)
    if data.values is None or any(i.values is None for i in indices):
        return unknown(data.dtype)
    shape = []
    for index in indices:
        shape = broadcast_dims(ctx, shape, index.values)
    return tensor(shape + list(data.values[len(indices):]), data.dtype)


def index_put_infer(ctx):
    data, indices = ctx.tensor(0), ctx.tensors(1)
    if data.ndim >= 0 and len(indices) != data.ndim:
        raise ctx.error(f"needs one index tensor per dim ({data.ndim}), got {len(indices)}", 1)
    return data


def index_copy_infer(ctx):
    """``index_copy``: the result looks like data; source has data's rank, with the
    index's length along the axis."""
    data, index, source = ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)
    _require_int(ctx, 1)
    if index.ndim not in (-1, 1):
        raise ctx.error(f"index must be 1-D, got rank {index.ndim}", 1)
    if data.ndim >= 0 and source.ndim >= 0 and source.ndim != data.ndim:
        raise ctx.error(f"source has rank {source.ndim}, data rank {data.ndim}", 2)
    if data.ndim >= 0:
        normalize_axis(ctx, ctx.attrs.axis, data.ndim)
    return data


def keep_data_infer(ctx):
    """slice_scatter / reverse_sequence: the result looks like the input."""
    return ctx.tensor(0)


def bucketize_infer(ctx):
    data = ctx.tensor(0)
    ctx.tensor(1)
    return with_dtype(data, "int32" if ctx.attrs.out_int32 else "int64")


# Index results may be slices of the data (numpy views): may_alias, conservatively.
_index = partial(register, family="index", may_alias=True)
_index("strided_slice", [Arg("x"), Arg("axes", "any"), Arg("begin", "any"),
                         Arg("end", "any"), Arg("strides", "any", None)],
       [AttrDef("assume_inbound", "bool", False)], infer=strided_slice_infer)
_index("dynamic_strided_slice", [Arg("x"), Arg("begin"), Arg("end"), Arg("strides")],
       infer=dynamic_strided_slice_infer)
_index("take", [Arg("x"), Arg("indices")],
       [AttrDef("axis", "int", None), AttrDef("mode", "str", "fast")], infer=take_infer)
_index("gather_elements", [Arg("data"), Arg("indices")], [AttrDef("axis", "int", 0)],
       infer=gather_elements_infer)
_index("gather_nd", [Arg("data"), Arg("indices")], [AttrDef("batch_dims", "int", 0)],
       infer=gather_nd_infer)
_index("scatter_elements", [Arg("data"), Arg("indices"), Arg("updates")],
       [AttrDef("axis", "int", 0), AttrDef("reduction", "str", "update")],
       infer=scatter_elements_infer)
_index("scatter_nd", [Arg("data"), Arg("indices"), Arg("updates")],
       [AttrDef("reduction", "str", "update")], infer=scatter_nd_infer)
_index("one_hot", [Arg("indices"), Arg("on_value", "prim"), Arg("off_value", "prim")],
       [AttrDef("depth", "int"), AttrDef("axis", "int", -1)], infer=one_hot_infer)
_index("index_tensor", [Arg("data"), Arg("indices", "tensors")], infer=index_tensor_infer)
_index("index_put", [Arg("data"), Arg("indices", "tensors"), Arg("values")],
       [AttrDef("accumulate", "bool", False)], infer=index_put_infer)
_index("slice_scatter", [Arg("input_tensor"), Arg("src"), Arg("start", "prim"),
                         Arg("end", "prim"), Arg("step", "prim")],
       [AttrDef("axis", "int", 0)], infer=keep_data_infer)
# data with data[.., index[i], ..] = source[.., i, ..] along axis (torch's index_copy): a KV
# cache append. The VM writes into data itself when data is a parameter nothing else reads
# (backend/fuse/patterns/cache.py), so a decode step does not copy the cache.
_index("index_copy", [Arg("data"), Arg("index"), Arg("source")],
       [AttrDef("axis", "int", 0)], infer=index_copy_infer)
_index("reverse_sequence", [Arg("data"), Arg("seq_lengths")],
       [AttrDef("seq_axis", "int", 1), AttrDef("batch_axis", "int", 0)],
       infer=keep_data_infer)
_index("bucketize", [Arg("input_tensor"), Arg("boundaries")],
       [AttrDef("out_int32", "bool", False), AttrDef("right", "bool", False)],
       infer=bucketize_infer)
