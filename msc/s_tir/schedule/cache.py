"""``cache_read`` / ``cache_write`` with TVM's semantics (``CacheRead`` / ``CacheWrite`` in
``cache_read_write.cc``).

The copy stage goes where TVM's ``CacheLocDetector`` puts it (see
:func:`~msc.s_tir.schedule.reindex_cache.cache_location`): in the lowest loop or block holding
both the buffer's writer and its first consumer, before the consumer's subtree; at the start of
the scope for a buffer nothing there writes. It copies the region the writer produces there:
the writer's access relaxed over the loops between it and that location (loops above stay
symbolic, so a stage inside ``for i`` copies ``A[i * 16 : i * 16 + 16]``)::

    for i in range(8):               sch.cache_read("B", 0, "global")  -->
        A[i*16 + j] = ...            for i: A ...; A_global[i*16 + ax0] = A[i*16 + ax0]; B ...
        B[...] = A[i*16 + j]         (C outside the loop reads A_global as well)

When the location is a block and every consumer of the buffer sits under it, the cache holds
only that region (a compact buffer, indices shifted by the region's start: ``A_local[vi - i *
16, ...]``); otherwise it has the buffer's shape. The writer (cache_write) or the consumers
(cache_read; ``consumer_blocks`` narrows them) then access the cache. Refused as TVM refuses:
a bad storage scope or buffer index, several writers of the buffer in the scope.
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
)
from .arith import fold, map_children
from .blocks import buffer_name, find_block
from .flags import scope_deps
from .loops import fresh_name
from .region import accesses, block_reads, block_writes, bounds, union
from .reindex_cache import cache_location, only_writer, rebuild_with_stage
from .storage import check_scope
from .tree import blocks_in, child_blocks, find_path, kids, rebuild, rewrite_expr, var_names

__all__ = ["accessed", "cache_read", "cache_write", "resolve_index"]


def accessed(block: SBlock, kind: str) -> list:
    """The block's reads (writes), without the buffers it allocates itself (TVM infers a
    block's regions so)."""
    own = {b.name for b in block.alloc_buffers}
    return [b for b in (block_reads if kind == "read" else block_writes)(block)
            if b.name not in own]


def resolve_index(block: SBlock, index, kind: str, what: str) -> int:
    """A buffer index of the block's reads (writes), given as a position or a name."""
    buffers = accessed(block, kind)
    if isinstance(index, str) or hasattr(index, "shape"):
        name = getattr(index, "name", index)
        found = [k for k, b in enumerate(buffers) if b.name == name]
        if not found:
            raise ScheduleError(f"{what}: block {block.name!r} does not {kind} a buffer "
                                f"{name!r}", key=block.name,
                                hint=f"its {kind}s: {[b.name for b in buffers]}")
        return found[0]
    index = int(index)
    if not 0 <= index < len(buffers):
        raise ScheduleError(f"{what}: block {block.name!r} has no {kind} buffer {index}",
                            key=block.name, hint=f"its {kind}s: {[b.name for b in buffers]}")
    return index


def cache_read(func: PrimFunc, block_name: str, index: int, scope: str,
               consumers: tuple = ()):
    """Returns (func, copy block name). ``consumers``: names of the blocks that read the
    cache (empty: every reader of the buffer in the scope)."""
    what = "cache_read"
    scope = check_scope(scope, what)
    path = find_block(func, block_name, what)
    buf = accessed(path[-1], "read")[resolve_index(path[-1], index, "read", what)]
    scope_block = next(s for s in reversed(path[:-1]) if isinstance(s, SBlock))
    chosen = _with_children(func, consumers)
    writer = only_writer(scope_block, buf, block_name)
    if writer is not None:
        related = [b for b in blocks_in(scope_block)[1:] if id(b) in chosen] or [
            dst for src, dst, kind in scope_deps(child_blocks(scope_block.body))
            if src is writer and kind == "RAW"]
        loc, pos = cache_location(scope_block, writer, related)
        region = _relaxed(func, writer, buf, "write", loc)
    else:
        loc, pos = scope_block, 0
        region = _scope_region(func, scope_block, buf)
        if _nested_limits(path[-1], buf, "read"):
            region = _relaxed(func, path[-1], buf, "read", loc, nested=True)
    return _apply(func, buf, scope, scope_block, loc, pos, region, chosen, True, path[-1])


def cache_write(func: PrimFunc, block_name: str, index: int, scope: str,
                consumers: tuple = ()):
    """Returns (func, copy block name). ``consumers``: names of blocks that read the cache
    instead of the buffer (the copy back then goes before the other readers)."""
    what = "cache_write"
    scope = check_scope(scope, what)
    path = find_block(func, block_name, what)
    block = path[-1]
    buf = accessed(block, "write")[resolve_index(block, index, "write", what)]
    scope_block = next(s for s in reversed(path[:-1]) if isinstance(s, SBlock))
    chosen = _with_children(func, consumers)
    if only_writer(scope_block, buf, block_name) is not block:
        raise ScheduleError(f"{what}: block {block_name!r} is not the block of its scope that "
                            f"writes {buf.name!r}", key=block_name)
    related = [dst for src, dst, kind in scope_deps(child_blocks(scope_block.body))
               if src is block and kind == "RAW" and id(dst) not in chosen]
    loc, pos = cache_location(scope_block, block, related)
    region = _relaxed(func, block, buf, "write", loc, nested=True)
    return _apply(func, buf, scope, scope_block, loc, pos, region, chosen, False, block)


def _with_children(func: PrimFunc, names: tuple) -> set:
    """ids of the named blocks and of every block inside them."""
    out: set = set()
    for name in names:
        node = find_block(func, name, "consumer_blocks")[-1]
        out.update(id(b) for b in blocks_in(node))
    return out


# ----------------------------------------------------------------------------- regions

def _relaxed(func: PrimFunc, block: SBlock, buf: Buffer, kind: str, loc,
             nested: bool = False) -> list:
    """Per dim (lo, hi) of what ``block`` accesses of ``buf``, relaxed over the loops inside
    the block and the loops between it and ``loc`` (TVM's ``RelaxBufferRegion``)."""
    path = find_path(func.body, lambda s: s is block)
    at = next(k for k, s in enumerate(path) if s is loc)
    between = _ranges([s for s in path[at + 1:-1] if isinstance(s, For)])
    binds = {iv.var.name: iv.binding for iv in block.iter_vars}
    limits = _predicate_limits(rewrite_expr(block.predicate, binds)
                               if block.predicate is not None else None)
    if nested:
        limits.update(_rebound(_nested_limits(block, buf, kind), binds))
    regions = []
    for lo_hi in _own_region(block, buf, kind):
        dims = []
        for lo, hi in lo_hi:
            lo, hi = rewrite_expr(lo, binds), rewrite_expr(hi, binds)
            limit = limits.get(E.to_str(hi))
            lo, hi = bounds(lo, between)[0], bounds(hi, between)[1]
            if limit is not None and E.as_int(hi) is not None:
                hi = E.IntImm(min(E.as_int(hi), limit), hi.dtype)
            dims.append((lo, hi))
        regions.append(dims)
    if not regions:
        return [(E.IntImm(0, _dtype(d)), E.sub(d, 1)) for d in buf.shape]
    return union(regions)


def _nested_limits(block: SBlock, buf: Buffer, kind: str) -> dict:
    """The limits the ``T.where`` of the blocks nested in ``block`` that access ``buf`` put on
    its indices (TVM's ``CollectNestedBlockPredicates``: OR-ed, so a bound holds where every
    such block states one, at the largest)."""
    found = [b for b in blocks_in(block)[1:] if accesses(b, kind, buf.name)]
    if not found or any(b.predicate is None for b in found):
        return {}
    tables = [_predicate_limits(rewrite_expr(b.predicate, {iv.var.name: iv.binding
                                                           for iv in b.iter_vars}))
              for b in found]
    return {k: max(t[k] for t in tables) for k in tables[0] if all(k in t for t in tables)}


def _rebound(limits: dict, binds: dict) -> dict:
    """Limits stated over the block's own vars, restated over what they are bound to."""
    return {E.to_str(binds[text]) if text in binds else text: limit
            for text, limit in limits.items()}


def _predicate_limits(pred) -> dict:
    """Upper bounds a block's ``T.where`` states: text of ``x`` -> the largest ``x`` allowed,
    for each conjunct ``x < c`` / ``x <= c`` (TVM relaxes regions under the predicate)."""
    if pred is None:
        return {}
    if isinstance(pred, E.BinaryOp) and pred.op == "And":
        return {**_predicate_limits(pred.a), **_predicate_limits(pred.b)}
    if isinstance(pred, E.BinaryOp) and pred.op in ("LT", "LE") and \
            E.as_int(pred.b) is not None:
        return {E.to_str(pred.a): E.as_int(pred.b) - (pred.op == "LT")}
    return {}


def _own_region(block: SBlock, buf: Buffer, kind: str) -> list:
    """The block's accesses to ``buf`` as per-dim (lo, hi) in its iter vars: its stated
    region, else each access relaxed over the loops inside the block."""
    stated = block.reads if kind == "read" else block.writes
    region = next((r for r in stated or () if r.buffer.name == buf.name), None)
    if region is not None:
        return [[(lo, lo if hi is None else E.sub(hi, 1)) for lo, hi in region.region]]
    inner = _ranges([s for s in _walk(block.body) if isinstance(s, For)])
    parts = [block.body] + ([block.init] if block.init is not None else [])
    return [[bounds(i, inner) for i in idx] for part in parts
            for _, _, idx in accesses(part, kind, buf.name)]


def _scope_region(func: PrimFunc, scope_block: SBlock, buf: Buffer) -> list:
    """What the scope reads of an input buffer: its stated reads, the whole buffer at the
    root, else its readers' accesses relaxed over the loops inside the scope."""
    if scope_block is func.body or scope_block.reads is not None:
        regions = [[(lo, lo if hi is None else E.sub(hi, 1)) for lo, hi in r.region]
                   for r in scope_block.reads or () if r.buffer.name == buf.name]
        return regions[0] if regions else [(E.IntImm(0, _dtype(d)), E.sub(d, 1))
                                           for d in buf.shape]
    return union(_own_region(scope_block, buf, "read")) if _own_region(
        scope_block, buf, "read") else [(E.IntImm(0, _dtype(d)), E.sub(d, 1))
                                        for d in buf.shape]


def _walk(s):
    yield s
    for child in kids(s):
        yield from _walk(child)


def _ranges(loops: list) -> dict:
    return {lp.var.name: (lp.min, E.sub(E.add(lp.min, lp.extent), 1)) for lp in loops}


def _dtype(e) -> str:
    return getattr(e, "dtype", "int32")


def _all_consumers_under(scope_block: SBlock, buf: Buffer, loc) -> bool:
    """TVM's ``AllConsumersUnderStmt``."""
    under = {id(b) for b in child_blocks(loc.body)} if loc is not scope_block else None
    if under is None:
        return True
    readers = [b for b in child_blocks(scope_block.body)
               if buf.name in {r.name for r in block_reads(b)}]
    return all(id(b) in under for b in readers)


# ----------------------------------------------------------------------------- rewriting

def _apply(func, buf, scope, scope_block, loc, pos, region, chosen, is_read, block):
    full = not isinstance(loc, SBlock) or not _all_consumers_under(scope_block, buf, loc)
    mins = [lo for lo, _ in region]
    extents = [E.add(E.sub(hi, lo), 1) for lo, hi in region]
    cache = Buffer(buffer_name(func, f"{buf.name}_{scope}"),
                   tuple(buf.shape) if full else tuple(extents), buf.dtype, scope=scope)
    stage = _stage(func, buf, cache, mins, extents, full, is_read, f"{buf.name}_{scope}")
    shift = None if full else mins
    if is_read:
        swaps = _read_swaps(scope_block, buf, cache, shift, chosen)
    else:
        swaps = _write_swaps(scope_block, block, buf, cache, shift, chosen)
    body = rebuild_with_stage(func.body, swaps, loc, pos, stage, scope_block, cache)
    return replace(func, body=body), blocks_in(stage)[0].name


def _stage(func, buf, cache, mins, extents, full, is_read, name):
    """TVM's ``MakeCacheStage``: loops ``ax..`` over the region's extents, block vars
    ``v..`` over the cache's dims."""
    taken = var_names(func.body)
    loops, ivs, src_idx, dst_idx = [], [], [], []
    for k, (lo, ext) in enumerate(zip(mins, extents)):
        ax = E.Var(fresh_name(func, f"ax{k}", taken), _dtype(ext))
        v = E.Var(fresh_name(func, f"v{k}", taken), _dtype(ext))
        taken.update({ax.name, v.name})
        loops.append((ax, ext))
        if full:
            ivs.append(IterVar(v, E.IntImm(0, _dtype(buf.shape[k])), buf.shape[k], "spatial",
                               _plus(lo, ax)))
            src_idx.append(v)
            dst_idx.append(v)
        else:
            ivs.append(IterVar(v, E.IntImm(0, _dtype(ext)), ext, "spatial", ax))
            src_idx.append(_plus(lo, v))
            dst_idx.append(v)
    old_idx, new_idx = tuple(src_idx), tuple(dst_idx)
    (src, s_idx), (dst, d_idx) = ((buf, old_idx), (cache, new_idx)) if is_read else \
        ((cache, new_idx), (buf, old_idx))
    taken_blocks = {b.name for b in blocks_in(func.body)}
    stmt = SBlock(fresh_name(func, name, taken_blocks),
                  BufferStore(dst, BufferLoad(src, s_idx), d_idx), tuple(ivs),
                  reads=(BufferRegion(src, tuple((i, None) for i in s_idx)),),
                  writes=(BufferRegion(dst, tuple((i, None) for i in d_idx)),))
    for ax, ext in reversed(loops):
        stmt = For(ax, E.IntImm(0, ax.dtype), ext, "serial", stmt)
    return stmt


def _plus(lo, x):
    return fold("Add", lo, x)  # as TVM writes it: min + var


def _read_swaps(scope_block, buf, cache, shift, chosen) -> dict:
    """New versions of the blocks that read the cache instead of ``buf`` (TVM's
    ``CacheReadRewriter``: not the writers of ``buf``, only ``chosen`` ones if any)."""
    swaps, skip = {}, set()
    for b in blocks_in(scope_block)[1:]:
        if buf.name in {w.name for w in block_writes(b)}:
            skip.update(id(x) for x in blocks_in(b))  # a writer is kept whole, as in TVM
        if id(b) in skip or (chosen and id(b) not in chosen):
            continue
        if buf.name not in {r.name for r in block_reads(b)} and not any(
                a[1].name == buf.name for a in _own_accesses(b)):
            continue
        swaps[id(b)] = _retarget(b, buf, cache, shift, loads=True, stores=False)
    return _outermost(scope_block, swaps)


def _write_swaps(scope_block, writer, buf, cache, shift, chosen) -> dict:
    swaps = {id(writer): _retarget(writer, buf, cache, shift, loads=True, stores=True,
                                   nested=True)}
    for b in blocks_in(scope_block)[1:]:
        if id(b) in chosen and b is not writer:
            swaps[id(b)] = _retarget(b, buf, cache, shift, loads=True, stores=False)
    return _outermost(scope_block, swaps)


def _own_accesses(block: SBlock) -> list:
    parts = [block.body] + ([block.init] if block.init is not None else [])
    return [a for part in parts for a in accesses(part)]


def _outermost(scope_block, swaps: dict) -> dict:
    """Keep the swaps of blocks not inside another swapped block (whose new version already
    holds the rewritten inner ones)."""
    keep = {}
    for b in blocks_in(scope_block)[1:]:
        if id(b) in swaps:
            inner = {id(x) for x in blocks_in(b)[1:]}
            keep[id(b)] = swaps[id(b)]
            for i in inner:
                keep.pop(i, None)
    return {k: v for k, v in keep.items() if k in swaps}


def _retarget(block: SBlock, buf: Buffer, cache: Buffer, shift, loads: bool, stores: bool,
              nested: bool = True) -> SBlock:
    """``block`` with its loads (and stores) of ``buf`` on ``cache``, indices less ``shift``;
    its stated regions too."""
    def index(idx):
        return tuple(idx) if shift is None else tuple(
            i if E.as_int(lo) == 0 else E.sub(i, lo) for i, lo in zip(idx, shift))

    def expr(e):
        if loads and isinstance(e, BufferLoad) and e.buffer.name == buf.name:
            return BufferLoad(cache, index(tuple(expr(i) for i in e.indices)))
        if isinstance(e, E.Var) and e.name == f"{buf.name}.data":  # B.data in an intrinsic
            return E.Var(f"{cache.name}.data", e.dtype)
        return map_children(e, expr)

    def stmt(s):
        if isinstance(s, BufferStore):
            on = stores and s.buffer.name == buf.name
            return BufferStore(cache if on else s.buffer, expr(s.value),
                               index(tuple(expr(i) for i in s.indices)) if on else
                               tuple(expr(i) for i in s.indices))
        if isinstance(s, SBlock):
            s = replace(s, reads=regions(s.reads, loads), writes=regions(s.writes, stores),
                        init=stmt(s.init) if s.init is not None else None,
                        match_buffers=tuple(
                            (inner, regions((src,), True)[0]) for inner, src in
                            s.match_buffers))
        for field in ("value", "cond", "min", "extent"):
            if isinstance(getattr(s, field, None), E.PrimExpr):
                s = replace(s, **{field: expr(getattr(s, field))})
        return rebuild(s, [stmt(c) for c in kids(s)]) if kids(s) else s

    def regions(rs, on: bool):
        if rs is None or not on:
            return rs
        return tuple(BufferRegion(cache, _shifted(r.region, shift))
                     if r.buffer.name == buf.name else r for r in rs)

    return stmt(block)


def _shifted(region: tuple, shift) -> tuple:
    if shift is None:
        return region
    out = []
    for (lo, hi), s in zip(region, shift):
        if E.as_int(s) == 0:
            out.append((lo, hi))
        else:
            out.append((E.sub(lo, s), None if hi is None else E.sub(hi, s)))
    return tuple(out)
