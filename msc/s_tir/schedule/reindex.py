"""``reindex`` (TVM's ``ReIndex``): a block's access to one buffer goes through a new buffer
indexed by the block's own iter vars, with a copy stage in between.

    B[vi, vj] = A[vj, vi] * 2.0      -- sch.reindex(block, ("read", 0)) -->
    A_reindex[vi, vj] = A[vj, vi]    (a new block, in its own loop nest right before)
    B[vi, vj] = A_reindex[vi, vj] * 2.0

The new buffer has one dim per iter var that appears in the (simplified) indices, in the
block's iter var order, sized ``min + extent``; a write reindex copies back right after the
block's loop nest. This is what lets a later ``transform_layout`` / ``tensorize`` see the
access in the block's own axes. TVM's refusals: a block with nested blocks, a buffer the
block does not access through loads / stores, or accesses at different indices.
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
from .arith import map_children, simplify_in
from .blocks import buffer_name, find_block
from .inline import exprs_of, own_stmts, uses_data
from .loops import fresh_name
from .region import block_reads, block_writes, loads
from .tree import blocks_in, kids, rebuild, replace_at, rewrite_expr, var_names

__all__ = ["reindex", "resolve_buffer"]


def resolve_buffer(block: SBlock, buffer, what: str) -> tuple[str, int]:
    """TVM's buffer argument: ``("read", k)`` / ``("write", k)``, or a buffer name that must
    name one buffer of the block (a buffer both read and written counts as its write)."""
    reads, writes = block_reads(block), block_writes(block)
    if isinstance(buffer, Buffer):
        buffer = buffer.name
    if isinstance(buffer, str):
        found = {}
        for kind, bufs in (("read", reads), ("write", writes)):
            for k, buf in enumerate(bufs):
                if buf.name == buffer:
                    found[buf.name] = (kind, k)
        if not found:
            raise ScheduleError(f"{what}: block {block.name!r} accesses no buffer {buffer!r}",
                                key=block.name, hint=f"reads {[b.name for b in reads]}, "
                                                     f"writes {[b.name for b in writes]}")
        return found[buffer]
    try:
        kind, index = buffer
        index = int(index)
    except (TypeError, ValueError):
        raise ScheduleError(f"{what}: buffer must be a name or ('read' | 'write', index), got "
                            f"{buffer!r}", key=block.name) from None
    bufs = {"read": reads, "write": writes}.get(kind)
    if bufs is None or not 0 <= index < len(bufs):
        raise ScheduleError(f"{what}: block {block.name!r} has no {kind} buffer {index}",
                            key=block.name, hint=f"reads {[b.name for b in reads]}, "
                                                 f"writes {[b.name for b in writes]}")
    return kind, index


def _access_indices(block: SBlock, buf: Buffer) -> tuple:
    """The one index tuple the block uses for ``buf`` (TVM reads the body, not the init)."""
    if blocks_in(block.body):
        raise ScheduleError(f"reindex: the target block {block.name!r} is not a leaf block",
                            key=block.name, hint="reindex a block without nested blocks")
    found: list = []
    for stmt in own_stmts(replace(block, init=None)):
        for e in exprs_of(stmt):
            found += [ld.indices for ld in loads(e) if ld.buffer.name == buf.name]
            if uses_data(e, buf.name):
                raise ScheduleError(f"reindex: buffer {buf.name!r} is accessed opaquely in "
                                    f"block {block.name!r}", key=block.name)
        if isinstance(stmt, BufferStore) and stmt.buffer.name == buf.name:
            found.append(stmt.indices)
    if not found:
        raise ScheduleError(f"reindex: block {block.name!r} has no load or store of "
                            f"{buf.name!r}", key=block.name)
    if any(tuple(x) != tuple(found[0]) for x in found[1:]):
        raise ScheduleError(f"reindex: the target buffer {buf.name!r} is accessed at "
                            f"different indices in block {block.name!r}", key=block.name,
                            hint="reindex needs every access of the buffer at the same "
                                 "indices")
    return tuple(found[0])


def _simplified(block: SBlock, indices: tuple) -> tuple:
    ranges = {iv.var.name: (iv.min, E.sub(E.add(iv.min, iv.extent), 1))
              for iv in block.iter_vars}
    out = []
    for index in indices:
        new = simplify_in(index, ranges)
        out.append(index if isinstance(new, E.IntImm) else new)  # a constant keeps the dim
    return tuple(out)


def _rewrite_accesses(s, old: str, new: Buffer, indices: tuple):
    """Every load / store of ``old`` in ``s`` (outside nested blocks) at ``new[indices]``."""
    def fx(e):
        if e is None:
            return None
        if isinstance(e, BufferLoad):
            if e.buffer.name == old:
                return BufferLoad(new, indices)
            return BufferLoad(e.buffer, tuple(fx(i) for i in e.indices))
        return map_children(e, fx)

    if isinstance(s, BufferStore):
        buf, idx = (new, indices) if s.buffer.name == old else (s.buffer, s.indices)
        return BufferStore(buf, fx(s.value), tuple(fx(i) for i in idx))
    new_s = s
    for field in ("value", "cond", "min", "extent"):
        if isinstance(getattr(s, field, None), E.PrimExpr):
            new_s = replace(new_s, **{field: fx(getattr(s, field))})
    if kids(s):
        new_s = rebuild(new_s, [_rewrite_accesses(c, old, new, indices) for c in kids(new_s)])
    return new_s


def _regions(regions, old: str, region: BufferRegion):
    if regions is None:
        return None
    return tuple(region if r.buffer.name == old else r for r in regions)


def _stage(func: PrimFunc, block: SBlock, covered: list, src_dst: tuple, name: str):
    """The copy nest: fresh loops ``ax..`` over the covered iter vars' domains."""
    taken = var_names(func.body)
    ivs, loops, subst = [], [], {}
    for iv in covered:
        v = E.Var(fresh_name(func, f"v{len(ivs)}", taken), iv.var.dtype)
        ax = E.Var(fresh_name(func, f"ax{len(loops)}", taken), iv.var.dtype)
        taken.update({v.name, ax.name})
        ivs.append(IterVar(v, iv.min, iv.extent, "spatial", ax))
        loops.append((ax, iv))
        subst[iv.var.name] = v
    (src, src_idx), (dst, dst_idx) = [(b, tuple(rewrite_expr(i, subst) for i in idx))
                                      for b, idx in src_dst]
    stmt = SBlock(name, BufferStore(dst, BufferLoad(src, src_idx), dst_idx), tuple(ivs),
                  reads=(BufferRegion(src, tuple((i, None) for i in src_idx)),),
                  writes=(BufferRegion(dst, tuple((i, None) for i in dst_idx)),))
    for ax, iv in reversed(loops):
        stmt = For(ax, iv.min, iv.extent, "serial", stmt)
    return stmt


def reindex(func: PrimFunc, block_name: str, kind: str, index: int):
    """Returns (func, name of the copy block)."""
    path = find_block(func, block_name, "reindex")
    block = path[-1]
    buf = (block_reads if kind == "read" else block_writes)(block)[index]
    indices = _simplified(block, _access_indices(block, buf))
    used = {v.name for i in indices for v in E.free_vars(i)}
    covered = [iv for iv in block.iter_vars if iv.var.name in used]
    new_buf = Buffer(buffer_name(func, f"{buf.name}_reindex"),
                     tuple(E.add(iv.min, iv.extent) for iv in covered), buf.dtype,
                     scope=buf.scope)
    own = tuple(iv.var for iv in covered)
    pair = [(buf, indices), (new_buf, own)]
    name = _stage_name(func, new_buf.name if kind == "read" else f"{buf.name}_reindex")
    stage = _stage(func, block, covered, pair if kind == "read" else pair[::-1], name)
    region = BufferRegion(new_buf, tuple((v, None) for v in own))
    new_block = replace(_rewrite_accesses(block, buf.name, new_buf, own),
                        init=(_rewrite_accesses(block.init, buf.name, new_buf, own)
                              if block.init is not None else None),
                        reads=_regions(block.reads, buf.name, region),
                        writes=_regions(block.writes, buf.name, region))
    return _insert(func, path, new_block, stage, new_buf, kind == "write"), name


def _stage_name(func: PrimFunc, base: str) -> str:
    return fresh_name(func, base, {b.name for b in blocks_in(func.body)})


def _insert(func: PrimFunc, path: list, new_block: SBlock, stage, new_buf: Buffer,
            after: bool) -> PrimFunc:
    """Replace the block, then put ``stage`` next to the block's outermost loop in its scope
    block's body, and allocate ``new_buf`` in that scope block."""
    scope_at = max(k for k, node in enumerate(path[:-1]) if isinstance(node, SBlock))
    chain = path[scope_at + 1:-1]
    if chain and isinstance(chain[0], SeqStmt):
        chain = chain[1:]
    if any(not isinstance(node, For) for node in chain):
        raise ScheduleError(f"reindex: block {new_block.name!r} must sit in a chain of "
                            "loops directly under its scope block", key=new_block.name)
    body = replace_at(path, new_block)
    spath = path[:scope_at + 1]
    scope = _at(body, len(spath) - 1, path)
    top = chain[0] if chain else path[-1]
    items = list(scope.body.stmts) if isinstance(scope.body, SeqStmt) else [scope.body]
    pos = next(k for k, item in enumerate(_old_items(path[scope_at])) if item is top)
    items.insert(pos + 1 if after else pos, stage)
    scope = replace(scope, body=seq(items), alloc_buffers=scope.alloc_buffers + (new_buf,))
    new_path = [_at(body, k, path) for k in range(scope_at + 1)]
    return replace(func, body=replace_at(new_path, scope))


def _old_items(scope: SBlock) -> list:
    return list(scope.body.stmts) if isinstance(scope.body, SeqStmt) else [scope.body]


def _at(root, depth: int, path: list):
    """The node at ``depth`` along ``path``'s route (by child positions) in the new tree."""
    node = root
    for k in range(depth):
        node = kids(node)[next(i for i, c in enumerate(kids(path[k])) if c is path[k + 1])]
    return node
