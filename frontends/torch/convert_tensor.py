"""Shape manipulation and indexing converters: reshape/view, permute, cat/split, getitem...

Sizes given as varargs or one sequence are both accepted (``x.view(2, 3)``,
``x.view((2, 3))``, ``aten.view(x, [2, 3])``); Python-level values (``x.shape``, ``x.size(0)``
and arithmetic on them) stay Python values or PrimExprs, so ``x.view(x.size(0), -1)`` becomes
one reshape::

    getitem(ctx, x, (slice(None), 0))     # -> R.strided_slice + R.reshape, as torch x[:, 0]
"""

from __future__ import annotations

import operator

from msc import relax
from msc.tir import expr as tir

from .common import dtype_of, is_tensor, is_tuple, ndim_of, promote, shape_of, unsupported
from .convert_elementwise import emit_op

__all__ = ["ATEN", "FUNCTIONS"]


def sizes(args) -> list:
    """``(2, 3)``, ``((2, 3),)`` or ``(x.shape,)`` -> ``[2, 3]``."""
    if len(args) == 1 and isinstance(args[0], relax.ShapeExpr):
        return dims_of(args[0])
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return list(args[0])
    return list(args)


def dims_of(shape: relax.ShapeExpr) -> list:
    """A ShapeExpr's dims as Python values: ints where static, PrimExprs where symbolic."""
    return [v.value if isinstance(v, tir.IntImm) else v for v in shape.values]


def axis(dim: int, ndim: int) -> int:
    return dim + ndim if dim < 0 else dim


def _same_dims(a: list, b: list) -> bool:
    return len(a) == len(b) and all(isinstance(x, (int, tir.PrimExpr)) and tir.convert(x) ==
                                    tir.convert(y) for x, y in zip(a, b))


# --------------------------------------------------------------------------------------------
# Reshapes and permutations.

def reshape(ctx, input, *shape):
    dims = sizes(shape)
    if not is_tensor(input):
        raise unsupported("reshape of a non-tensor value")
    if _same_dims(shape_of(input), dims):
        return input
    return ctx.emit(relax.op.reshape(input, dims))


def view(ctx, input, *shape):
    if len(shape) == 1 and not isinstance(shape[0], (list, tuple, int, tir.PrimExpr)):
        raise unsupported("Tensor.view(dtype) (a bitcast)")
    return reshape(ctx, input, *shape)


def reshape_as(ctx, input, other):
    return reshape(ctx, input, shape_of(other))


def flatten(ctx, input, start_dim=0, end_dim=-1):
    dims = shape_of(input)
    if not dims:
        return ctx.emit(relax.op.reshape(input, [1]))
    start, end = axis(start_dim, len(dims)), axis(end_dim, len(dims))
    merged = 1
    for d in dims[start:end + 1]:
        merged = merged * d
    return reshape(ctx, input, dims[:start] + [merged] + dims[end + 1:])


def unflatten(ctx, input, dim, sizes_):
    dims = shape_of(input)
    dim = axis(dim, len(dims))
    return reshape(ctx, input, dims[:dim] + list(sizes_) + dims[dim + 1:])


def permute(ctx, input, *dims):
    return ctx.emit(relax.op.permute_dims(input, sizes(dims)))


def transpose(ctx, input, dim0, dim1):
    axes = list(range(ndim_of(input)))
    a, b = axis(dim0, len(axes)), axis(dim1, len(axes))
    axes[a], axes[b] = axes[b], axes[a]
    return ctx.emit(relax.op.permute_dims(input, axes))


def t(ctx, input):
    return input if ndim_of(input) < 2 else transpose(ctx, input, 0, 1)


def squeeze(ctx, input, dim=None):
    """torch ignores dims that are not 1; Relax rejects them, so only static 1s are kept.
    Squeezing every dim of a static shape keeps TVM's ``axis=None``; with symbolic dims the
    1s are listed (a symbolic dim is not squeezed, and the rank stays known)."""
    dims = shape_of(input)
    if dim is None:
        wanted = range(len(dims))
    else:
        wanted = [axis(d, len(dims)) for d in (dim if isinstance(dim, (list, tuple)) else [dim])]
    ones = [d for d in wanted if isinstance(dims[d], int) and dims[d] == 1]
    if not ones:
        return input
    static = all(isinstance(d, int) for d in dims)
    return ctx.emit(relax.op.squeeze(input, None if dim is None and static else ones))


def unsqueeze(ctx, input, dim):
    return ctx.emit(relax.op.expand_dims(input, dim))


def expand(ctx, input, *size, implicit=False):
    dims, current = sizes(size), shape_of(input)
    offset = len(dims) - len(current)
    dims = [current[k - offset] if isinstance(d, int) and d == -1 else d
            for k, d in enumerate(dims)]
    if _same_dims(current, dims):
        return input
    return ctx.emit(relax.op.broadcast_to(input, dims))


def expand_as(ctx, input, other):
    return ctx.emit(relax.op.broadcast_to(input, shape_of(other)))


def broadcast_to(ctx, input, size):
    return expand(ctx, input, size)


def repeat(ctx, input, *repeats):
    return ctx.emit(relax.op.tile(input, sizes(repeats)))


def tile(ctx, input, dims):
    return ctx.emit(relax.op.tile(input, list(dims)))


def repeat_interleave(ctx, input, repeats, dim=None, output_size=None):
    if not isinstance(repeats, int):
        raise unsupported("repeat_interleave with tensor repeats (data-dependent shape)")
    return ctx.emit(relax.op.repeat(input, repeats, dim))


def flip(ctx, input, dims):
    out = input
    for d in (dims if isinstance(dims, (list, tuple)) else [dims]):
        out = ctx.emit(relax.op.flip(out, d))
    return out


def roll(ctx, input, shifts, dims=None):
    """Each rolled axis is two slices concatenated; without dims the flat tensor rolls."""
    if dims is None:
        flat = ctx.emit(relax.op.reshape(input, [-1]))
        return reshape(ctx, roll(ctx, flat, shifts, 0), shape_of(input))
    shifts = shifts if isinstance(shifts, (list, tuple)) else [shifts]
    dims = dims if isinstance(dims, (list, tuple)) else [dims]
    out = input
    for shift, dim in zip(shifts, dims):
        out = _roll_axis(ctx, out, shift, axis(dim, ndim_of(input)))
    return out


def _roll_axis(ctx, x, shift: int, dim: int):
    size = shape_of(x)[dim]
    if not isinstance(size, int):
        raise unsupported("roll along a symbolic dim")
    cut = size - shift % size
    if cut in (0, size):
        return x
    front = ctx.emit(relax.op.strided_slice(x, [dim], [0], [cut]))
    back = ctx.emit(relax.op.strided_slice(x, [dim], [cut], [size]))
    return ctx.emit(relax.op.concat([back, front], axis=dim))


def diff(ctx, input, n=1, dim=-1, prepend=None, append=None):
    """x[1:] - x[:-1] along ``dim``, ``n`` times (bool tensors: not-equal)."""
    dim = axis(dim, ndim_of(input))
    parts = [p for p in (prepend, input, append) if p is not None]
    x = cat(ctx, parts, dim) if len(parts) > 1 else input
    op = relax.op.not_equal if dtype_of(x) == "bool" else relax.op.subtract
    for _ in range(n):
        size = shape_of(x)[dim]
        later = ctx.emit(relax.op.strided_slice(x, [dim], [1], [size]))
        earlier = ctx.emit(relax.op.strided_slice(x, [dim], [0], [size - 1]))
        x = ctx.emit(op(later, earlier))
    return x


# --------------------------------------------------------------------------------------------
# Joins and splits.

def _promoted(ctx, tensors) -> list:
    dtype = dtype_of(tensors[0])
    for t_ in tensors[1:]:
        dtype = promote(dtype, dtype_of(t_))
    return [ctx.cast(t_, dtype) for t_ in tensors]


def cat(ctx, tensors, dim=0):
    return ctx.emit(relax.op.concat(_promoted(ctx, list(tensors)), axis=dim))


def stack(ctx, tensors, dim=0):
    return ctx.emit(relax.op.stack(_promoted(ctx, list(tensors)), axis=dim))


def _static_dim(x, dim: int, what: str) -> int:
    size = shape_of(x)[dim]
    if not isinstance(size, int):
        raise unsupported(f"{what} along a symbolic dim")
    return size


def split(ctx, tensor, split_size_or_sections, dim=0):
    """Chunks of ``split_size`` (the last one smaller) or the listed sizes -> Relax cut
    indices; an even split is given as the number of sections."""
    dim = axis(dim, ndim_of(tensor))
    if isinstance(split_size_or_sections, (list, tuple)):
        cuts, total = [], 0
        for size in split_size_or_sections[:-1]:
            total += size
            cuts.append(total)
        return ctx.emit(relax.op.split(tensor, cuts, dim))
    size = _static_dim(tensor, dim, "split")
    step = split_size_or_sections
    if size % step == 0:
        return ctx.emit(relax.op.split(tensor, size // step, dim))
    return ctx.emit(relax.op.split(tensor, list(range(step, size, step)), dim))


def chunk(ctx, input, chunks, dim=0):
    """torch.chunk: chunks of ceil(size / chunks), so there may be fewer than asked."""
    dim = axis(dim, ndim_of(input))
    size = _static_dim(input, dim, "chunk")
    step = -(-size // chunks)
    return split(ctx, input, step, dim)


def unbind(ctx, input, dim=0):
    dim = axis(dim, ndim_of(input))
    count = _static_dim(input, dim, "unbind")
    if count == 1:
        return relax.Tuple([ctx.emit(relax.op.squeeze(input, [dim]))])
    parts = ctx.emit(relax.op.split(input, count, dim))
    items = [ctx.emit(relax.op.squeeze(ctx.emit(relax.TupleGetItem(parts, k)), [dim]))
             for k in range(count)]
    return ctx.emit(relax.Tuple(items))


# --------------------------------------------------------------------------------------------
# Sizes and attributes.

def size(ctx, input, dim=None):
    """``x.size()`` is the tensor's shape (a ShapeExpr, as TVM imports it); ``x.size(d)`` one
    dim as a Python int or PrimExpr."""
    if dim is None:
        return relax.ShapeExpr(shape_of(input))
    return shape_of(input)[dim]


def dim(ctx, input):
    return ndim_of(input)


def numel(ctx, input):
    total = 1
    for d in shape_of(input):
        total = total * d
    return total


def _torch_dtype(ctx, x):
    import torch

    return getattr(torch, dtype_of(x))


_ATTRIBUTES = {
    "shape": lambda ctx, x: size(ctx, x),
    "dtype": _torch_dtype,
    "ndim": dim,
    "device": lambda ctx, x: "cpu",
    "is_cuda": lambda ctx, x: False,
    "requires_grad": lambda ctx, x: False,
    "T": lambda ctx, x: permute(ctx, x, list(range(ndim_of(x)))[::-1]),
    "mT": lambda ctx, x: transpose(ctx, x, -2, -1),
}


def getattr_(ctx, obj, name, *default):
    """``x.shape``, ``x.dtype``... recorded by fx as ``getattr(x, name)``."""
    if is_tensor(obj) and name in _ATTRIBUTES:
        return _ATTRIBUTES[name](ctx, obj)
    if is_tensor(obj):
        raise unsupported(f"tensor attribute {name!r}")
    if is_tuple(obj) and name in _NAMED_FIELDS:  # torch's (values, indices) results
        return getitem(ctx, obj, _NAMED_FIELDS[name])
    if isinstance(obj, relax.Expr):
        raise unsupported(f"attribute {name!r} of a {type(obj.struct_info).__name__} value")
    return getattr(obj, name, *default)


# topk, sort, max / min / median / mode / kthvalue over a dim, cummax: (values, indices)
_NAMED_FIELDS = {"values": 0, "indices": 1}


# --------------------------------------------------------------------------------------------
# Indexing.

def getitem(ctx, input, index):
    """Python containers index as Python; Relax tuples by TupleGetItem; tensors like torch."""
    if isinstance(input, relax.ShapeExpr):
        return operator.getitem(dims_of(input), index)
    if isinstance(input, relax.Tuple):  # a tuple a converter built, not a bound value
        return operator.getitem(input.fields, index)
    if is_tuple(input):
        if isinstance(index, slice):
            fields = range(len(input.struct_info.fields))[index]
            return relax.Tuple([ctx.emit(relax.TupleGetItem(input, k)) for k in fields])
        return ctx.emit(relax.TupleGetItem(input, index))
    if not is_tensor(input):
        return operator.getitem(input, index)
    return index_tensor(ctx, input, index if isinstance(index, tuple) else (index,))


def index_tensor(ctx, x, index: tuple):
    """torch indexing as TVM imports it: a take per index tensor, one strided_slice over
    every axis (ints are one-wide slices), then a reshape dropping the int axes and adding
    the None ones. Several index tensors broadcast together through index_tensor."""
    items = _normalize_index(index, ndim_of(x))
    tensors = [(k, item) for k, item in enumerate(_axis_items(items)) if is_tensor(item)]
    if any(dtype_of(t_) == "bool" for _, t_ in tensors):
        raise unsupported("indexing with a bool mask (data-dependent shape)",
                          hint="use torch.where or masked_fill instead")
    if tensors and any(isinstance(i, (int, tir.PrimExpr)) for i in items):
        raise unsupported("mixing int and tensor indices", hint="index in two steps")
    if len(tensors) > 1:
        return _advanced(ctx, x, items, tensors)
    taken, items = _take(ctx, x, items, tensors)
    sliced = ctx.emit(relax.op.strided_slice(taken, *_slice_specs(taken, items)))
    return ctx.emit(relax.op.reshape(sliced, _indexed_dims(shape_of(sliced), items)))


def _normalize_index(index: tuple, ndim: int) -> list:
    """Ellipsis (explicit or implied at the end) expanded into full slices."""
    explicit = sum(1 for i in index if i is not None and i is not Ellipsis)
    if Ellipsis not in index:
        index = tuple(index) + (Ellipsis,)
    items = []
    for item in index:
        items.extend([slice(None)] * (ndim - explicit) if item is Ellipsis else [item])
    return items


def _axis_items(items: list) -> list:
    """The items that consume an input axis (all but None)."""
    return [item for item in items if item is not None]


def _take(ctx, x, items: list, tensors: list):
    """One index tensor: take along its axis; its dims replace the axis (full slices)."""
    if not tensors:
        return x, items
    k, idx = tensors[0]
    taken = ctx.emit(relax.op.take(x, idx, axis=k))
    out, seen = [], 0
    for item in items:
        if item is not None and seen == k:
            out.extend([slice(None)] * ndim_of(idx))
        else:
            out.append(item)
        seen += item is not None
    return taken, out


def _slice_specs(x, items: list) -> tuple:
    """(axes, begin, end, strides) of the axes of ``x`` the items narrow (whole axes are
    left out: their symbolic sizes then stay as they are)."""
    dims, axes, begin, end, strides = shape_of(x), [], [], [], []
    for k, item in enumerate(_axis_items(items)):
        if isinstance(item, slice):
            if (item.step or 1) < 0:
                raise unsupported("slicing with a negative step")
            if item.start in (None, 0) and item.step in (None, 1) and to_end(item.stop,
                                                                               dims[k]):
                continue
            spec = (item.start or 0, dims[k] if item.stop is None else item.stop,
                    item.step or 1)
        else:
            start = item + dims[k] if isinstance(item, int) and item < 0 else item
            spec = (start, start + 1, 1)
        axes.append(k)
        for values, v in zip((begin, end, strides), spec):
            values.append(v)
    return axes, begin, end, strides


def to_end(stop, size) -> bool:
    """Does a slice stop reach the end of an axis of ``size``? (export writes INT64_MAX)"""
    if stop is None or (isinstance(stop, int) and stop >= 2**62):
        return True
    return _same_dims([stop], [size])


def _indexed_dims(sliced: list, items: list) -> list:
    """The result dims: sliced axes kept, int axes dropped, None axes inserted."""
    out, k = [], 0
    for item in items:
        if item is None:
            out.append(1)
            continue
        if isinstance(item, slice):
            out.append(sliced[k])
        k += 1
    return out


def _advanced(ctx, x, items: list, tensors: list):
    """Several index tensors after the basic slicing: x is permuted so their axes lead,
    index_tensor broadcasts them, and the result dims move to where torch puts them."""
    if None in items:
        raise unsupported("mixing None with several index tensors")
    basic = [slice(None) if is_tensor(i) else i for i in items]
    if any(i != slice(None) for i in basic):
        x = ctx.emit(relax.op.strided_slice(x, *_slice_specs(x, basic)))
    axes = [k for k, _ in tensors]
    rest = [k for k in range(ndim_of(x)) if k not in axes]
    if axes + rest != list(range(ndim_of(x))):
        x = ctx.emit(relax.op.permute_dims(x, axes + rest))
    out = ctx.emit(relax.op.index_tensor(x, [i for _, i in tensors]))
    adjacent = axes == list(range(axes[0], axes[0] + len(axes)))
    if not adjacent or axes[0] == 0:
        return out
    nb = ndim_of(out) - len(rest)
    order = (list(range(nb, nb + axes[0])) + list(range(nb))
             + list(range(nb + axes[0], ndim_of(out))))
    return ctx.emit(relax.op.permute_dims(out, order))


def aten_index(ctx, input, indices):
    """``aten.index.Tensor(x, [None, idx, ...])``: None keeps an axis."""
    return index_tensor(ctx, input, tuple(slice(None) if i is None else i for i in indices))


def aten_slice(ctx, input, dim=0, start=None, end=None, step=1):
    index = [slice(None)] * ndim_of(input)
    index[axis(dim, ndim_of(input))] = slice(start, end, step)
    return index_tensor(ctx, input, tuple(index))


def select(ctx, input, dim, index):
    dim = axis(dim, ndim_of(input))
    if isinstance(index, int) and index < 0:
        index += shape_of(input)[dim]
    return ctx.emit(relax.op.take(input, relax.const(index, "int64"), axis=dim))


def narrow(ctx, input, dim, start, length):
    return aten_slice(ctx, input, dim, start, start + length)


def index_select(ctx, input, dim, index):
    return ctx.emit(relax.op.take(input, index, axis=dim))


def gather(ctx, input, dim, index, sparse_grad=False):
    return ctx.emit(relax.op.gather_elements(input, index, axis=dim))


def copy(ctx, input, src, non_blocking=False):
    """``dest.copy_(src)``: src cast to dest's dtype and broadcast to its shape."""
    src = ctx.cast(ctx.tensor(src, input), dtype_of(input))
    return expand(ctx, src, shape_of(input))


def where(ctx, condition, input=None, other=None):
    if input is None:
        raise unsupported("torch.where(condition) (data-dependent shape)")
    like = input if is_tensor(input) else other
    if is_tensor(input) and is_tensor(other) and dtype_of(input) != dtype_of(other):
        dtype = promote(dtype_of(input), dtype_of(other))
        input, other = ctx.cast(input, dtype), ctx.cast(other, dtype)
    return ctx.emit(relax.op.where(ctx.cast(condition, "bool"), ctx.tensor(input, like),
                                   ctx.tensor(other, like)))


def _tri(op_name: str):
    def convert(ctx, input, diagonal=0):
        return emit_op(ctx, op_name, input, diagonal)

    return convert


def meshgrid(ctx, *tensors, indexing="ij"):
    """Each 0-d / 1-d input broadcast along its own axis; ``xy`` swaps the first two axes."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    indexing = indexing or "ij"
    if indexing not in ("ij", "xy"):
        raise unsupported(f"meshgrid indexing={indexing!r}", hint="'ij' or 'xy'")
    sizes = [shape_of(t)[0] if ndim_of(t) == 1 else 1 for t in tensors]
    axes = list(range(len(tensors)))
    if indexing == "xy" and len(axes) > 1:
        axes[0], axes[1] = 1, 0
    out_shape = [sizes[axes.index(a)] for a in range(len(axes))]
    grids = []
    for tensor, size, at in zip(tensors, sizes, axes):
        shape = [1] * len(axes)
        shape[at] = size
        column = ctx.emit(relax.op.reshape(tensor, shape))
        grids.append(ctx.emit(relax.op.broadcast_to(column, out_shape)))
    return ctx.emit(relax.Tuple(grids))


FUNCTIONS = {
    "meshgrid": meshgrid,
    "reshape": reshape, "view": view, "reshape_as": reshape_as, "view_as": reshape_as,
    "flatten": flatten, "unflatten": unflatten, "permute": permute, "transpose": transpose,
    "swapaxes": transpose, "t": t, "squeeze": squeeze, "unsqueeze": unsqueeze,
    "expand": expand, "expand_as": expand_as, "diff": diff, "broadcast_to": broadcast_to,
    "repeat": repeat,
    "tile": tile, "repeat_interleave": repeat_interleave, "flip": flip, "roll": roll,
    "cat": cat, "concat": cat, "concatenate": cat, "stack": stack, "split": split,
    "chunk": chunk, "unbind": unbind, "size": size, "dim": dim, "numel": numel,
    "getattr": getattr_, "getitem": getitem, "narrow": narrow, "select": select,
    "index_select": index_select, "gather": gather, "where": where, "copy": copy,
    "tril": _tri("tril"), "triu": _tri("triu"),
}

ATEN = {
    "index": aten_index, "slice": aten_slice, "split_with_sizes": split,
    "sym_size": size, "unsafe_split": split,
    "_unsafe_view": view, "_reshape_alias": lambda ctx, x, size_, stride: reshape(ctx, x, size_),
}
