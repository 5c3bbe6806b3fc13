"""Row helpers for the transformer kernels (softmax, layer norm): vector reductions and maps.

LLVM's loop vectorizer turns a plain element loop into vector code when nothing is carried
from one element to the next (:func:`row_map`); a float reduction it would only vectorize with
fast-math flags on the whole loop, so reductions are written with explicit vectors here
(:func:`row_reduce`): ``lanes`` partial results, a masked load for the tail, one horizontal
reduction at the end. The order of the additions is fixed by the code, so a row's result does
not depend on threads or on where the row sits in memory::

    m = row_reduce(b, vec, ptr, n, "max")                  # max over ptr[0:n]
    s = row_reduce(b, vec, ptr, n, "add", lambda v: v * v) # sum of squares
    row_map(b, n, lambda j: ...)                           # an element loop
"""

from __future__ import annotations

import math

from llvmlite import ir

from ..llvm.loops import F32, I1, I32, I64, entry_alloca, for_range

__all__ = ["Vec", "horizontal", "row_apply", "row_map", "row_reduce", "splat_f32"]

_REDUCE = {  # kind -> (identity, vector op intrinsic, horizontal intrinsic)
    "max": (-math.inf, "llvm.maxnum", "llvm.vector.reduce.fmax"),
    "add": (0.0, None, "llvm.vector.reduce.fadd"),
}


class Vec:
    """A float vector of ``lanes`` and the intrinsics the row helpers call, for one module."""

    def __init__(self, module: ir.Module, lanes: int):
        self.module, self.lanes = module, lanes
        self.ty = ir.VectorType(F32, lanes)
        self.mask_ty = ir.VectorType(I1, lanes)
        self.index_ty = ir.VectorType(I64, lanes)
        self.iota = ir.Constant(self.index_ty, list(range(lanes)))
        suffix = f"v{lanes}f32"
        self.masked_load = self._declare(f"llvm.masked.load.{suffix}.p0", self.ty,
                                         [self.ty.as_pointer(), I32, self.mask_ty, self.ty])
        self.masked_store = self._declare(f"llvm.masked.store.{suffix}.p0", ir.VoidType(),
                                          [self.ty, self.ty.as_pointer(), I32, self.mask_ty])
        self.maxnum = self._declare(f"llvm.maxnum.{suffix}", self.ty, [self.ty, self.ty])
        self.reduce_max = self._declare(f"llvm.vector.reduce.fmax.{suffix}", F32, [self.ty])
        self.reduce_add = self._declare(f"llvm.vector.reduce.fadd.{suffix}", F32,
                                        [F32, self.ty])

    def _declare(self, name: str, ret, args) -> ir.Function:
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        return ir.Function(self.module, ir.FunctionType(ret, args), name=name)

    def splat(self, value: float) -> ir.Constant:
        return ir.Constant(self.ty, [value] * self.lanes)

    def tail_mask(self, b: ir.IRBuilder, j: ir.Value, n: ir.Value) -> ir.Value:
        """Lanes ``j + lane < n``."""
        limit = b.sub(n, j)
        splat = b.insert_element(ir.Constant(self.index_ty, None), limit, I32(0))
        splat = b.shuffle_vector(splat, ir.Constant(self.index_ty, None),
                                 ir.Constant(ir.VectorType(I32, self.lanes), [0] * self.lanes))
        return b.icmp_signed("<", self.iota, splat)

    def load(self, b: ir.IRBuilder, ptr: ir.Value, mask: ir.Value, fill: float) -> ir.Value:
        vptr = b.bitcast(ptr, self.ty.as_pointer())
        return b.call(self.masked_load, [vptr, I32(4), mask, self.splat(fill)])

    def store(self, b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, mask: ir.Value) -> None:
        b.call(self.masked_store, [value, b.bitcast(ptr, self.ty.as_pointer()), I32(4), mask])

    def gather(self, b: ir.IRBuilder, base: ir.Value, stride: ir.Value, mask: ir.Value,
               fill: float) -> ir.Value:
        """base[lane * stride] for the lanes of ``mask`` (others: ``fill``; nothing read)."""
        ptrs_ty = ir.VectorType(base.type, self.lanes)
        name = f"llvm.masked.gather.v{self.lanes}f32.v{self.lanes}p0"
        gather = self._declare(name, self.ty, [ptrs_ty, I32, self.mask_ty, self.ty])
        start = splat_i64(b, self, b.ptrtoint(base, I64))
        step = b.mul(self.iota, splat_i64(b, self, b.mul(stride, ir.Constant(I64, 4))))
        ptrs = b.inttoptr(b.add(start, step), ptrs_ty)
        return b.call(gather, [ptrs, I32(4), mask, self.splat(fill)])


def row_reduce(b: ir.IRBuilder, vec: Vec, ptr: ir.Value, n: ir.Value, kind: str,
               fn=None) -> ir.Value:
    """max or sum over ``fn(ptr[0:n])`` (vectors; ``fn`` maps a vector, default identity).
    max ignores NaN (maxnum); a sum carries it."""
    identity, _, _ = _REDUCE[kind]
    acc = entry_alloca(b, vec.ty, f"acc_{kind}")
    b.store(vec.splat(identity), acc)
    with for_range(b, n, step=vec.lanes, name=f"r{kind}") as j:
        mask = vec.tail_mask(b, j, n)
        x = vec.load(b, b.gep(ptr, [j]), mask, identity)
        if fn is not None:  # masked-off lanes must stay neutral after fn
            x = b.select(mask, fn(x), vec.splat(identity))
        old = b.load(acc)
        new = b.call(vec.maxnum, [old, x]) if kind == "max" else b.fadd(old, x)
        b.store(new, acc)
    return horizontal(b, b.load(acc), kind)


def horizontal(b: ir.IRBuilder, total: ir.Value, kind: str) -> ir.Value:
    """max or sum of a vector's lanes as a tree: halves combined lane by lane (log2(lanes)
    steps). LLVM expands ``llvm.vector.reduce.fadd`` (ordered, no reassoc) and
    ``.fmax`` (NaN checks) lane after lane: 16 dependent steps, ~100 cycles a row, more
    than the rest of a softmax or layer norm row of 32-64 floats. The tree's order is fixed
    by the code too."""
    width = total.type.count
    while width > 1:
        half = width // 2
        lo, hi = (b.shuffle_vector(total, ir.Constant(total.type, None), ir.Constant(
            ir.VectorType(I32, half), list(range(start, start + half)))) for start in (0, half))
        if kind == "max":
            name = f"llvm.maxnum.v{half}f32"
            maxnum = b.module.globals.get(name) or ir.Function(
                b.module, ir.FunctionType(lo.type, [lo.type, lo.type]), name=name)
            total = b.call(maxnum, [lo, hi])
        else:
            total = b.fadd(lo, hi)
        width = half
    return b.extract_element(total, I32(0))


def row_apply(b: ir.IRBuilder, vec: Vec, ptr: ir.Value, n: ir.Value, fn,
              reduce: str | None = None) -> ir.Value | None:
    """``ptr[j] = fn(ptr[j], j, mask)`` for j < n, ``lanes`` floats at a time with a masked
    tail (``fn`` maps a vector; j is the first lane's index). With ``reduce`` ("max" or
    "add"), also the max / sum of the stored values (row_reduce's order). LLVM's vectorizer
    would run such a loop 8 lanes wide (its preferred width on AVX-512 hosts) and its last
    < 8 floats one by one: a softmax row of 39 keys paid 7 scalar exps."""
    identity = _REDUCE[reduce][0] if reduce else 0.0
    acc = entry_alloca(b, vec.ty, "acc_apply")
    b.store(vec.splat(identity), acc)
    with for_range(b, n, step=vec.lanes, name="ap") as j:
        mask = vec.tail_mask(b, j, n)
        at = b.gep(ptr, [j])
        y = fn(vec.load(b, at, mask, 0.0), j, mask)
        vec.store(b, y, at, mask)
        if reduce:
            y = b.select(mask, y, vec.splat(identity))
            old = b.load(acc)
            b.store(b.call(vec.maxnum, [old, y]) if reduce == "max" else b.fadd(old, y), acc)
    return horizontal(b, b.load(acc), reduce) if reduce else None


def row_map(b: ir.IRBuilder, n: ir.Value, element) -> None:
    """``element(j)`` for j < n: a plain loop for LLVM's vectorizer (no loop-carried value)."""
    with for_range(b, n, name="m") as j:
        element(j)


def splat_i64(b: ir.IRBuilder, vec: Vec, x: ir.Value) -> ir.Value:
    """A vector of ``lanes`` copies of the i64 ``x``."""
    v = b.insert_element(ir.Constant(vec.index_ty, None), x, I32(0))
    return b.shuffle_vector(v, ir.Constant(vec.index_ty, None),
                            ir.Constant(ir.VectorType(I32, vec.lanes), [0] * vec.lanes))


def splat_f32(b: ir.IRBuilder, vec: Vec, x: ir.Value) -> ir.Value:
    """A vector of ``lanes`` copies of the scalar ``x``."""
    v = b.insert_element(ir.Constant(vec.ty, None), x, I32(0))
    return b.shuffle_vector(v, ir.Constant(vec.ty, None),
                            ir.Constant(ir.VectorType(I32, vec.lanes), [0] * vec.lanes))



def mean_rstd(b: ir.IRBuilder, vec: Vec, row: ir.Value, n: ir.Value, eps: ir.Value,
              inv_n: ir.Value) -> tuple[ir.Value, ir.Value]:
    """The mean of the ``n`` floats at ``row`` and ``1 / sqrt(variance + eps)`` (two passes,
    the layer norm's steps; ``inv_n`` = 1 / n as float)."""
    mean = b.fmul(row_reduce(b, vec, row, n, "add"), inv_n)
    vmean = splat_f32(b, vec, mean)

    def square(v):
        d = b.fsub(v, vmean)
        return b.fmul(d, d)

    var = b.fmul(row_reduce(b, vec, row, n, "add", square), inv_n)
    sqrt = b.module.declare_intrinsic("llvm.sqrt", [F32])
    return mean, b.fdiv(ir.Constant(F32, 1.0), b.call(sqrt, [b.fadd(var, eps)]))
