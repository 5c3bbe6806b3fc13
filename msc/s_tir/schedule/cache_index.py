"""``cache_index`` (TVM's ``CacheIndex``, ``cache_index.cc``): precompute the index arithmetic
a block repeats into int buffers, one ``index_<k>`` block per expression, before the block.

    B[n, c, vi, vj] = A[n, c, vi // 4 + vj // 4, vj // 2]   -- sch.cache_index(blk, "global") -->
    index_var_0[v0, v1] = v0 // 4 + v1 // 4     (for ax0, ax1 in T.grid(80, 80))
    index_var_1[v0] = v0 // 2                   (for ax0 in range(80))
    B[n, c, vi, vj] = A[n, c, index_var_0[vi, vj], index_var_1[vj]]

The candidates are the store's largest pure subexpressions that are more than a var or a
constant (no buffer load inside); with ``cse_thresh`` > 0 a candidate that occurs fewer times
than that gives way to its own largest subexpressions, and only those occurring at least
``cse_thresh`` times are cached (TVM's common-subexpression rule). Each buffer is indexed by the
block vars the expression uses and sized by their bindings' ranges.
"""

from __future__ import annotations

from dataclasses import replace

from ...errors import ScheduleError
from ...tir import expr as E
from ...tir.function import (
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
    IterVar,
    PrimFunc,
    SBlock,
    SeqStmt,
    seq,
)
from .arith import map_children, raw_subst
from .blocks import buffer_name, find_block
from .loops import fresh_name
from .region import bounds
from .tree import block_loops, blocks_in, find_path, kids, rebuild, swap

__all__ = ["cache_index"]


def cache_index(func: PrimFunc, block_name: str, scope: str, cse_thresh: int = 0):
    """Returns (func, names of the index blocks)."""
    if cse_thresh < 0:
        raise ScheduleError("cache_index: cse_thresh should not be negative number")
    path = find_block(func, block_name, "cache_index")
    block = path[-1]
    scope_block = next(s for s in reversed(path[:-1]) if isinstance(s, SBlock))
    stores = [s for s in _walk(block.body) if isinstance(s, BufferStore)]
    exprs: list = []
    for store in stores:
        exprs += [e for e in _chosen(store, cse_thresh) if not any(_same(e, x) for x in exprs)]
    exprs.sort(key=lambda e: -_complexity(e))  # stable: post order among equals
    ranges = {lp.var.name: (lp.min, E.sub(E.add(lp.min, lp.extent), 1))
              for lp in block_loops(path)}
    loops = {lp.var.name: lp for lp in block_loops(path)}
    binds = {iv.var.name: iv.binding for iv in block.iter_vars}
    stages, buffers, loads = [], [], []
    for k, expr in enumerate(exprs):
        stage, buf, load = _stage(func, k, expr, block, binds, ranges, loops, scope)
        stages.append(stage)
        buffers.append(buf)
        loads.append(load)
    new_block = _rewrite(block, exprs, loads)
    items = list(scope_block.body.stmts) if isinstance(scope_block.body, SeqStmt) else \
        [scope_block.body]
    pos = next(k for k, item in enumerate(items)
               if find_path(item, lambda s: s is block) is not None)
    items[pos] = swap(items[pos], block, new_block)
    new_scope = replace(scope_block, body=seq(items[:pos] + stages + items[pos:]),
                        alloc_buffers=scope_block.alloc_buffers + tuple(buffers))
    names = [blocks_in(s)[0].name for s in stages]
    return replace(func, body=swap(func.body, scope_block, new_scope)), names


# ----------------------------------------------------------------------------- candidates

def _walk(s):
    yield s
    for child in kids(s):
        yield from _walk(child)


def _eligible(e) -> bool:
    return _complexity(e) > 1 and not _has_load(e)


def _has_load(e) -> bool:
    return isinstance(e, BufferLoad) or any(_has_load(c) for c in E.children(e))


def _complexity(e) -> int:
    return 1 + sum(_complexity(c) for c in E.children(e))


def _largest(e) -> list:
    """The largest eligible subexpressions of ``e`` (``e`` itself if eligible)."""
    if _eligible(e):
        return [e]
    return [x for c in _children(e) for x in _largest(c)]


def _children(e) -> list:
    if isinstance(e, BufferLoad):
        return list(e.indices)
    return list(E.children(e))


def _same(a, b) -> bool:
    """Equal as text; expressions holding a load are never candidates, so never equal."""
    return not _has_load(a) and not _has_load(b) and E.to_str(a) == E.to_str(b)


def _chosen(store: BufferStore, thresh: int) -> list:
    """TVM's choice: counted candidates, the rare ones replaced by their parts; those kept
    in post order of the stored value."""
    table: list = []  # [expr, count]
    for e in _largest(store.value) + [x for i in store.indices for x in _largest(i)]:
        _count(table, e, 1)
    k = 0
    while k < len(table):
        expr, count = table[k]
        if count < thresh:
            for part in [x for c in _children(expr) for x in _largest(c)]:
                _count(table, part, count)
        k += 1
    kept = [e for e, n in table if n >= thresh]
    out: list = []
    for node in _post_order(store.value):
        match = next((e for e in kept if _same(e, node)), None)
        if match is not None and not any(x is match for x in out):
            out.append(match)
    return out


def _count(table: list, e, n: int) -> None:
    for row in table:
        if _same(row[0], e):
            row[1] += n
            return
    table.append([e, n])


def _post_order(e) -> list:
    return [x for c in _children(e) for x in _post_order(c)] + [e]


# ----------------------------------------------------------------------------- stages

def _stage(func, k, expr, block, binds, ranges, loops, scope):
    """The ``index_<k>`` nest writing ``expr`` for each value of the block vars it uses."""
    own = {iv.var.name: iv for iv in block.iter_vars}
    used = []
    for node in _post_order(expr):
        if isinstance(node, E.Var) and node.name in own and node.name not in used:
            used.append(node.name)
    loop_names = []
    for name in used:
        for v in E.free_vars(binds[name]):
            if v.name in loops and v.name not in loop_names:
                loop_names.append(v.name)
    shape = tuple(E.add(bounds(binds[name], ranges)[1], 1) for name in used)
    dtype = getattr(expr, "dtype", "int32")
    buf = Buffer(buffer_name(func, f"index_var_{k}"), shape, dtype, strides=(E.IntImm(1, "int32"),),
                 scope=scope)
    new_loops = {n: E.Var(f"ax{j}", loops[n].var.dtype) for j, n in enumerate(loop_names)}
    ivs = [IterVar(E.Var(f"v{j}", own[name].var.dtype), E.IntImm(0, own[name].var.dtype),
                   loops[loop_names[j]].extent, "spatial", raw_subst(binds[name], new_loops))
           for j, name in enumerate(used)]
    block_vars = {name: iv.var for name, iv in zip(used, ivs)}
    idx = tuple(iv.var for iv in ivs)
    taken = {b.name for b in blocks_in(func.body)}
    stmt = SBlock(fresh_name(func, f"index_{k}", taken),
                  BufferStore(buf, raw_subst(expr, block_vars), idx), tuple(ivs), reads=(),
                  writes=(BufferRegion(buf, tuple((i, None) for i in idx)),))
    for name in reversed(loop_names):
        lp = loops[name]
        stmt = For(new_loops[name], lp.min, lp.extent, "serial", stmt)
    load = BufferLoad(buf, tuple(own[name].var for name in used))
    return stmt, buf, load


def _rewrite(block: SBlock, exprs: list, loads: list) -> SBlock:
    """The block's stores with each cached expression read from its buffer."""
    def expr(e):
        for cached, load in zip(exprs, loads):
            if _same(e, cached):
                return load
        return map_children(e, expr)

    def stmt(s):
        if isinstance(s, BufferStore):
            return BufferStore(s.buffer, expr(s.value), tuple(expr(i) for i in s.indices))
        return rebuild(s, [stmt(c) for c in kids(s)]) if kids(s) else s

    return replace(block, body=stmt(block.body))
