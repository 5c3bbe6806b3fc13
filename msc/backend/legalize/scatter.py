"""Advanced indexing, scatters into a copy, and the creation gap ops: index_tensor, index_put,
slice_scatter, dynamic_strided_slice, reverse_sequence, layout_transform, meshgrid,
hamming_window.

Indices read from data are normalized as numpy does (negative counts from the end) and the
compiler clamps every load or store index that comes from data into its buffer. Writes whose
position comes from data (index_put) run only when the position is in range (numpy raises
there), so a write can never land outside the output, even in an empty one. ``nonzero`` has a
data-dependent output shape: it is a native kernel (msc/backend/kernels/nonzero.py)."""

from __future__ import annotations

from dataclasses import replace

from ...errors import ShapeError, UnsupportedOpError
from ...tir import expr as E
from ...tir.function import For
from . import te
from .common import all_of, attrs, in_bounds, inputs, output, outputs, rule
from .index import _wrap_negative
from .te import cast, const, idx, prim_arg


def _is_const(d, value: int | None = None) -> bool:
    return isinstance(d, E.IntImm) and (value is None or d.value == value)


def _broadcast_shape(shapes, op: str, param: str) -> tuple:
    """numpy broadcasting of index shapes known at legalize time: two dims agree when equal
    or one is 1 (a symbolic dim only agrees with itself, so no load can overrun)."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(ndim):
        dims = [s[len(s) - ndim + k] for s in shapes if len(s) - ndim + k >= 0]
        big = [d for d in dims if not _is_const(d, 1)]
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
        if not (_is_const(d, 1) or d == target):
            raise ShapeError(f"shape {tuple(str(d) for d in t.shape)} does not broadcast to "
                             f"{tuple(str(d) for d in shape)}", op=op, param=param)
        index.append(idx(0) if _is_const(d, 1) else ivars[k - lead])
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
    """``0 < d`` for the dims that may be 0 at run time: a clamped load from an empty dim would
    still read out of bounds, so such a block runs only when the dims have elements."""
    return all_of([E.BinaryOp("LT", idx(0), d) for d in dims if not _is_const(d) or
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
    _where(b, _nonempty(data.shape[:len(indices)]))
    return b.prim_func([y], "index_tensor")


@rule("index_put")
def _index_put(call):
    """A copy of data, then out[i0[b], i1[b], ...] = values[b] (+= with accumulate, in loop
    order, so repeated indices add up as numpy's ``add.at``); out-of-range writes are skipped."""
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
    b.store(y, shape, at_of, value, y.name)
    ivars = _stage_vars(b)
    _where(b, all_of([in_bounds(k, data.shape[d]) for d, k in enumerate(at_of(*ivars))]))
    return b.prim_func([y], "index_put")


def _stage_vars(b) -> list:
    """The block vars of the last stage (its loops' bindings, outermost first)."""
    s = b.stages[-1].stmt
    while isinstance(s, For):
        s = s.body
    return [iv.var for iv in s.iter_vars]


@rule("slice_scatter")
def _slice_scatter(call):
    """out = input with input[.., start:end:step, ..] = src, in one pass over the output."""
    b, (data, src) = inputs(call)
    out = output(call)
    axis = int(attrs(call).get("axis", 0)) % data.ndim
    start, end, step = (prim_arg(call, k) for k in (2, 3, 4))
    dim = data.shape[axis]
    if None in (start, end, step) or not _is_const(dim):
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
    if k is None or not _is_const(k) or k.value > x.ndim or strides.shape != begin.shape:
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
    seq, batch = int(a.get("seq_axis", 1)) % data.ndim, int(a.get("batch_axis", 0)) % data.ndim
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


# --------------------------------------------------------------------------- layout_transform

def _inverse(index_map, op: str = "layout_transform"):
    """Each input var as an expression of the output indices, from a map whose outputs are
    input vars, or ``v // f`` and ``v % f`` pairs (a split): the maps msc's frontends make."""
    names = [v.name for v in index_map.initial_indices]
    plain, div, mod = {}, {}, {}
    for k, e in enumerate(index_map.final_indices):
        if isinstance(e, E.Var) and e.name in names and e.name not in plain:
            plain[e.name] = k
        elif (isinstance(e, E.BinaryOp) and e.op in ("FloorDiv", "FloorMod")
              and isinstance(e.a, E.Var) and _is_const(e.b) and e.b.value > 0):
            table = div if e.op == "FloorDiv" else mod
            if e.a.name in table:
                break
            table[e.a.name] = (k, e.b.value)
        else:
            break
    else:
        if all(_inverse_ok(v, plain, div, mod) for v in names):
            return plain, div, mod
    raise UnsupportedOpError(f"index map {index_map} is not a permutation with splits",
                             op=op, param="index_map",
                             hint="supported: lambda n, c, h, w: (n, c // 4, h, w, c % 4)")


def _inverse_ok(v: str, plain: dict, div: dict, mod: dict) -> bool:
    if v in plain:
        return v not in div and v not in mod
    return v in div and v in mod and div[v][1] == mod[v][1]


@rule("layout_transform")
def _layout_transform(call):
    """out[o] = x[inverse(o)] where o maps back inside x, else pad_value (padding)."""
    b, (x,) = inputs(call)
    out, a = output(call), attrs(call)
    index_map = a["index_map"]
    plain, div, mod = _inverse(index_map)
    pad = getattr(a.get("pad_value"), "value", a.get("pad_value"))
    pad = const(getattr(pad, "value", pad) or 0, out.dtype)

    def value(*o):
        at, conds = [], []
        for d, v in enumerate(index_map.initial_indices):
            if v.name in plain:
                at.append(o[plain[v.name]])
                continue
            (kd, f), km = div[v.name], mod[v.name][0]
            pos = E.add(E.mul(o[kd], f), o[km])
            at.append(pos)
            if not (_is_const(x.shape[d]) and x.shape[d].value % f == 0):
                conds.append(E.BinaryOp("LT", pos, idx(x.shape[d])))
        cond = all_of(conds)
        return x[tuple(at)] if cond is None else te.if_then_else(cond, x[tuple(at)], pad)
    y = b.compute(out.values, value, "T_layout_trans")
    return b.prim_func([y], "te_layout_transform")


# ------------------------------------------------------------------------------- creation

@rule("meshgrid")
def _meshgrid(call):
    """out_k[i...] = x_k[i[axis_k]]; "xy" indexing swaps the first two axes."""
    b, xs = inputs(call)
    outs = outputs(call)
    swap = attrs(call).get("indexing", "ij") == "xy" and len(xs) > 1
    ys = []
    for k, (x, o) in enumerate(zip(xs, outs)):
        axis = {0: 1, 1: 0}.get(k, k) if swap else k
        ys.append(b.compute(o.values, lambda *i, x=x, axis=axis, dt=o.dtype: cast(
            x[i[axis]], dt), "T_meshgrid", dtype=o.dtype))
    return b.prim_func(ys, "meshgrid")


@rule("hamming_window")
def _hamming_window(call):
    """alpha - beta * cos(2 pi i / N) in float64, N = size (periodic) or size - 1; a window of
    one element is 1."""
    b, _ = inputs(call)
    out = output(call)
    periodic, alpha, beta = (prim_arg(call, k) for k in (1, 2, 3))
    if None in (periodic, alpha, beta):
        raise UnsupportedOpError("hamming_window needs constant periodic / alpha / beta",
                                 op="hamming_window")
    size = out.values[0]
    f64 = "float64"
    n = E.Cast(f64, idx(size) if periodic else E.sub(idx(size), 1))

    def value(i):
        angle = E.BinaryOp("Div", E.BinaryOp("Mul", const(6.283185307179586, f64),
                                             E.Cast(f64, i)), n)
        w = E.BinaryOp("Sub", const(alpha, f64), E.BinaryOp(
            "Mul", const(beta, f64), E.PrimCall("cos", [angle], f64)))
        one = E.BinaryOp("EQ", idx(size), idx(1))
        return cast(te.select(one, const(1, f64), w), out.dtype)
    y = b.compute(out.values, value, "T_hamming_window", dtype=out.dtype)
    return b.prim_func([y], "hamming_window")
