"""``unique`` (flattened, ``axis=None``) as a native kernel: TIR PrimFuncs compiled once per
dtype, for every length (the length is a symbolic dim).

Its output sizes depend on the data, so no legalization rule can write them into planned
buffers: this kernel returns fresh arrays (``allocates = True``), like a numpy fact does.
1. a stable merge sort of the flattened data (legalize/sort.py's :class:`SortCode`): sorted
   keys and their positions;
2. one pass over the sorted keys: a new group where a key differs from the one before (NaNs
   are one group, numpy's ``equal_nan``); per group its value, first position (the smallest:
   the sort is stable) and count, per element its group (the inverse);
3. for ``sorted=False``, groups reordered by first position in O(n): mark each first position
   with its group, then walk the positions in order::

    kernel = UniqueFact().make(site)     # site: R.unique(x, sorted, index, inverse, counts)
    values, counts = kernel(x)
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ...errors import ShapeError
from ...relax.op.registry import attach
from ...relax.struct_info import PrimStructInfo
from ...tir import expr as E
from ...tir.function import Buffer, BufferLoad, BufferStore, IfThenElse, seq
from ..legalize import te
from ..legalize.sort import Code, SortCode, order_of
from ..lowering.compile import compile_prim_func
from .base import Kernel, KernelFact, Site

__all__ = ["UniqueFact", "UniqueKernel", "unique_funcs"]

_N = E.Var("n")
_I64 = "int64"


def _vec(name: str, dtype: str) -> Buffer:
    return Buffer(name, (_N,), dtype)


def _sort_func(dtype: str):
    """keys[t], pos[t]: the t-th element of the stable ascending sort (NaN last)."""
    x, keys, pos = _vec("x", dtype), _vec("keys_out", dtype), _vec("pos_out", _I64)
    code = SortCode(_N, order_of(dtype, False, "unique"), True)

    def write(t):
        return [BufferStore(keys, te.cast(code.key(t), dtype), (t,)),
                BufferStore(pos, te.cast(code.pos(t), _I64), (t,))]
    body = [*code.sort_row(lambda t: BufferLoad(x, (t,))), code.loop("t", _N, write)]
    return code.prim_func([x, keys, pos], body, "unique_sort")


def _same(a, b, dtype: str):
    eq = E.BinaryOp("EQ", a, b)
    if not te.is_float(dtype):
        return eq
    both_nan = E.BinaryOp("And", E.BinaryOp("NE", a, a), E.BinaryOp("NE", b, b))
    return E.BinaryOp("Or", eq, both_nan)


def _runs_func(dtype: str):
    """Groups of equal sorted keys: values, first, counts per group; inverse per element;
    the number of groups in count[0]."""
    keys, pos = _vec("keys", dtype), _vec("pos", _I64)
    values, first = _vec("values", dtype), _vec("first", _I64)
    inverse, counts = _vec("inverse", _I64), _vec("counts", _I64)
    count = Buffer("count", (te.idx(1),), _I64)
    code = Code()
    g = code.cell("g")
    gv = BufferLoad(g, (te.idx(0),))

    def step(t):
        prev = BufferLoad(keys, (E.max(E.sub(t, 1), te.idx(0)),))
        key = BufferLoad(keys, (t,))
        new = E.BinaryOp("Or", E.BinaryOp("EQ", t, te.idx(0)),
                         E.Not(_same(key, prev, dtype)))
        start = seq([BufferStore(g, E.add(gv, 1), (te.idx(0),)),
                     BufferStore(values, key, (gv,)),
                     BufferStore(first, BufferLoad(pos, (t,)), (gv,)),
                     BufferStore(counts, te.idx(0), (gv,))])
        return [IfThenElse(new, start),
                BufferStore(counts, E.add(BufferLoad(counts, (gv,)), 1), (gv,)),
                BufferStore(inverse, gv, (BufferLoad(pos, (t,)),))]
    body = [BufferStore(g, te.idx(-1), (te.idx(0),)), code.loop("t", _N, step),
            BufferStore(count, E.add(gv, 1), (te.idx(0),))]
    return code.prim_func([keys, pos, values, first, inverse, counts, count], body,
                          "unique_runs")


def _reorder_func(dtype: str):
    """Groups in order of first position (``sorted=False``), the inverse renumbered."""
    ins = [_vec("values", dtype), _vec("first", _I64), _vec("counts", _I64),
           _vec("inverse", _I64)]
    count = Buffer("count", (te.idx(1),), _I64)
    outs = [_vec(b.name + "_out", b.dtype) for b in ins]
    code = Code()
    mark, rank = code.buffer("mark", (_N,), _I64), code.buffer("rank", (_N,), _I64)
    c = code.cell("c")
    cv = BufferLoad(c, (te.idx(0),))
    m = BufferLoad(count, (te.idx(0),))

    def place(t):
        o = BufferLoad(mark, (t,))
        moves = [BufferStore(out, BufferLoad(src, (o,)), (cv,)) for src, out in
                 zip(ins[:3], outs[:3])]
        return [IfThenElse(E.BinaryOp("GE", o, te.idx(0)), seq(
            [*moves, BufferStore(rank, cv, (o,)), BufferStore(c, E.add(cv, 1), (te.idx(0),))]))]
    body = [code.loop("t", _N, lambda t: [BufferStore(mark, te.idx(-1), (t,))]),
            code.loop("gr", m, lambda gr: [BufferStore(mark, gr, (BufferLoad(ins[1], (gr,)),))]),
            BufferStore(c, te.idx(0), (te.idx(0),)), code.loop("t", _N, place),
            code.loop("t", _N, lambda t: [BufferStore(outs[3], BufferLoad(
                rank, (BufferLoad(ins[3], (t,)),)), (t,))])]
    return code.prim_func([*ins, count, *outs], body, "unique_reorder")


@cache
def unique_funcs(dtype: str):
    """The three compiled kernels for ``dtype`` (sort, runs, reorder)."""
    return tuple(compile_prim_func(f(dtype)) for f in (_sort_func, _runs_func, _reorder_func))


class UniqueKernel(Kernel):
    """``kernel(x) -> values`` or ``(values, *[first, inverse, counts per flag])``."""

    inputs = (0,)
    allocates = True  # returns new arrays: no planned output buffers

    def __init__(self, dtype: str, is_sorted: bool, flags: tuple):
        self.dtype, self.is_sorted, self.flags = np.dtype(dtype), is_sorted, flags
        self.sort, self.runs, self.reorder = unique_funcs(dtype)

    def __call__(self, x):
        if not isinstance(x, np.ndarray) or x.dtype != self.dtype:
            raise ShapeError(f"expected a {self.dtype} numpy array, got "
                             f"{getattr(x, 'dtype', type(x).__name__)}", op="unique", param="x")
        flat = np.ascontiguousarray(x).reshape(-1)
        n = flat.size
        keys, pos = np.empty(n, self.dtype), np.empty(n, np.int64)
        self.sort(flat, keys, pos)
        parts = [np.empty(n, self.dtype)] + [np.empty(n, np.int64) for _ in range(3)]
        count = np.zeros(1, np.int64)
        values, first, inverse, counts = parts
        self.runs(keys, pos, values, first, inverse, counts, count)
        if not self.is_sorted:
            outs = [np.empty_like(p) for p in parts]
            self.reorder(values, first, counts, inverse, count, *outs)
            values, first, counts, inverse = outs[0], outs[1], outs[2], outs[3]
        m = int(count[0])
        extra = [a for a, f in zip((first[:m], inverse, counts[:m]), self.flags) if f]
        return (values[:m].copy(), *(a.copy() for a in extra)) if extra else values[:m].copy()


def _const_flag(site: Site, i: int):
    s = site.args[i].sinfo if i < len(site.args) else None
    value = getattr(s, "value", None) if isinstance(s, PrimStructInfo) else None
    return bool(value.value) if isinstance(value, E.IntImm) else None


class UniqueFact(KernelFact):
    """Flattened unique (no ``axis``) of int, uint, bool and float tensors."""

    def match(self, site: Site) -> bool:
        x = site.tensor(0)
        flags = [_const_flag(site, i) for i in range(1, 5)]
        return (x is not None and len(site.args) == 5 and None not in flags
                and _supported(x.dtype))

    def make(self, site: Site) -> Kernel:
        flags = [_const_flag(site, i) for i in range(1, 5)]
        return UniqueKernel(site.tensor(0).dtype, flags[0], tuple(flags[1:]))


def _supported(dtype: str) -> bool:
    try:
        order_of(dtype, False, "unique")
        np.dtype(dtype)
    except Exception:  # noqa: BLE001 - bfloat16 / unsupported dtypes use the numpy fact
        return False
    return True


attach("unique", "kernel", UniqueFact())
