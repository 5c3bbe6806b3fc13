"""Features of a scheduled prim func, one row per store, as TVM's per-store-feature extractor
computes them (``src/s_tir/meta_schedule/feature_extractor/per_store_feature.cc``).

A candidate is described by what its code does, not by its tile decisions, so a cost model
trained on one workload's measurements can rank another's candidates. For every
``BufferStore`` under its loop nest (block vars replaced by their loop bindings, as in the
lowered TIR TVM reads):

- **arithmetic** (16): float / int add-sub, mul, div-mod, compare, math calls, bool ops,
  selects in the stored value, each counted once per iteration of the enclosing loops;
- **loop kinds** (3 x 11): for the vectorized, unrolled and parallel loops around the store,
  their number, extent product and innermost extent, and the position one-hot (TVM marks an
  annotated nest "mixed": so do we);
- **buffer access** (5 buffers x 18): per buffer read, written or both, sorted by cache lines
  touched: access type, bytes, unique bytes, lines, unique lines, reuse type (a loop the
  access does not depend on, serial reuse by another store under the same loop, none), reuse
  distance in iterations and bytes, reuse count, the four per-reuse ratios, innermost stride;
- **allocation** (4): for a store to a buffer the function allocates, its size, size times
  the loops around the allocation, that product, and the store's loops outside it;
- **loop nest** (3): extent product, depth, ``pragma_auto_unroll_max_step``.

Values are ``slog(x) = log2(|x| + 1)`` as in TVM. Left out (documented subset): the GPU
thread extents, the arithmetic-intensity curve (group 3) and the workload embedding (group 6,
a block-name lookup). Cache lines are 64 bytes::

    rows = per_store_features(sch.mod["main"])     # numpy (stores, len(FEATURE_NAMES))
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..s_tir.schedule.tree import rewrite_expr
from ..tir import expr as E
from ..tir.function import (
    AllocBuffer,
    BufferLoad,
    BufferStore,
    For,
    IfThenElse,
    LetStmt,
    SBlock,
    SeqStmt,
    While,
)

__all__ = ["FEATURE_NAMES", "per_store_features", "slog"]

CACHE_LINE = 64
BUFFERS_PER_STORE = 5
_ARITH = ("float_mad", "float_add_sub", "float_mul", "float_div_mod", "float_cmp",
          "float_math_func", "float_other_func", "int_mad", "int_add_sub", "int_mul",
          "int_div_mod", "int_cmp", "int_math_func", "int_other_func", "bool_op", "select_op")
_OP_GROUP = {"Add": "add_sub", "Sub": "add_sub", "Mul": "mul", "Div": "div_mod",
             "Mod": "div_mod", "FloorDiv": "div_mod", "FloorMod": "div_mod", "Min": "cmp",
             "Max": "cmp", "EQ": "cmp", "NE": "cmp", "LT": "cmp", "LE": "cmp", "GT": "cmp",
             "GE": "cmp"}
_KIND_FIELDS = ("num", "prod", "len", "pos_none", "pos_inner_spatial", "pos_middle_spatial",
                "pos_outer_spatial", "pos_inner_reduce", "pos_middle_reduce",
                "pos_outer_reduce", "pos_mixed")
_LOOP_KINDS = ("vectorized", "unrolled", "parallel")
_ACCESS = ("read", "write", "read_write")
_REUSE = ("loop_multiple_read", "serial_multiple_read_write", "no_reuse")
_BUFFER_FIELDS = (tuple(f"is_{a}" for a in _ACCESS)
                  + ("bytes", "unique_bytes", "lines", "unique_lines")
                  + tuple(f"reuse_{r}" for r in _REUSE)
                  + ("reuse_dis_iter", "reuse_dis_bytes", "reuse_ct", "bytes_d_reuse_ct",
                     "unique_bytes_d_reuse_ct", "lines_d_reuse_ct",
                     "unique_lines_d_reuse_ct", "stride"))
_ALLOC = ("alloc_size", "alloc_prod", "alloc_outer_prod", "alloc_inner_prod")
_NEST = ("outer_prod", "num_loops", "auto_unroll_max_step")

FEATURE_NAMES = (list(_ARITH) + [f"{k}.{f}" for k in _LOOP_KINDS for f in _KIND_FIELDS]
                 + [f"B{b}.{f}" for b in range(BUFFERS_PER_STORE) for f in _BUFFER_FIELDS]
                 + list(_ALLOC) + list(_NEST))


def slog(x: float) -> float:
    """TVM's feature scale: log2(|x| + 1)."""
    return math.log2(abs(x) + 1)


@dataclass
class _Loop:
    var: str
    lo: int
    extent: int
    kind: str
    unroll_step: int   # pragma_auto_unroll_max_step, 0 without
    uid: int           # numbered in walk order: a finished loop's object id may be reused


@dataclass
class _Walk:
    """State of one walk over a function: the stores' rows, and what every loop touched so
    far (TVM's ``buffer_touched_under_loop``, shared by the stores under a loop)."""

    rows: list = field(default_factory=list)
    touched: dict = field(default_factory=dict)   # loop uid -> buffer name -> [numel, ...]
    allocs: dict = field(default_factory=dict)    # buffer name -> (numel, bytes, loop prod)
    sizes: dict = field(default_factory=dict)     # buffer name -> bytes per element
    loops: int = 0                                # loops entered so far

    def next_uid(self) -> int:
        self.loops += 1
        return self.loops

    def touched_bytes(self, loop) -> float:
        """Bytes every store so far touched under ``loop``."""
        return sum(sum(numels) * self.sizes[name]
                   for name, numels in self.touched.get(loop.uid, {}).items())

    def allocate(self, buf, loops: list) -> None:
        self.allocs[buf.name] = (_numel(buf), _bytes(buf.dtype), _prod(loops))


def per_store_features(func) -> np.ndarray:
    """One row of ``FEATURE_NAMES`` per BufferStore of ``func``, in program order."""
    walk = _Walk()
    _visit(func.body, [], {}, walk)
    if not walk.rows:
        return np.zeros((0, len(FEATURE_NAMES)))
    return np.array(walk.rows, dtype=float)


def _visit(s, loops: list, binds: dict, walk: _Walk) -> None:
    if isinstance(s, For):
        loop = _Loop(s.var.name, E.as_int(s.min) or 0, E.as_int(s.extent) or 1, s.kind,
                     int(s.annotations.get("pragma_auto_unroll_max_step", 0) or 0),
                     walk.next_uid())
        _visit(s.body, loops + [loop], binds, walk)
    elif isinstance(s, SBlock):
        inner = dict(binds)
        inner.update({iv.var.name: rewrite_expr(iv.binding, binds) for iv in s.iter_vars})
        for buf in s.alloc_buffers:
            walk.allocate(buf, loops)
        for part in ([s.init] if s.init is not None else []) + [s.body]:
            _visit(part, loops, inner, walk)
    elif isinstance(s, SeqStmt):
        for child in s.stmts:
            _visit(child, loops, binds, walk)
    elif isinstance(s, IfThenElse):
        for child in (s.then_case, s.else_case):
            if child is not None:
                _visit(child, loops, binds, walk)
    elif isinstance(s, (LetStmt, While)):
        _visit(s.body, loops, binds, walk)
    elif isinstance(s, AllocBuffer):
        walk.allocate(s.buffer, loops)
    elif isinstance(s, BufferStore):
        walk.rows.append(_store_row(s, loops, binds, walk))


def _numel(buf) -> int:
    return math.prod(E.as_int(d) or 1 for d in buf.shape)


def _bytes(dtype: str) -> int:
    bits = int("".join(c for c in dtype if c.isdigit()) or 8)
    return max(bits // 8, 1)


def _prod(loops: list) -> int:
    return math.prod(lp.extent for lp in loops)


def _store_row(s: BufferStore, loops: list, binds: dict, walk: _Walk) -> list:
    value = rewrite_expr(s.value, binds)
    indices = tuple(rewrite_expr(i, binds) for i in s.indices)
    prod = _prod(loops)
    row = [slog(v) for v in _arith(value, prod)]
    for kind in _LOOP_KINDS:
        row += _kind_features([lp for lp in loops if lp.kind == kind])
    subs = _buffer_features(s.buffer, indices, value, loops, walk)
    subs += [[0.0] * len(_BUFFER_FIELDS)] * (BUFFERS_PER_STORE - len(subs))
    row += [v for sub in subs for v in sub]
    row += _alloc_features(s.buffer.name, prod, walk)
    unroll = [lp.unroll_step for lp in loops if lp.unroll_step > 0]
    row += [slog(prod), slog(len(loops)), slog(unroll[-1] if unroll else 0)]
    return row


# -- group 1: arithmetic and loop kinds ---------------------------------------------------
def _arith(value, prod: int) -> list:
    counts = dict.fromkeys(_ARITH, 0)
    _count(value, counts)
    return [counts[k] * prod for k in _ARITH]


def _count(e, counts: dict) -> None:
    if isinstance(e, BufferLoad):
        for i in e.indices:
            _count(i, counts)
        return
    prefix = "float" if str(e.dtype).startswith(("float", "bfloat")) else "int"
    if isinstance(e, E.BinaryOp):
        if e.op in ("And", "Or"):
            counts["bool_op"] += 1
        else:
            group = _OP_GROUP.get(e.op)
            if group is not None:
                # a comparison's own dtype is bool: count it by its operands' type
                operand = "float" if str(e.a.dtype).startswith(("float", "bfloat")) else "int"
                counts[f"{operand if group == 'cmp' else prefix}_{group}"] += 1
    elif isinstance(e, E.Not):
        counts["bool_op"] += 1
    elif isinstance(e, E.Select):
        counts["select_op"] += 1
    elif isinstance(e, E.PrimCall):
        counts[f"{prefix}_math_func"] += 1
    for child in E.children(e):
        _count(child, counts)


def _kind_features(loops: list) -> list:
    if not loops:
        return [0.0, 0.0, 0.0, 1.0] + [0.0] * 7
    prod = math.prod(lp.extent for lp in loops)
    return [slog(len(loops)), slog(prod), slog(loops[-1].extent)] + [0.0] * 7 + [1.0]


# -- group 2: buffer access ---------------------------------------------------------------
@dataclass
class _Access:
    buffer: object
    kind: str
    indices: list                               # multi-indices, in loop vars
    numel: list = field(default_factory=list)   # elements touched by loops[i:], per i


def _accesses(buffer, indices: tuple, value) -> list:
    """The store's buffer (written) and every buffer its value loads, in TVM's order: a
    load of the stored buffer makes it read-write (its indices are not added again)."""
    found = {buffer.name: _Access(buffer, "write", [indices])}
    loads: list = []
    _loads(value, loads)
    for ld in loads:
        acc = found.get(ld.buffer.name)
        if acc is None:
            found[ld.buffer.name] = _Access(ld.buffer, "read", [ld.indices])
        elif acc.kind == "write":
            acc.kind = "read_write"
        elif acc.kind == "read":
            acc.indices.append(ld.indices)
    return list(found.values())


def _loads(e, out: list) -> None:
    if isinstance(e, BufferLoad):
        out.append(e)
    for child in (e.indices if isinstance(e, BufferLoad) else E.children(e)):
        _loads(child, out)


def _buffer_features(buffer, indices: tuple, value, loops: list, walk: _Walk) -> list:
    accesses = _accesses(buffer, indices, value)
    for acc in accesses:
        walk.sizes[acc.buffer.name] = _bytes(acc.buffer.dtype)
    _regions(accesses, loops, walk)
    top_bytes = sum(_bytes(a.buffer.dtype) for a in accesses) if loops else 0
    subs = []
    for acc in accesses:
        stride, min_stride, inner_prod = _strides(acc, loops)
        reuse = _reuse(acc, loops, top_bytes, walk)
        subs.append(_sub_features(acc, loops, stride, min_stride, inner_prod, reuse))
    subs.sort(key=lambda t: (-t[0], -t[1], t[2]))
    return [t[3] for t in subs[:BUFFERS_PER_STORE]]


def _regions(accesses: list, loops: list, walk: _Walk) -> None:
    """For each loop from the innermost out: elements of each buffer touched when that loop
    and the loops inside it range over their domains (the outer ones at their min)."""
    env = {lp.var: (lp.lo, lp.lo) for lp in loops}
    for i in range(len(loops) - 1, -1, -1):
        lp = loops[i]
        env[lp.var] = (lp.lo, lp.lo + lp.extent - 1)
        for acc in accesses:
            numel = _touched(acc, env)
            acc.numel.insert(0, numel)
            walk.touched.setdefault(lp.uid, {}).setdefault(acc.buffer.name, []).append(numel)


def _touched(acc: _Access, env: dict) -> int:
    """Elements of the union of the access's index boxes (per dim, the hull)."""
    shape = [E.as_int(d) or 1 for d in acc.buffer.shape]
    numel = 1
    for dim, size in enumerate(shape):
        lo, hi = None, None
        for multi in acc.indices:
            got = _interval(multi[dim], env) if dim < len(multi) else (0, 0)
            got = got if got is not None else (0, size - 1)
            lo = got[0] if lo is None else min(lo, got[0])
            hi = got[1] if hi is None else max(hi, got[1])
        numel *= max(min(hi, size - 1) - max(lo, 0) + 1, 0) if lo is not None else 1
    return numel


def _interval(e, env: dict):
    """(lo, hi) of integer expression ``e`` with each var in its ``env`` range, or None."""
    if isinstance(e, E.IntImm):
        return e.value, e.value
    if isinstance(e, E.Var):
        return env.get(e.name, (0, 0))
    if not isinstance(e, E.BinaryOp):
        return None
    a, b = _interval(e.a, env), _interval(e.b, env)
    if a is None or b is None:
        return None
    if e.op == "Add":
        return a[0] + b[0], a[1] + b[1]
    if e.op == "Sub":
        return a[0] - b[1], a[1] - b[0]
    if e.op in ("Mul", "Min", "Max"):
        fn = {"Mul": lambda x, y: x * y, "Min": min, "Max": max}[e.op]
        ends = [fn(x, y) for x in a for y in b]
        return min(ends), max(ends)
    if e.op in ("FloorDiv", "FloorMod") and b[0] == b[1] and b[0] > 0:
        if e.op == "FloorDiv":
            return a[0] // b[0], a[1] // b[0]
        same = a[0] // b[0] == a[1] // b[0]
        return (a[0] % b[0], a[1] % b[0]) if same else (0, b[0] - 1)
    return None


def _strides(acc: _Access, loops: list) -> tuple:
    """(innermost stride, min stride, product of the loops inside the first strided one):
    the element step of the innermost loop the access moves with, as TVM's SetStride."""
    shape = [E.as_int(d) or 1 for d in acc.buffer.shape]
    steps = [math.prod(shape[k + 1:]) for k in range(len(shape))]
    base = {lp.var: lp.lo for lp in loops}
    stride, i = 0, len(loops) - 1
    while i >= 0:
        stride = _var_stride(acc.indices, steps, base, loops[i].var)
        if stride != 0:
            break
        i -= 1
    innermost = stride if i == len(loops) - 1 else 0
    inner_prod = math.prod(lp.extent for lp in loops[i + 1:])
    return innermost, stride, inner_prod


def _var_stride(indices: list, steps: list, base: dict, var: str) -> int:
    """The smallest element step of one iteration of ``var`` over the access's indices."""
    found = None
    for multi in indices:
        step = 0
        for index, size in zip(multi, steps):
            at0 = _value(index, base)
            at1 = _value(index, {**base, var: base.get(var, 0) + 1})
            if at0 is not None and at1 is not None:
                step += abs(at1 - at0) * size
        found = step if found is None else min(found, step)
    return found or 0


def _value(e, env: dict):
    got = _interval(e, {k: (v, v) for k, v in env.items()})
    return got[0] if got is not None and got[0] == got[1] else None


def _reuse(acc: _Access, loops: list, top_bytes: int, walk: _Walk) -> tuple:
    """(type, distance in iterations, distance in bytes, count) of the first loop from the
    inside that re-touches the access: one its indices do not use (every iteration reads
    the same data again), or one under which other stores touched the buffer before."""
    used = {v.name for multi in acc.indices for i in multi for v in E.free_vars(i)}
    for i in range(len(loops) - 1, -1, -1):
        lp = loops[i]
        if lp.var not in used:
            dis_iter = math.prod(x.extent for x in loops[i + 1:])
            dis_bytes = top_bytes if i == len(loops) - 1 else walk.touched_bytes(loops[i + 1])
            return "loop_multiple_read", dis_iter, dis_bytes, lp.extent
        seen = walk.touched.get(lp.uid, {}).get(acc.buffer.name, [])
        if len(seen) >= 2:
            return ("serial_multiple_read_write", min(seen) / lp.extent,
                    walk.touched_bytes(lp) / lp.extent, len(seen) - 1)
    return "no_reuse", 0, 0, 0


def _sub_features(acc: _Access, loops: list, stride: int, min_stride: int, inner_prod: int,
                  reuse: tuple) -> tuple:
    size = _bytes(acc.buffer.dtype)
    prod = _prod(loops)
    bytes_ = size * prod
    if loops:
        unique_bytes = acc.numel[0] * size
        lines = max(1.0, prod / max(inner_prod, 1) * min(1.0, min_stride * size / CACHE_LINE))
        unique_lines = max(1.0, unique_bytes / min(CACHE_LINE, _continuous_bytes(acc, loops)))
    else:
        unique_bytes, lines, unique_lines = 1, 1.0, 1.0
    kind, dis_iter, dis_bytes, count = reuse
    proxy = count if count > 0 else 0.5
    values = ([float(acc.kind == a) for a in _ACCESS]
              + [slog(bytes_), slog(unique_bytes), slog(lines), slog(unique_lines)]
              + [float(kind == r) for r in _REUSE]
              + [slog(dis_iter), slog(dis_bytes), slog(count), slog(bytes_ / proxy),
                 slog(unique_bytes / proxy), slog(lines / proxy), slog(unique_lines / proxy),
                 slog(stride)])
    return lines, bytes_, acc.buffer.name, values


def _continuous_bytes(acc: _Access, loops: list) -> int:
    """Bytes of the innermost dims the whole nest covers fully (TVM's num_continuous_bytes)."""
    env = {lp.var: (lp.lo, lp.lo + lp.extent - 1) for lp in loops}
    shape = [E.as_int(d) or 1 for d in acc.buffer.shape]
    size = _bytes(acc.buffer.dtype)
    for dim in range(len(shape) - 1, -1, -1):
        spans = [_interval(m[dim], env) for m in acc.indices if dim < len(m)]
        if spans and all(s is not None and s[1] - s[0] + 1 >= shape[dim] for s in spans):
            return shape[dim] * size
    return size


# -- group 4: allocation ------------------------------------------------------------------
def _alloc_features(name: str, outer_prod: int, walk: _Walk) -> list:
    if name not in walk.allocs:
        return [0.0] * len(_ALLOC)
    numel, size, at_prod = walk.allocs[name]
    return [slog(numel * size), slog(numel * at_prod), slog(at_prod),
            slog(outer_prod / at_prod)]
