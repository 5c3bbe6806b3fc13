"""Scatter-style torch converters: scatter / scatter_reduce, masked_fill / masked_scatter,
index_put, index_copy, slice_scatter / select_scatter (writes into a copy of a tensor)."""

from __future__ import annotations

from msc import relax

from .common import dtype_of, is_tensor, ndim_of, shape_of, unsupported
from .convert_elementwise import emit_op
from .convert_tensor import axis, to_end

__all__ = ["FUNCTIONS"]

_SCATTER_REDUCE = {None: "update", "add": "add", "multiply": "mul", "sum": "add",
                   "prod": "mul", "amax": "max", "amin": "min", "mean": "mean"}


def scatter(ctx, input, dim, index, src=None, value=None, *, reduce=None):
    if not is_tensor(src):
        fill = value if src is None else src
        src = ctx.emit(relax.op.full_like(index, relax.const(fill, dtype_of(input)),
                                          dtype_of(input)))
    return emit_op(ctx, "scatter_elements", input, index, src, dim, _SCATTER_REDUCE[reduce])


def scatter_reduce(ctx, input, dim, index, src, reduce, *, include_self=True):
    if not include_self:
        raise unsupported("scatter_reduce with include_self=False")
    return scatter(ctx, input, dim, index, src, reduce=reduce)


def masked_fill(ctx, input, mask, value):
    fill = value if is_tensor(value) else relax.const(value, dtype_of(input))
    filled = ctx.emit(relax.op.full_like(input, fill))
    return ctx.emit(relax.op.where(mask, filled, input))


def masked_scatter(ctx, input, mask, source):
    """The i-th True of the mask takes source's i-th element, through the running count of
    Trues: where(mask, take(source, cumsum(mask) - 1), input); masks of rank > 1 go flat."""
    if ndim_of(mask) != ndim_of(input):
        mask = ctx.emit(relax.op.broadcast_to(mask, shape_of(input)))
    flat_mask = mask if ndim_of(mask) == 1 else ctx.emit(relax.op.reshape(mask, [-1]))
    count = ctx.emit(relax.op.cumsum(flat_mask, 0, dtype="int32"))
    index = ctx.emit(relax.op.subtract(count, relax.const(1, "int32")))
    if ndim_of(mask) == 1:
        return ctx.emit(relax.op.where(mask, ctx.emit(relax.op.take(source, index, axis=0,
                                                                    mode="clip")), input))
    flat = ctx.emit(relax.op.reshape(source, [-1] + shape_of(source)[ndim_of(mask):]))
    gathered = ctx.emit(relax.op.take(flat, index, axis=0, mode="clip"))
    values = ctx.emit(relax.op.reshape(gathered, shape_of(input)))
    return ctx.emit(relax.op.where(mask, values, input))


def index_put(ctx, input, indices, values, accumulate=False):
    """``x[idx] = v`` (export's ``aten.index_put``). One index per dim is ``index_put``; fewer
    (``x[rows] = v`` writes whole trailing slices) is ``scatter_nd`` over the leading dims, as
    MSC built it (TVM's test_graph_build ``test_put``). None entries are not supported."""
    if any(i is None for i in indices):
        raise unsupported("index_put with untouched leading axes (None indices)")
    values = ctx.cast(ctx.tensor(values, input), dtype_of(input))
    if len(indices) < ndim_of(input):
        return _put_slices(ctx, input, list(indices), values, bool(accumulate))
    return ctx.emit(relax.op.index_put(input, relax.Tuple(list(indices)), values,
                                       bool(accumulate)))


def _put_slices(ctx, input, indices, values, accumulate: bool):
    """scatter_nd(input, stack(indices, -1), values broadcast to index shape + the rest)."""
    shape = shape_of(indices[0])
    if any(shape_of(i) != shape for i in indices[1:]):
        raise unsupported("index_put with index tensors of different shapes")
    columns = [ctx.emit(relax.op.expand_dims(ctx.cast(i, "int64"), -1)) for i in indices]
    nd_index = columns[0] if len(columns) == 1 else ctx.emit(relax.op.concat(columns, -1))
    updates_shape = list(shape) + list(shape_of(input))[len(indices):]
    if shape_of(values) != updates_shape:
        values = ctx.emit(relax.op.broadcast_to(values, updates_shape))
    return ctx.emit(relax.op.scatter_nd(input, nd_index, values,
                                        "add" if accumulate else "update"))


def index_copy(ctx, input, dim, index, source):
    """``x.index_copy(dim, index, src)`` (export's ``aten.index_copy``): a KV cache append."""
    return emit_op(ctx, "index_copy", input, index, source, axis=axis(dim, ndim_of(input)))


def slice_scatter(ctx, input, src, dim=0, start=None, end=None, step=1):
    """``x[..., start:end:step] = src`` along ``dim`` (export's ``aten.slice_scatter``)."""
    dim = axis(dim, ndim_of(input))
    size = shape_of(input)[dim]
    end = size if end is None or to_end(end, size) else end
    return ctx.emit(relax.op.slice_scatter(input, src, start or 0, end, step, dim))


def select_scatter(ctx, input, src, dim, index):
    """``x.select(dim, index) = src``: src gets the axis back, then slice_scatter."""
    dim = axis(dim, ndim_of(input))
    if isinstance(index, int) and index < 0:
        index += shape_of(input)[dim]
    src = ctx.emit(relax.op.expand_dims(src, dim))
    return slice_scatter(ctx, input, src, dim, index, index + 1, 1)


FUNCTIONS = {
    "scatter": scatter, "scatter_reduce": scatter_reduce, "masked_fill": masked_fill,
    "masked_scatter": masked_scatter, "index_put": index_put, "slice_scatter": slice_scatter,
    "select_scatter": select_scatter, "index_copy": index_copy,
}
