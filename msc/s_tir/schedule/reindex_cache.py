"""``reindex_cache_read`` / ``reindex_cache_write`` (TVM's ``ReindexCacheRead`` /
``ReindexCacheWrite`` in ``cache_read_write.cc``): a cache of one buffer a block accesses at a
single point, laid out by an index map of the block's iter vars.

    C[vi, vj] = B[vi, vj] + 1.0     -- sch.reindex_cache_read("C", 0, "shared",
                                                          lambda i, j: (j, i // 2, i % 2)) -->
    B_shared[vj, vi // 2, vi % 2] = B[vi, vj]      (a copy block, at the cache location)
    C[vi, vj] = B_shared[vj, vi // 2, vi % 2] + 1.0

The copy block has the iter vars of the block that appear in the indices (each with its
binding) under the loops those bindings use between the block and the cache location. The
location is TVM's (``CacheLocDetector``): in the lowest loop or block whose body holds both the
buffer's writer and its first consumer (for a read: the block; for a write: the writer's
consumers), before the consumer's subtree; right at the start of the scope for a buffer nobody
writes there, at its end for a write nobody reads. TVM's refusals, in TVM's words: an access
that is not a single point, an index map whose vars differ from the access's, several
writers, a bad storage scope or buffer index, a scope that is not a stage pipeline.
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
)
from .arith import map_children, raw_subst
from .blocks import buffer_name, find_block
from .flags import scope_deps
from .layout import index_map_text, legalize, map_exprs
from .loops import fresh_name
from .refusals import check_stage_pipeline
from .region import accesses, block_reads, block_writes, bounds
from .storage import check_scope
from .tree import blocks_in, child_blocks, kids, rebuild

__all__ = ["NotSinglePointAccess", "NotSingleWriteBlock", "ReindexCacheReadWriteNotMatchError",
           "cache_location", "insert_stage", "only_writer", "rebuild_with_stage",
           "reindex_cache_read", "reindex_cache_write"]


class NotSinglePointAccess(ScheduleError):
    """TVM's ``NotSinglePointAccess``."""


class ReindexCacheReadWriteNotMatchError(ScheduleError):
    """TVM's ``ReindexCacheReadWriteNotMatchError``."""


class NotSingleWriteBlock(ScheduleError):
    """TVM's ``NotSingleWriteBlock``: several blocks of the scope write the buffer."""


def reindex_cache_read(func: PrimFunc, block_name: str, index: int, scope: str, index_map):
    """Returns (func, copy block name, the index map as lambda text)."""
    return _reindex_cache(func, block_name, index, scope, index_map, True)


def reindex_cache_write(func: PrimFunc, block_name: str, index: int, scope: str, index_map):
    """Returns (func, copy block name, the index map as lambda text)."""
    return _reindex_cache(func, block_name, index, scope, index_map, False)


def _reindex_cache(func, block_name, index, scope, index_map, is_read):
    what = "reindex_cache_read" if is_read else "reindex_cache_write"
    scope = check_scope(scope, what)
    path = find_block(func, block_name, what)
    block = path[-1]
    buffers = (block_reads if is_read else block_writes)(block)
    if not 0 <= index < len(buffers):
        kind = "read" if is_read else "write"
        raise ScheduleError(f"{what}: block {block_name!r} has no {kind} buffer {index}",
                            key=block_name,
                            hint=f"its buffers: {[b.name for b in buffers]}")
    buf = buffers[index]
    check_stage_pipeline(func, path, what)
    scope_block = next(s for s in reversed(path[:-1]) if isinstance(s, SBlock))
    writer = only_writer(scope_block, buf, block_name)
    if is_read:
        related = [block]
    else:
        related = [dst for src, dst, kind in scope_deps(child_blocks(scope_block.body))
                   if src is block and kind == "RAW"]
    loc, pos = cache_location(scope_block, writer, related)
    old = _single_point(block, buf, "read" if is_read else "write", what)
    variables, new = map_exprs(index_map, len(block.iter_vars),
                               [iv.var.dtype for iv in block.iter_vars], what)
    dtype = block.iter_vars[0].var.dtype if block.iter_vars else "int32"
    new = [legalize(raw_subst(e, {v.name: iv.var for v, iv in zip(variables,
                                                                  block.iter_vars)}), dtype)
           for e in new]
    used = _matched(block, old, new, what)
    cache = Buffer(buffer_name(func, f"{buf.name}_{scope}"), _shape(block, new, what),
                   buf.dtype, scope=scope)
    stage = _stage(func, path, loc, used, (buf, old), (cache, new), is_read,
                   f"{buf.name}_{scope}")
    new_block = _rewrite_block(block, buf, cache, new)
    body = rebuild_with_stage(func.body, {id(block): new_block}, loc, pos, stage, scope_block,
                              cache)
    text = index_map_text(variables, [raw_subst(e, {iv.var.name: v for v, iv in
                                                    zip(variables, block.iter_vars)})
                                      for e in new])
    return replace(func, body=body), blocks_in(stage)[0].name, text


# ----------------------------------------------------------------------------- analysis

def only_writer(scope_block: SBlock, buf: Buffer, block_name: str):
    """The one child block of the scope that writes ``buf`` (None: none does)."""
    writers = [b for b in child_blocks(scope_block.body)
               if buf.name in {w.name for w in block_writes(b)}]
    if len(writers) > 1:
        raise NotSingleWriteBlock(f"The buffer {buf.name} is expected to be written by single "
                                  f"block, but got {len(writers)} blocks who write it.",
                                  key=block_name)
    return writers[0] if writers else None


def _single_point(block: SBlock, buf: Buffer, kind: str, what: str) -> tuple:
    """The indices (in the block's iter vars) of the block's one-element access to ``buf``;
    TVM's NotSinglePointAccess otherwise."""
    stated = block.reads if kind == "read" else block.writes
    region = next((r for r in stated or () if r.buffer.name == buf.name), None)
    if region is not None:
        points = [lo for lo, hi in region.region
                  if hi is None or E.as_int(E.sub(hi, lo)) == 1]
        if len(points) == len(region.region):
            return tuple(points)
        raise _not_single(block, buf, what)
    own = {iv.var.name for iv in block.iter_vars}
    parts = [block.body] + ([block.init] if block.init is not None else [])
    found = {tuple(E.to_str(i) for i in idx): idx for part in parts
             for _, _, idx in accesses(part, kind, buf.name)}
    if len(found) != 1:
        raise _not_single(block, buf, what)
    (indices,) = found.values()
    if any(v.name not in own for i in indices for v in E.free_vars(i)):
        raise _not_single(block, buf, what)
    return tuple(indices)


def _not_single(block: SBlock, buf: Buffer, what: str) -> NotSinglePointAccess:
    return NotSinglePointAccess(f"{what}: The buffer region of {buf.name} accessed inside "
                                f"block {block.name!r} is not a single point, which violates "
                                f"the prerequisite of {what} primitive.", key=block.name)


def _matched(block: SBlock, old: tuple, new: list, what: str) -> list:
    """The iter vars the indices use; each must appear in both the old and the new ones."""
    in_old = {v.name for i in old for v in E.free_vars(i)}
    in_new = {v.name for i in new for v in E.free_vars(i)}
    for iv in block.iter_vars:
        name = iv.var.name
        if (name in in_old) != (name in in_new):
            has, lacks = (old, new) if name in in_old else (new, old)
            raise ReindexCacheReadWriteNotMatchError(
                f"Error when applying {what} on block {block.name!r}, the block itervar {name} "
                f"appears in {_text(has)}, but not in {_text(lacks)}.", key=block.name)
    return [iv for iv in block.iter_vars if iv.var.name in in_old]


def _text(indices) -> str:
    return "[" + ", ".join(E.to_str(i) for i in indices) + "]"


def _shape(block: SBlock, new: list, what: str) -> tuple:
    ranges = {iv.var.name: (iv.min, E.sub(E.add(iv.min, iv.extent), 1))
              for iv in block.iter_vars}
    shape = []
    for e in new:
        lo, hi = (E.as_int(x) for x in bounds(e, ranges))
        if lo is None or hi is None:
            raise ScheduleError(f"{what}: msc sizes caches of constant-sized maps only "
                                f"({E.to_str(e)})")
        shape.append(E.IntImm(hi - lo + 1, e.dtype))
    return tuple(shape)


# ----------------------------------------------------------------------------- location

def cache_location(scope_block: SBlock, writer, related: list) -> tuple:
    """(the loop or block whose body gets the cache stage, the position there): TVM's
    ``CacheLocDetector``."""
    if not related:
        body = scope_block.body
        return scope_block, len(body.stmts) if isinstance(body, SeqStmt) else 1
    finder = _LocFinder(scope_block, writer, {id(b) for b in related})
    finder.visit(scope_block)
    return finder.loc, finder.pos


class _LocFinder:
    def __init__(self, scope, writer, related: set):
        self.scope, self.writer, self.related = scope, writer, related
        self.seen_writer = self.seen_related = False
        self.loc, self.pos = None, -1

    def visit(self, s) -> None:
        if isinstance(s, SeqStmt):
            self._seq(s)
        elif isinstance(s, SBlock):
            self._block(s)
        elif isinstance(s, For):
            self.visit(s.body)
            if self.seen_writer and self.seen_related and self.loc is None and self.pos != -1:
                self.loc = s
        else:
            for child in kids(s):
                self.visit(child)

    def _seq(self, s: SeqStmt) -> None:
        before, self.seen_writer = self.seen_writer, False
        for k, child in enumerate(s.stmts):
            if self.pos != -1:
                break
            self.visit(child)
            if self.seen_writer and self.seen_related and self.pos == -1:
                self.pos = k
                break
            if self.seen_related:
                break
        self.seen_writer = self.seen_writer or before

    def _block(self, s: SBlock) -> None:
        if s is self.scope:
            self.visit(s.body)
            if self.seen_related and self.loc is None:
                self.loc = s
                if not self.seen_writer and self.pos == -1:
                    self.pos = 0
        elif s is self.writer:
            self.seen_writer = True
        elif id(s) in self.related:
            self.seen_related = True


def insert_stage(body, pos: int, stage):
    """TVM's ``InsertCacheStage``: ``stage`` at ``pos`` of a sequence, or before (0) / after
    (1) a single statement."""
    items = list(body.stmts) if isinstance(body, SeqStmt) else [body]
    items.insert(pos, stage)
    return SeqStmt(tuple(items))


def rebuild_with_stage(s, swaps: dict, loc, pos: int, stage, scope_block, alloc):
    """``s`` with blocks swapped (by id), ``stage`` inserted in ``loc``'s body and ``alloc``
    allocated in ``scope_block``."""
    if id(s) in swaps:
        return swaps[id(s)]
    children = kids(s)
    node = rebuild(s, [rebuild_with_stage(c, swaps, loc, pos, stage, scope_block, alloc)
                       for c in children]) if children else s
    if s is loc:
        node = replace(node, body=insert_stage(node.body, pos, stage))
    if s is scope_block:
        node = replace(node, alloc_buffers=node.alloc_buffers + (alloc,))
    return node


# ----------------------------------------------------------------------------- rewriting

def _stage(func, path, loc, used: list, old_access, new_access, is_read, name):
    """The copy block over the ``used`` iter vars, under fresh copies of the loops between
    the block and ``loc`` that their bindings use."""
    at = next(k for k, s in enumerate(path) if s is loc)
    needed = {v.name for iv in used for v in E.free_vars(iv.binding)}
    loops = [s for s in path[at + 1:-1] if isinstance(s, For) and s.var.name in needed]
    loop_vars = {lp.var.name: E.Var(lp.var.name, lp.var.dtype) for lp in loops}
    ivs = [IterVar(E.Var(iv.var.name, iv.var.dtype), iv.min, iv.extent, "spatial",
                   raw_subst(iv.binding, loop_vars)) for iv in used]
    block_vars = {iv.var.name: new.var for iv, new in zip(used, ivs)}
    (src, src_idx), (dst, dst_idx) = [(b, tuple(raw_subst(i, block_vars) for i in idx))
                                      for b, idx in (old_access, new_access)[::1 if is_read
                                                                             else -1]]
    taken = {b.name for b in blocks_in(func.body)}
    stmt = SBlock(fresh_name(func, name, taken),
                  BufferStore(dst, BufferLoad(src, src_idx), dst_idx), tuple(ivs),
                  reads=(BufferRegion(src, tuple((i, None) for i in src_idx)),),
                  writes=(BufferRegion(dst, tuple((i, None) for i in dst_idx)),))
    for lp in reversed(loops):
        stmt = For(loop_vars[lp.var.name], lp.min, lp.extent, "serial", stmt)
    return stmt


def _rewrite_block(block: SBlock, old: Buffer, new: Buffer, indices: list) -> SBlock:
    """Every load / store of ``old`` in the block at ``new[indices]``, its stated regions
    too."""
    indices = tuple(indices)

    def expr(e):
        if isinstance(e, BufferLoad) and e.buffer.name == old.name:
            return BufferLoad(new, indices)
        return map_children(e, expr)

    def stmt(s):
        if isinstance(s, BufferStore):
            buf, idx = (new, indices) if s.buffer.name == old.name else (s.buffer, s.indices)
            return BufferStore(buf, expr(s.value), tuple(expr(i) for i in idx))
        for field in ("value", "cond", "min", "extent"):
            if isinstance(getattr(s, field, None), E.PrimExpr):
                s = replace(s, **{field: expr(getattr(s, field))})
        return rebuild(s, [stmt(c) for c in kids(s)]) if kids(s) else s

    region = BufferRegion(new, tuple((i, None) for i in indices))
    regions = (lambda rs: None if rs is None else
               tuple(region if r.buffer.name == old.name else r for r in rs))
    return replace(block, body=stmt(block.body),
                   init=stmt(block.init) if block.init is not None else None,
                   reads=regions(block.reads), writes=regions(block.writes))
