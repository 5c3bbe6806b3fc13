"""Buffer primitives: ``set_scope`` (the storage scope of a buffer a block writes).

TVM's ``sch.set_scope(block, buffer_index, storage_scope)`` changes where an intermediate
buffer lives (``"shared"``, ``"local"`` ...) and renames it ``<name>_<scope>``; every access,
region, allocation and ``T.match_buffer`` of a region of it follows. A function parameter
cannot move, and the scope must be one TVM knows. msc's CPU backend keeps every scope in
ordinary memory: the scope is carried, printed and kept by later primitives.
"""

from __future__ import annotations

from dataclasses import replace

from ...errors import ScheduleError
from ...tir.function import Buffer, BufferRegion, PrimFunc, SBlock
from .blocks import find_block
from .region import block_writes
from .storage import check_scope
from .tree import kids, rebuild, rewrite_stmt

__all__ = ["set_scope", "write_buffer"]

def write_buffer(func: PrimFunc, block: SBlock, index: int | str, what: str) -> Buffer:
    """The block's written buffer ``index`` (or the one named so); a buffer the block
    matched on a region (``T.match_buffer``) stands for the buffer it views."""
    views = {m.name: region.buffer for m, region in block.match_buffers}
    written = list({views.get(b.name, b).name: views.get(b.name, b)
                    for b in block_writes(block)}.values())
    if isinstance(index, str):
        found = [b for b in written if b.name == index]
        if not found:
            raise ScheduleError(f"{what}: block {block.name!r} writes no buffer {index!r}",
                                key=block.name, hint=f"it writes {[b.name for b in written]}")
        return found[0]
    if not 0 <= index < len(written):
        raise ScheduleError(f"{what}: block {block.name!r} has no written buffer {index}",
                            key=block.name, hint=f"it writes {[b.name for b in written]}")
    return written[index]


def set_scope(func: PrimFunc, block_name: str, index: int | str, scope: str) -> PrimFunc:
    what = "set_scope"
    block = find_block(func, block_name, what)[-1]
    buf = write_buffer(func, block, index, what)
    scope = check_scope(scope, what)
    if any(p.name == buf.name for p in func.buffers):
        raise ScheduleError(f"{what}: {buf.name!r} is a parameter of the function (an output "
                            "buffer); its scope cannot change", key=block.name)
    if buf.scope == scope:
        return func
    new = replace(buf, name=f"{buf.name}_{scope.replace('.', '_')}", scope=scope)
    body = _swap(func.body, {buf.name: new}, scope)
    return replace(func, body=body)


def _swap(s, buffers: dict, scope: str):
    """Every use of the buffers in ``buffers`` (old name -> new) renamed and re-scoped: their
    accesses, regions, allocations, and buffers matched on a region of them."""
    if isinstance(s, SBlock):
        matched = dict(buffers)
        matches = []
        for m, region in s.match_buffers:
            if region.buffer.name in buffers:
                view = replace(m, name=f"{m.name}_{scope.replace('.', '_')}", scope=scope)
                matched[m.name] = view
                m = view
            matches.append((m, BufferRegion(matched.get(region.buffer.name, region.buffer),
                                            region.region)))
        allocs = tuple(matched.get(b.name, b) for b in s.alloc_buffers)
        inner = replace(s, match_buffers=tuple(matches), alloc_buffers=allocs,
                        body=_swap(s.body, matched, scope))
        if s.init is not None:
            inner = replace(inner, init=_swap(s.init, matched, scope))
        return rewrite_stmt(inner, {}, matched) if matched else inner
    parts = kids(s)
    if parts:
        return rebuild(s, [_swap(c, buffers, scope) for c in parts])
    return rewrite_stmt(s, {}, buffers)
