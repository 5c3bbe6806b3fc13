"""Buffer primitives: ``set_scope`` (the storage scope of a buffer a block writes) and
``storage_align`` (padding of one of its dims for the buffer's allocation).

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
from .tree import kids, rebuild, replace_at, rewrite_stmt

__all__ = ["set_scope", "storage_align", "write_buffer"]

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


ALIGN_KEY = "buffer_dim_align"


def storage_align(func: PrimFunc, block_name: str, index: int, axis: int, factor: int,
                  offset: int) -> PrimFunc:
    """TVM's ``storage_align``: the block's written buffer ``index`` is to be allocated with
    the stride of ``axis`` padded to ``factor * k + offset`` (against shared-memory bank
    conflicts). Recorded as the block annotation ``buffer_dim_align``
    (``[[buffer_index, axis, factor, offset], ...]``, one entry per buffer and axis, a later
    call replacing an earlier one) that TVM's lowering reads; msc's CPU lowering keeps buffers
    unpadded and carries the annotation."""
    what = "storage_align"
    path = find_block(func, block_name, what)
    block = path[-1]
    if isinstance(index, bool) or not isinstance(index, int):
        raise ScheduleError(f"{what}: buffer_index must be an int, got {index!r}",
                            key=block_name)
    buf = write_buffer(func, block, index, what)
    if any(p.name == buf.name for p in func.buffers):
        raise ScheduleError(f"{what}: {buf.name!r} is a parameter of the function; only an "
                            "allocated buffer can be padded", key=block_name)
    if not 0 <= axis < len(buf.shape):
        raise ScheduleError(f"{what}: axis {axis} is out of range for {buf.name!r} "
                            f"({len(buf.shape)} dims)", key=block_name)
    if factor <= 0 or offset < 0:
        raise ScheduleError(f"{what}: factor must be > 0 and offset >= 0, got factor "
                            f"{factor}, offset {offset}", key=block_name)
    entries = _align_entries(block, what)
    entries = [e for e in entries if (e[0], e[1]) != (index, axis)] + \
        [[index, axis, factor, offset]]
    new = replace(block, annotations={**block.annotations, ALIGN_KEY: entries})
    return replace(func, body=replace_at(path, new))


def _align_entries(block: SBlock, what: str) -> list:
    value = block.annotations.get(ALIGN_KEY, [])
    ok = isinstance(value, (list, tuple)) and all(
        isinstance(e, (list, tuple)) and len(e) == 4 and
        all(isinstance(x, int) and not isinstance(x, bool) for x in e) for e in value)
    if not ok:
        raise ScheduleError(f"{what}: block {block.name!r} has a {ALIGN_KEY} annotation that "
                            f"is not [[buffer_index, axis, factor, offset], ...]: {value!r}",
                            key=block.name)
    return [list(e) for e in value]
