"""Indexing, scatters and scans: gather_elements, gather_nd, one_hot, cumsum / cumprod,
collapse_sum_to / collapse_sum_like; index_tensor, index_put, index_copy, slice_scatter,
dynamic_strided_slice, reverse_sequence; scatter_elements and scatter_nd (into a copy).

Indices read from data are normalized as numpy does (negative counts from the end) and the
compiler clamps every load or store index that comes from data into its buffer (an access
into an empty dim goes to a spare slot) and flags it when it was out of range: the call then
raises RuntimeCallError, as numpy raises IndexError. So no access lands outside a buffer.
``nonzero`` has a data-dependent output shape: it is a native kernel
(msc/backend/kernels/nonzero.py)."""

from __future__ import annotations

from dataclasses import replace

from ...errors import ShapeError, UnsupportedOpError
from ...tir import expr as E
from ...tir.function import For
from . import te
from .common import (
    acc_dtype,
    all_of,
    attrs,
    in_bounds,
    inputs,
    is_const,
    output,
    rule,
)
from .create import const_arg
from .manipulate import unravel
from .te import cast, const, idx, prim_arg


def _wrap_negative(k: E.PrimExpr, n) -> E.PrimExpr:
    k = cast(k, "int64")
    return te.select(E.BinaryOp("LT", k, idx(0)), E.add(k, n), k)


@rule("gather_elements")
def _gather_elements(call):
    b, (data, indices) = inputs(call)
    out = output(call)
    axis = int(attrs(call)["axis"]) % data.ndim

    def value(*i):
        k = _wrap_negative(indices[i], data.shape[axis])
        return data[tuple(k if d == axis else v for d, v in enumerate(i))]
    y = b.compute(out.values, value, "T_gather_elements")
    return b.prim_func([y], "gather_elements")


@rule("gather_nd")
def _gather_nd(call):
    """TVM / ONNX layout: indices (batch..., Y..., M); out[batch..., Y..., rest...] =
    data[batch..., indices[batch..., Y..., 0], ..., indices[..., M-1], rest...]."""
    b, (data, indices) = inputs(call)
    out = output(call)
    batch = int(attrs(call)["batch_dims"])
    m = int(indices.shape[-1])
    lead = indices.ndim - 1  # batch and Y dims of the output

    def value(*i):
        index = list(i[:batch])
        for j in range(m):
            index.append(_wrap_negative(indices[(*i[:lead], idx(j))], data.shape[batch + j]))
        return data[tuple(index) + i[lead:]]
    y = b.compute(out.values, value, "T_gather_nd")
    return b.prim_func([y], "gather_nd")


@rule("one_hot")
def _one_hot(call):
    b, (indices,) = inputs(call)
    out = output(call)
    on, off = const_arg(call, 1), const_arg(call, 2)
    axis = int(attrs(call)["axis"]) % out.ndim

    def value(*i):
        at = tuple(v for d, v in enumerate(i) if d != axis)
        hot = E.BinaryOp("EQ", cast(indices[at], "int64"), i[axis])
        return te.select(hot, const(on, out.dtype), const(off, out.dtype))
    y = b.compute(out.values, value, "T_one_hot")
    return b.prim_func([y], "one_hot")


def _scan(kind: str):
    """out[i] = out[i - 1] (+ or *) x[i] along the axis, in loop order (i - 1 is computed
    before i); ``exclusive`` shifts by one. axis=None scans the flattened input."""
    def legalize(call):
        b, (x,) = inputs(call)
        out = output(call)
        a = attrs(call)
        dt = out.dtype
        identity = const(0 if kind == "Add" else 1, dt)
        flat = a.get("axis") is None
        axis = 0 if flat else int(a["axis"]) % x.ndim
        y = b.output(out.values, dt, "T_" + ("cumsum" if kind == "Add" else "cumprod"))

        def load(i, shift: int):
            pos = E.sub(i[axis], shift) if shift else i[axis]
            at = tuple(pos if d == axis else v for d, v in enumerate(i))
            if flat:
                return cast(x[unravel(x.shape, out.values, at)], dt)
            return cast(x[at], dt)

        def value(*i):
            prev = y[tuple(E.sub(v, 1) if d == axis else v for d, v in enumerate(i))]
            first = E.BinaryOp("EQ", i[axis], idx(0))
            if a["exclusive"]:
                return te.if_then_else(first, identity, E.BinaryOp(kind, prev, load(i, 1)))
            return te.if_then_else(first, load(i, 0), E.BinaryOp(kind, prev, load(i, 0)))
        b.store(y, out.values, lambda *i: i, value, y.name)
        return b.prim_func([y], y.name.removeprefix("T_"))
    return legalize


rule("cumsum")(_scan("Add"))
rule("cumprod")(_scan("Mul"))


@rule("collapse_sum_to", "collapse_sum_like")
def _collapse_sum(call):
    """Sum over the leading dims and over the dims the target keeps as 1."""
    b, ts = inputs(call)
    x, out = ts[0], output(call)
    lead = x.ndim - out.ndim
    reduced = [d for d in range(x.ndim) if d < lead or (
        isinstance(out.values[d - lead], E.IntImm) and out.values[d - lead].value == 1
        and not (isinstance(x.shape[d], E.IntImm) and x.shape[d].value == 1))]
    rvars = {d: b.reduce_axis(x.shape[d], f"k{d}") for d in reduced}
    dt = acc_dtype(out.dtype)

    def value(*i):
        at = tuple(rvars[d] if d in rvars else i[d - lead] for d in range(x.ndim))
        return te.sum(cast(x[at], dt), list(rvars.values()))
    y = b.compute(out.values, value, "x_red", dtype=dt)
    if dt != out.dtype:
        y = b.compute(out.values, lambda *i: cast(y[i], out.dtype), "T_cast")
    return b.prim_func([y], "collapse_sum")


def _broadcast_shape(shapes, op: str, param: str) -> tuple:
    """numpy broadcasting of index shapes known at legalize time: two dims agree when equal
    or one is 1 (a symbolic dim only agrees with itself, so no load can overrun)."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(ndim):
        dims = [s[len(s) - ndim + k] for s in shapes if len(s) - ndim + k >= 0]
        big = [d for d in dims if not is_const(d, 1)]
        if any(d != big[0] for d in big):
            raise ShapeError(f"index shapes {[tuple(str(d) for d in s) for s in shapes]} do "
                             "not broadcast", op=op, param=param)
        out.append(big[0] if big else idx(1))
    return tuple(out)


def _at(t, ivars, shape, op: str, param: str):
    """``t`` read at ``ivars`` (a position in ``shape``) under numpy broadcasting: each dim of
    ``t`` is 1 or the dim of ``shape`` it lines up with (checked: no load can overrun)."""
    lead = t.ndim - len(shape)
    index = []
    for k, d in enumerate(t.shape):
        target = shape[k - lead] if k >= lead else idx(1)
        if not (is_const(d, 1) or d == target):
            raise ShapeError(f"shape {tuple(str(d) for d in t.shape)} does not broadcast to "
                             f"{tuple(str(d) for d in shape)}", op=op, param=param)
        index.append(idx(0) if is_const(d, 1) else ivars[k - lead])
    return t[tuple(index)]


def _int_indices(ts, op: str) -> None:
    for t in ts:
        if not t.dtype.startswith(("int", "uint")):
            raise UnsupportedOpError(f"{t.dtype} index tensors (boolean masks) have a "
                                     "data-dependent shape and no legalization", op=op,
                                     param="indices")


def _where(b, cond) -> None:
    """``T.where(cond)`` on the block of the last stage: its body runs only where it holds."""
    def put(s):
        return replace(s, body=put(s.body)) if isinstance(s, For) else replace(s, predicate=cond)
    if cond is not None:
        b.stages[-1].stmt = put(b.stages[-1].stmt)


def _nonempty(dims) -> E.PrimExpr | None:
    """``0 < d`` for the dims that may be 0 at run time (a block that need not run there)."""
    return all_of([E.BinaryOp("LT", idx(0), d) for d in dims if not is_const(d) or
                   d.value <= 0])


# ------------------------------------------------------------------------- advanced indexing

@rule("index_tensor")
def _index_tensor(call):
    """out[b..., rest...] = data[i0[b], i1[b], ..., rest...], the index tensors broadcast."""
    b, (data, *indices) = inputs(call)
    out = output(call)
    _int_indices(indices, "index_tensor")
    shape = _broadcast_shape([t.shape for t in indices], "index_tensor", "indices")
    nb = len(shape)

    def value(*i):
        at = [_wrap_negative(_at(t, i[:nb], shape, "index_tensor", "indices"), data.shape[d])
              for d, t in enumerate(indices)]
        return data[(*at, *i[nb:])]
    y = b.compute(out.values, value, "T_index_tensor")
    return b.prim_func([y], "index_tensor")


@rule("index_put")
def _index_put(call):
    """A copy of data, then out[i0[b], i1[b], ...] = values[b] (+= with accumulate, in loop
    order, so repeated indices add up as numpy's ``add.at``); an out-of-range index fails."""
    b, (data, *indices, values) = inputs(call)
    out = output(call)
    _int_indices(indices, "index_put")
    shape = _broadcast_shape([t.shape for t in indices], "index_put", "indices")
    y = b.output(out.values, out.dtype, "T_index_put")
    b.store(y, out.values, lambda *i: i, lambda *i: data[i], y.name + "_copy")
    combine = "Or" if out.dtype == "bool" else "Add"

    def at_of(*i):
        return tuple(_wrap_negative(_at(t, i, shape, "index_put", "indices"), data.shape[d])
                     for d, t in enumerate(indices))

    def value(*i):
        v = cast(_at(values, i, shape, "index_put", "values"), out.dtype)
        return E.BinaryOp(combine, y[at_of(*i)], v) if attrs(call).get("accumulate") else v
    b.store(y, shape, at_of, value, y.name)  # out of range (or into an empty dim): flagged
    return b.prim_func([y], "index_put")


@rule("index_copy")
def _index_copy(call):
    """A copy of data, then out[.., index[i], ..] = source[.., i, ..] along the axis (the VM
    runs it in place when it can: backend/fuse/patterns/cache.py); an out-of-range index fails."""
    b, (data, index, source) = inputs(call)
    out = output(call)
    axis = int(attrs(call)["axis"]) % data.ndim
    _int_indices([index], "index_copy")
    y = b.output(out.values, out.dtype, "T_index_copy")
    b.store(y, out.values, lambda *i: i, lambda *i: data[i], y.name + "_copy")

    def at_of(*i):
        k = _wrap_negative(index[(i[axis],)], data.shape[axis])
        return tuple(k if d == axis else v for d, v in enumerate(i))
    b.store(y, tuple(source.shape), at_of, lambda *i: cast(source[i], out.dtype), y.name)
    return b.prim_func([y], "index_copy")


@rule("slice_scatter")
def _slice_scatter(call):
    """out = input with input[.., start:end:step, ..] = src, in one pass over the output."""
    b, (data, src) = inputs(call)
    out = output(call)
    axis = int(attrs(call)["axis"]) % data.ndim
    start, end, step = (prim_arg(call, k) for k in (2, 3, 4))
    dim = data.shape[axis]
    if None in (start, end, step) or not is_const(dim):
        raise UnsupportedOpError("slice_scatter needs a constant slice of a constant dim",
                                 op="slice_scatter")
    if step == 0:
        raise ShapeError("slice step must not be 0", op="slice_scatter", param="step")
    picked = range(dim.value)[slice(int(start), int(end), int(step))]
    want = tuple(idx(len(picked)) if d == axis else s for d, s in enumerate(data.shape))
    if tuple(src.shape) != want:
        raise ShapeError(f"src shape {tuple(str(d) for d in src.shape)} differs from the "
                         f"slice shape {tuple(str(d) for d in want)}", op="slice_scatter",
                         param="src")
    first, n = picked.start if picked else 0, len(picked)

    def value(*i):
        if n == 0:
            return data[i]
        off = E.sub(i[axis], first)
        if picked.step == 1:
            inside, pos = in_bounds(off, n), off
        else:
            pos = E.floordiv(off, picked.step)
            inside = E.BinaryOp("And", E.BinaryOp("EQ", E.floormod(off, picked.step), idx(0)),
                                in_bounds(pos, n))
        at = tuple(pos if d == axis else v for d, v in enumerate(i))
        return te.if_then_else(inside, src[at], data[i])
    y = b.compute(out.values, value, "T_slice_scatter")
    return b.prim_func([y], "slice_scatter")


@rule("dynamic_strided_slice")
def _dynamic_strided_slice(call):
    """out[i] = x[begin'[d] + i[d] * strides[d]] with begin' numpy's slice start, read from
    the begin / strides tensors. Compiles only when the call's output shape is known: the
    op's inference knows it when begin / end / strides are constants; calls with tensor
    arguments (a shape that depends on the values) stay on their numpy path."""
    b, (x, begin, _end, strides) = inputs(call)
    out = output(call)
    k = begin.shape[0] if begin.ndim == 1 else None
    if k is None or not is_const(k) or k.value > x.ndim or strides.shape != begin.shape:
        raise UnsupportedOpError("dynamic_strided_slice needs 1-D begin / strides of a "
                                 "constant length up to the rank", op="dynamic_strided_slice")

    def start(d):
        s = cast(strides[idx(d)], "int64")
        forward = E.BinaryOp("GT", s, idx(0))
        v = _wrap_negative(begin[idx(d)], x.shape[d])
        lo = te.select(forward, idx(0), idx(-1))
        hi = te.select(forward, idx(x.shape[d]), E.sub(x.shape[d], 1))
        return E.min(E.max(v, lo), hi), s

    def value(*i):
        at = []
        for d, v in enumerate(i):
            if d < k.value:
                first, s = start(d)
                v = E.add(first, E.mul(v, s))
            at.append(v)
        return x[tuple(at)]
    y = b.compute(out.values, value, "T_dynamic_strided_slice")
    _where(b, _nonempty(x.shape[:k.value]))
    return b.prim_func([y], "dynamic_strided_slice")


@rule("reverse_sequence")
def _reverse_sequence(call):
    """Along seq_axis, the first seq_lengths[b] elements of batch b reversed (a length is a
    Python slice stop: negative counts from the end, clamped to the dim)."""
    b, (data, lengths) = inputs(call)
    out, a = output(call), attrs(call)
    seq, batch = int(a["seq_axis"]) % data.ndim, int(a["batch_axis"]) % data.ndim
    if seq == batch:
        raise ShapeError("seq_axis and batch_axis must differ", op="reverse_sequence",
                         param="seq_axis")
    if tuple(lengths.shape) != (data.shape[batch],):
        raise ShapeError(f"seq_lengths must have shape ({data.shape[batch]},), got "
                         f"{tuple(str(d) for d in lengths.shape)}", op="reverse_sequence",
                         param="seq_lengths")
    n = data.shape[seq]

    def value(*i):
        length = _wrap_negative(lengths[i[batch]], n)
        length = E.min(E.max(length, idx(0)), n)
        s = i[seq]
        pos = te.select(E.BinaryOp("LT", s, length), E.sub(E.sub(length, 1), s), s)
        return data[tuple(pos if d == seq else v for d, v in enumerate(i))]
    y = b.compute(out.values, value, "T_reverse_sequence")
    return b.prim_func([y], "reverse_sequence")


# ---------------------------------------------------------------------------- scatters

_COMBINE = {"add": "Add", "mul": "Mul", "min": "Min", "max": "Max"}


def _scatter_stages(b, data, out, at_of, updates, reduction: str, name: str):
    """Copy ``data`` into the output, then ``out[at_of(i)] (op)= updates[i]`` in loop order."""
    if reduction != "update" and reduction not in _COMBINE:
        raise UnsupportedOpError(f"scatter reduction {reduction!r} has no legalization",
                                 op=name)
    y = b.output(out.values, out.dtype, "T_" + name)
    b.store(y, out.values, lambda *i: i, lambda *i: data[i], y.name + "_copy")

    def value(*i):
        u = cast(updates[i], out.dtype)
        if reduction == "update":
            return u
        return E.BinaryOp(_COMBINE[reduction], y[tuple(at_of(*i))], u)
    b.store(y, updates.shape, at_of, value, y.name)
    return y


@rule("scatter_elements")
def _scatter_elements(call):
    b, (data, indices, updates) = inputs(call)
    out, a = output(call), attrs(call)
    axis = int(a["axis"]) % data.ndim

    def at_of(*i):
        k = _wrap_negative(indices[tuple(i)], data.shape[axis])
        return tuple(k if d == axis else v for d, v in enumerate(i))
    y = _scatter_stages(b, data, out, at_of, updates, a["reduction"],
                        "scatter_elements")
    return b.prim_func([y], "scatter_elements")


@rule("scatter_nd")
def _scatter_nd(call):
    """indices (Y..., M); updates (Y..., rest...); out[indices[y], rest] (op)= updates[y, rest]."""
    b, (data, indices, updates) = inputs(call)
    out, a = output(call), attrs(call)
    m = int(indices.shape[-1])
    lead = indices.ndim - 1

    def at_of(*i):
        index = [_wrap_negative(indices[(*i[:lead], idx(j))], data.shape[j]) for j in range(m)]
        return tuple(index) + tuple(i[lead:])
    y = _scatter_stages(b, data, out, at_of, updates, a["reduction"],
                        "scatter_nd")
    return b.prim_func([y], "scatter_nd")
