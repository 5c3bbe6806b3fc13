"""Sort-family rules: sort, argsort, topk and median run a stable bottom-up merge sort per
row (O(n log n)); bucketize runs a binary search per element (O(log m)).

The PrimFuncs are written as plain statements (no blocks): a row is copied into a contiguous
workspace of keys (plus int positions for the ops that return indices), insertion-sorted in
runs of :data:`RUN`, then merged in passes of doubling width, back and forth between two
workspaces. Merges are branch-free (``T.Select`` picks the element and moves the cursors).
Scalars that change inside loops (cursors, the width) are one-element local buffers, since
TIR lets are immutable; LLVM keeps them in registers.

The order is the numpy facts' (``numpy_ref``): ascending with NaN last; argsort(descending)
and topk(largest) sort the key ``-x`` (so NaN stays last, ties keep their order and the
smallest int, whose negation wraps, comes first); sort(descending) is the ascending sort
reversed (NaN first)::

    func = legalize_call(call)      # call: R.argsort(x, axis=0, descending=True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...errors import UnsupportedOpError
from ...tir import expr as E
from ...tir.function import (
    AllocBuffer,
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    IfThenElse,
    LetStmt,
    PrimFunc,
    While,
    seq,
)
from . import te
from .common import attrs, axes_of, inputs, op_name, outputs, rule
from .te import cast, const, idx

__all__ = ["RUN", "Code", "Order", "SortCode", "order_of"]

RUN = 8  # rows are insertion-sorted in runs of this length before merging
_I64 = "int64"


def _bin(op: str, a, b) -> E.PrimExpr:
    return E.BinaryOp(op, a, b)


def _and(a, b) -> E.PrimExpr:
    return _bin("And", a, b)


def _ceildiv(a: E.PrimExpr, b) -> E.PrimExpr:
    return E.floordiv(E.add(a, E.sub(b, 1)), b)


# ------------------------------------------------------------------------------- order

@dataclass(frozen=True)
class Order:
    """How a row is ordered: the workspace dtype of keys, the key of an element, and the
    strict "goes before" on two keys (ties keep their order: the merge is stable)."""

    dtype: str
    key: Callable[[E.PrimExpr], E.PrimExpr]
    before: Callable[[E.PrimExpr, E.PrimExpr], E.PrimExpr]


def _nan_last(a, b) -> E.PrimExpr:
    """``a`` goes before ``b`` ascending with NaN last: a < b, or b is NaN and a is not."""
    return _bin("Or", _bin("LT", a, b), _and(_bin("NE", b, b), _bin("EQ", a, a)))


def order_of(dtype: str, negate: bool, op: str) -> Order:
    """The order of numpy's stable argsort of ``x`` (``negate``: of ``-x``)."""
    if dtype == "bool":  # the facts never negate bools; a byte compares as 0 < 1
        return Order("int8", lambda v: cast(v, "int8"), lambda a, b: _bin("LT", a, b))
    if te.is_float(dtype):
        if negate:  # -a < -b is b < a; -NaN is still NaN, so NaN stays last
            return Order(dtype, lambda v: v, lambda a, b: _bin("Or", _bin("LT", b, a), _and(
                _bin("NE", b, b), _bin("EQ", a, a))))
        return Order(dtype, lambda v: v, _nan_last)
    if dtype.startswith("int"):
        if negate:  # wraps like numpy's -x (INT_MIN stays INT_MIN)
            return Order(dtype, lambda v: _bin("Mul", v, const(-1, dtype)),
                         lambda a, b: _bin("LT", a, b))
        return Order(dtype, lambda v: v, lambda a, b: _bin("LT", a, b))
    if dtype.startswith("uint") and not negate:
        return Order(dtype, lambda v: v, lambda a, b: _bin("LT", a, b))
    raise UnsupportedOpError(f"{'descending ' if negate else ''}sorting of {dtype} has no "
                             "legalization", op=op)


# ------------------------------------------------------------------------- statements

class Code:
    """Statements of one prim func: fresh names, workspaces, lets and loops."""

    def __init__(self):
        self.names: set = set()
        self.allocs: list = []

    def name(self, base: str) -> str:
        name, n = base, 0
        while name in self.names:
            n += 1
            name = f"{base}_{n}"
        self.names.add(name)
        return name

    def buffer(self, base: str, shape, dtype: str, scope: str = "global") -> Buffer:
        buf = Buffer(self.name(base), tuple(idx(d) for d in shape), dtype, scope=scope)
        self.allocs.append(AllocBuffer(buf))
        return buf

    def cell(self, base: str) -> Buffer:
        """A mutable int64 scalar."""
        return self.buffer(base, (1,), _I64, "local")

    def let(self, base: str, value: E.PrimExpr, dtype: str | None = None):
        var = E.Var(self.name(base), dtype or value.dtype)
        return var, LetStmt(var, value)

    def loop(self, base: str, extent, body: Callable) -> For:
        var = E.Var(self.name(base), _I64)
        return For(var, idx(0), idx(extent), "serial", seq(body(var)))

    def prim_func(self, params: list, body: list, name: str) -> PrimFunc:
        return PrimFunc(params, seq(self.allocs + body), {"tirx.noalias": True}, name=name,
                        private=True)


def _get(cell: Buffer) -> E.PrimExpr:
    return BufferLoad(cell, (idx(0),))


def _put(cell: Buffer, value) -> BufferStore:
    return BufferStore(cell, idx(value), (idx(0),))


class SortCode(Code):
    """The statements of one prim func that sorts rows of length ``n`` in workspaces.

    ``sort_row(read)`` sorts one row (``read(t)``: element ``t``); then ``key(t)`` is the
    t-th key in order and ``pos(t)`` its position in the row (when ``with_index``).
    """

    def __init__(self, n: E.PrimExpr, order: Order, with_index: bool):
        super().__init__()
        self.n, self.order = idx(n), order
        self.keys = [self.buffer("keys", (self.n,), order.dtype) for _ in range(2)]
        small = isinstance(self.n, E.IntImm) and self.n.value < 2 ** 31
        self.idx_dtype = "int32" if small else _I64
        self.pos_bufs = [self.buffer("pos", (self.n,), self.idx_dtype)
                         for _ in range(2)] if with_index else []
        self.cells = {c: self.cell(c) for c in ("i", "j", "k", "w")}

    def get(self, cell: str) -> E.PrimExpr:
        return _get(self.cells[cell])

    def put(self, cell: str, value) -> BufferStore:
        return _put(self.cells[cell], value)

    def key(self, t) -> E.PrimExpr:
        return BufferLoad(self.keys[0], (idx(t),))

    def pos(self, t) -> E.PrimExpr:
        return BufferLoad(self.pos_bufs[0], (idx(t),))

    # -- the sort ---------------------------------------------------------------------------
    def _pair(self, which: int) -> list:
        return [self.keys[which]] + ([self.pos_bufs[which]] if self.pos_bufs else [])

    def _move(self, dst: int, d_at, src: int, s_at) -> list:
        """dst[d_at] = src[s_at] for keys (and positions)."""
        return [BufferStore(b_dst, BufferLoad(b_src, (idx(s_at),)), (idx(d_at),))
                for b_dst, b_src in zip(self._pair(dst), self._pair(src))]

    def sort_row(self, read: Callable) -> list:
        """Load, insertion-sort runs, merge; the sorted row ends in workspace 0."""
        def load(t):
            stmts = [BufferStore(self.keys[0], self.order.key(read(t)), (t,))]
            if self.pos_bufs:
                stmts.append(BufferStore(self.pos_bufs[0], cast(t, self.idx_dtype), (t,)))
            return stmts
        return [self.loop("t", self.n, load), self._runs(), *self._merges()]

    def _runs(self) -> For:
        """Insertion sort of each run [s, min(s + RUN, n))."""
        keys, before = self.keys[0], self.order.before

        def run(rb):
            s, s_let = self.let("s", E.mul(rb, RUN))
            e, e_let = self.let("e", E.min(E.add(s, RUN), self.n))

            def insert(t):
                p, p_let = self.let("p", E.add(E.add(s, t), 1))
                v, v_let = self.let("v", BufferLoad(keys, (p,)))
                stmts = [p_let, v_let]
                if self.pos_bufs:
                    vi, vi_let = self.let("vi", BufferLoad(self.pos_bufs[0], (p,)))
                    stmts.append(vi_let)
                j = self.get("j")
                prev = BufferLoad(keys, (E.max(E.sub(j, 1), s),))
                jv, jv_let = self.let("jv", j)
                shift = [jv_let, *self._move(0, jv, 0, E.sub(jv, 1)), self.put("j", E.sub(jv, 1))]
                jf, jf_let = self.let("jf", j)
                stmts += [self.put("j", p), While(_and(_bin("GT", j, s), before(v, prev)),
                                                  seq(shift)),
                          jf_let, BufferStore(keys, v, (jf,))]
                if self.pos_bufs:
                    stmts.append(BufferStore(self.pos_bufs[0], vi, (jf,)))
                return stmts
            return [s_let, e_let, self.loop("q", E.sub(E.sub(e, s), 1), insert)]
        return self.loop("rb", _ceildiv(self.n, RUN), run)

    def _merges(self) -> list:
        """Passes of width w (0 -> 1) and 2w (1 -> 0) until one run covers the row."""
        w, w_let = self.let("wv", self.get("w"))
        body = [w_let, self._pass(0, 1, w), self._pass(1, 0, E.mul(w, 2)),
                self.put("w", E.mul(w, 4))]
        return [self.put("w", RUN), While(_bin("LT", self.get("w"), self.n), seq(body))]

    def _pass(self, src: int, dst: int, width: E.PrimExpr) -> For:
        """Merge runs [lo, mid) and [mid, hi) of ``src`` into ``dst`` for each block."""
        n, keys = self.n, self.keys[src]

        def block(blk):
            lo, lo_let = self.let("lo", E.mul(blk, E.mul(width, 2)))
            mid, mid_let = self.let("mid", E.min(E.add(lo, width), n))
            hi, hi_let = self.let("hi", E.min(E.add(lo, E.mul(width, 2)), n))
            # In bounds even when mid == hi == n; the merge is skipped when already ordered.
            unordered = self.order.before(BufferLoad(keys, (E.min(mid, E.sub(hi, 1)),)),
                                          BufferLoad(keys, (E.sub(mid, 1),)))
            copy = self.loop("c", E.sub(hi, lo), lambda t: self._move(
                dst, E.add(lo, t), src, E.add(lo, t)))
            merge = IfThenElse(_and(_bin("LT", mid, hi), unordered),
                               seq(self._merge(src, dst, lo, mid, hi)), copy)
            return [lo_let, mid_let, hi_let, merge]
        return self.loop("blk", _ceildiv(n, E.mul(width, 2)), block)

    def _merge(self, src: int, dst: int, lo, mid, hi) -> list:
        keys, before = self.keys[src], self.order.before
        iv, i_let = self.let("iv", self.get("i"))
        jv, j_let = self.let("jv", self.get("j"))
        kv, k_let = self.let("kv", self.get("k"))
        a, a_let = self.let("a", BufferLoad(keys, (iv,)))
        b, b_let = self.let("b", BufferLoad(keys, (jv,)))
        r, r_let = self.let("right", before(b, a))
        step = [i_let, j_let, k_let, a_let, b_let, r_let,
                BufferStore(self.keys[dst], te.select(r, b, a), (kv,))]
        if self.pos_bufs:
            pos = self.pos_bufs[src]
            step.append(BufferStore(self.pos_bufs[dst], te.select(
                r, BufferLoad(pos, (jv,)), BufferLoad(pos, (iv,))), (kv,)))
        step += [self.put("i", te.select(r, iv, E.add(iv, 1))),
                 self.put("j", te.select(r, E.add(jv, 1), jv)), self.put("k", E.add(kv, 1))]
        cond = _and(_bin("LT", self.get("i"), mid), _bin("LT", self.get("j"), hi))
        ie, ie_let = self.let("ie", self.get("i"))
        je, je_let = self.let("je", self.get("j"))
        ke, ke_let = self.let("ke", self.get("k"))
        left = E.sub(mid, ie)
        return [self.put("i", lo), self.put("j", mid), self.put("k", lo), While(cond, seq(step)),
                ie_let, je_let, ke_let,
                self.loop("c", left, lambda t: self._move(dst, E.add(ke, t), src, E.add(ie, t))),
                self.loop("c", E.sub(hi, je), lambda t: self._move(
                    dst, E.add(E.add(ke, left), t), src, E.add(je, t)))]

# ------------------------------------------------------------------------------- rows

def _row_loops(code: SortCode, shape: tuple, axis: int, body: Callable) -> list:
    """Loops over every index of ``shape`` but ``axis``; ``body(at)`` with ``at(t)`` the
    index of element ``t`` of the row."""
    def nest(k: int, outer: list) -> list:
        if k == len(shape):
            return body(lambda t: tuple(outer[:axis]) + (idx(t),) + tuple(outer[axis:]))
        if k == axis:
            return nest(k + 1, outer)
        return [code.loop(f"ax{k}", shape[k], lambda v: nest(k + 1, outer + [v]))]
    return nest(0, [])


def _flat_index(t: E.PrimExpr, shape: tuple) -> tuple:
    """The index of flat position ``t`` in a C-contiguous ``shape``."""
    out, rest = [], idx(t)
    for d in reversed(shape[1:]):
        out.insert(0, E.floormod(rest, d))
        rest = E.floordiv(rest, d)
    return (rest, *out) if shape else ()


def _reduced_at(at: tuple, axis: int, keepdims: bool) -> tuple:
    return at[:axis] + ((idx(0),) if keepdims else ()) + at[axis + 1:]


def _known_rows(n: E.PrimExpr, op: str) -> None:
    if isinstance(n, E.IntImm) and n.value == 0:
        raise UnsupportedOpError("the median of an empty axis is undefined", op=op)


# ------------------------------------------------------------------------------- rules

def _sorting(call, negate: bool, with_index: bool):
    """(builder, x, axis, code) for a call sorting ``x`` along its ``axis`` attr."""
    b, (x,) = inputs(call)
    axis = int(attrs(call)["axis"]) % max(x.ndim, 1)
    if x.ndim == 0:
        raise UnsupportedOpError("sorting a 0-d tensor", op=op_name(call))
    order = order_of(x.dtype, negate, op_name(call))
    return b, x, axis, SortCode(x.shape[axis], order, with_index)


@rule("sort")
def _sort(call):
    """out = the ascending sort, reversed for ``descending`` (numpy's flip)."""
    descending = bool(attrs(call)["descending"])
    b, x, axis, code = _sorting(call, False, False)
    out = b.output(outputs(call)[0].values, outputs(call)[0].dtype, "T_sort")
    last = E.sub(code.n, 1)

    def row(at):
        write = code.loop("t", code.n, lambda t: [BufferStore(
            out.buffer, cast(code.key(E.sub(last, t) if descending else t), out.dtype),
            at(t))])
        return [*code.sort_row(lambda t: x[at(t)]), write]
    body = _row_loops(code, x.shape, axis, row)
    return code.prim_func([x.buffer, out.buffer], body, "sort")


@rule("argsort")
def _argsort(call):
    descending = bool(attrs(call)["descending"])
    b, x, axis, code = _sorting(call, descending, True)
    o = outputs(call)[0]
    out = b.output(o.values, o.dtype, "T_argsort")

    def row(at):
        write = code.loop("t", code.n, lambda t: [BufferStore(
            out.buffer, cast(code.pos(t), o.dtype), at(t))])
        return [*code.sort_row(lambda t: x[at(t)]), write]
    body = _row_loops(code, x.shape, axis, row)
    return code.prim_func([x.buffer, out.buffer], body, "argsort")


@rule("topk")
def _topk(call):
    """The first k of the stable argsort of -x (largest) or x; k from the output shape."""
    a = attrs(call)
    if a["ret_type"] not in ("both", "values", "indices"):
        raise UnsupportedOpError(f"ret_type {a.get('ret_type')!r}", op="topk")
    b, x, axis, code = _sorting(call, bool(a["largest"]), True)
    outs = outputs(call)
    ret = a["ret_type"]
    kinds = {"both": ("values", "indices"), "values": ("values",),
             "indices": ("indices",)}[ret]
    bufs = [b.output(o.values, o.dtype, f"T_topk_{kind}") for o, kind in zip(outs, kinds)]
    k = outs[0].values[axis]

    def row(at):
        def write(t):
            p = code.pos(t)
            return [BufferStore(buf.buffer, x[at(p)] if kind == "values" else
                                cast(p, buf.dtype), at(t)) for buf, kind in zip(bufs, kinds)]
        return [*code.sort_row(lambda t: x[at(t)]), code.loop("t", k, write)]
    body = _row_loops(code, x.shape, axis, row)
    return code.prim_func([x.buffer] + [t.buffer for t in bufs], body, "topk")


@rule("median")
def _median(call):
    """The lower median: element (n - 1) // 2 of the stable ascending sort; along one axis
    also its index (int64). Several axes have no numpy fact to match: not legalized."""
    a = attrs(call)
    keepdims = bool(a["keepdims"])
    b, (x,) = inputs(call)
    outs = outputs(call)
    order = order_of(x.dtype, False, "median")
    if a.get("axis") is None:
        code = SortCode(_size(x.shape), order, False)
        _known_rows(code.n, "median")
        out = b.output(outs[0].values, outs[0].dtype, "T_median")
        mid = E.floordiv(E.sub(code.n, 1), 2)
        body = [*code.sort_row(lambda t: x[_flat_index(t, x.shape)]),
                BufferStore(out.buffer, cast(code.key(mid), out.dtype),
                            tuple(idx(0) for _ in outs[0].values))]
        return code.prim_func([x.buffer, out.buffer], _guard(code.n, body), "median")
    axes = axes_of(a.get("axis"), x.ndim)
    if len(axes) != 1:
        raise UnsupportedOpError("median over several axes", op="median")
    axis = axes[0]
    code = SortCode(x.shape[axis], order, True)
    _known_rows(code.n, "median")
    values = b.output(outs[0].values, outs[0].dtype, "T_median")
    indices = b.output(outs[1].values, outs[1].dtype, "T_median_indices")
    mid = E.floordiv(E.sub(code.n, 1), 2)

    def row(at):
        p, p_let = code.let("p", code.pos(mid), _I64)
        where = _reduced_at(at(0), axis, keepdims)
        return _guard(code.n, [*code.sort_row(lambda t: x[at(t)]), p_let,
                               BufferStore(values.buffer, x[at(p)], where),
                               BufferStore(indices.buffer, cast(p, indices.dtype), where)])
    body = _row_loops(code, x.shape, axis, row)
    return code.prim_func([x.buffer, values.buffer, indices.buffer], body, "median")


def _size(shape: tuple) -> E.PrimExpr:
    total = idx(1)
    for d in shape:
        total = E.mul(total, d)
    return total


def _guard(n: E.PrimExpr, body: list) -> list:
    """``body`` only for non-empty rows (a symbolic length may be 0)."""
    if isinstance(n, E.IntImm):
        return body
    return [IfThenElse(_bin("LT", idx(0), n), seq(body))]


@rule("bucketize")
def _bucketize(call):
    """out[i] = numpy.searchsorted(boundaries, x[i], side): the number of boundaries before
    x[i] (``right``: not after it), compared with NaN last in the common dtype."""
    a = attrs(call)
    b, (x, bounds) = inputs(call)
    o = outputs(call)[0]
    if bounds.ndim != 1:
        raise UnsupportedOpError("bucketize boundaries must be 1-d", op="bucketize")
    common = _common_dtype(x.dtype, bounds.dtype)
    before = order_of(common, False, "bucketize").before
    out = b.output(o.values, o.dtype, "T_bucketize")
    code = Code()
    lo_c, hi_c = code.cell("lo"), code.cell("hi")
    m = bounds.shape[0]

    def element(*i):
        v, v_let = code.let("v", cast(x[tuple(i)], common))
        lo, hi = _get(lo_c), _get(hi_c)
        mid, mid_let = code.let("mid", E.floordiv(E.add(lo, hi), 2))
        at = cast(bounds[(mid,)], common)
        # left: lo moves past boundaries < v; right: past boundaries not > v
        up = E.Not(before(v, at)) if a.get("right") else before(at, v)
        go, go_let = code.let("up", up)
        step = [mid_let, go_let,
                _put(lo_c, te.select(go, E.add(mid, 1), lo)), _put(hi_c, te.select(go, hi, mid))]
        return [v_let, _put(lo_c, 0), _put(hi_c, m),
                While(_bin("LT", lo, hi), seq(step)),
                BufferStore(out.buffer, cast(lo, o.dtype), tuple(i))]

    def nest(k: int, ivars: list) -> list:
        if k == x.ndim:
            return element(*ivars)
        return [code.loop(f"ax{k}", x.shape[k], lambda v: nest(k + 1, ivars + [v]))]
    return code.prim_func([x.buffer, bounds.buffer, out.buffer], nest(0, []), "bucketize")


def _common_dtype(a: str, b: str) -> str:
    """numpy's promotion of the two dtypes (searchsorted compares in it)."""
    if a == b:
        return a
    try:
        return np.result_type(np.dtype(a), np.dtype(b)).name
    except TypeError:
        raise UnsupportedOpError(f"bucketize of {a} into {b} boundaries",
                                 op="bucketize") from None
