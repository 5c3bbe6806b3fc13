"""``annotate_buffer_access`` (TVM's): state the region a block reads or writes of one
buffer, instead of the one inferred from its accesses, and mark it as explicit.

    sch.annotate_buffer_access(block, 0, "read",
                               lambda vi, vj: ((vi - 1, vi + 1), (vj - 1, vj + 1)))
    #   T.reads(A[vi - 1 : vi + 1, vj - 1 : vj + 1])
    #   T.sblock_attr({"explicit_read_region": [0]})

The function maps the block's iter vars to one entry per dim of the buffer: a ``(start,
stop)`` pair (stop exclusive) or a single index. Later primitives that size regions (e.g. a
``compute_at`` of the producer) take the stated region; the block's body does not change.
The map is kept in the trace as its lambda text, read back without ``eval``.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from ...errors import ScheduleError
from ...tir import expr as E
from ...tir.function import BufferRegion, PrimFunc, SBlock
from .blocks import find_block
from .layout import read_lambda_expr
from .region import block_reads, block_writes, loads
from .tree import replace_at

__all__ = ["annotate_buffer_access"]

_KEYS = {"read": "explicit_read_region", "write": "explicit_write_region"}


def annotate_buffer_access(func: PrimFunc, block_name: str, index: int, kind: str,
                           ranges) -> tuple[PrimFunc, str]:
    """Returns (func, the ranges function as lambda text)."""
    what = "annotate_buffer_access"
    if kind not in _KEYS:
        raise ScheduleError(f"{what}: buffer_index_type must be 'read' or 'write', got "
                            f"{kind!r}")
    path = find_block(func, block_name, what)
    block = path[-1]
    regions = _stated(block, kind)
    if not 0 <= index < len(regions):
        raise ScheduleError(f"{what}: block {block_name!r} has no {kind} buffer {index}",
                            key=block_name, hint=f"its {kind}s: "
                                                 f"{[r.buffer.name for r in regions]}")
    buf = regions[index].buffer
    names = [iv.var.name for iv in block.iter_vars]
    variables = [iv.var for iv in block.iter_vars]
    entries = _entries(ranges, variables, what)
    if len(entries) != buf.ndim:
        raise ScheduleError(f"{what}: the ranges give {len(entries)} dims, buffer "
                            f"{buf.name!r} has {buf.ndim}", key=block_name)
    region = tuple((lo, hi) if hi is not None else (lo, None) for lo, hi in entries)
    regions[index] = BufferRegion(buf, region)
    notes = dict(block.annotations)
    marked = [k for k in notes.get(_KEYS[kind], []) if k != index]
    notes[_KEYS[kind]] = sorted(marked + [index])
    field = "reads" if kind == "read" else "writes"
    other = "writes" if kind == "read" else "reads"
    new = replace(block, annotations=notes, **{field: tuple(regions),
                                               other: tuple(_stated(block, other[:-1]))})
    return replace(func, body=replace_at(path, new)), _text(names, entries)


def _stated(block: SBlock, kind: str) -> list:
    """The block's regions of ``kind`` as stated, or the points it accesses when none are."""
    stated = block.reads if kind == "read" else block.writes
    if stated is not None:
        return list(stated)
    bufs = block_reads(block) if kind == "read" else block_writes(block)
    out = []
    for buf in bufs:
        index = _first_access(block, buf.name, kind)
        out.append(BufferRegion(buf, tuple((i, None) for i in index)))
    return out


def _first_access(block: SBlock, name: str, kind: str) -> tuple:
    from ...tir.function import BufferStore
    from .inline import exprs_of, own_stmts

    for stmt in own_stmts(replace(block, init=None)):
        if kind == "write" and isinstance(stmt, BufferStore) and stmt.buffer.name == name:
            return tuple(stmt.indices)
        if kind == "read":
            for e in exprs_of(stmt):
                for ld in loads(e):
                    if ld.buffer.name == name:
                        return tuple(ld.indices)
    return ()


def _entries(ranges, variables: list, what: str) -> list:
    """[(lo, hi or None)] from the function (or its lambda text) of the iter vars."""
    if isinstance(ranges, str):
        try:
            node = ast.parse(ranges, mode="eval").body
        except SyntaxError:
            node = None
        if not isinstance(node, ast.Lambda):
            raise ScheduleError(f"{what}: {ranges!r} is not a lambda")
        env = {a.arg: v for a, v in zip(node.args.args, variables)}
        items = node.body.elts if isinstance(node.body, (ast.Tuple, ast.List)) else [node.body]
        return [_pair([read_lambda_expr(x, env, ranges, what) for x in item.elts])
                if isinstance(item, ast.Tuple) else (E.convert(read_lambda_expr(item, env, ranges, what)),
                                                     None)
                for item in items]
    if not callable(ranges):
        raise ScheduleError(f"{what}: the ranges must be a function of the block's iter vars")
    items = ranges(*variables)
    items = list(items) if isinstance(items, (list, tuple)) else [items]
    return [_pair(list(x)) if isinstance(x, (list, tuple)) else (E.convert(x), None)
            for x in items]


def _pair(values: list) -> tuple:
    if len(values) != 2:
        raise ScheduleError(f"annotate_buffer_access: a range is (start, stop), got {values}")
    return E.convert(values[0]), E.convert(values[1])


def _text(names: list, entries: list) -> str:
    parts = [f"({E.to_str(lo)}, {E.to_str(hi)})" if hi is not None else E.to_str(lo)
             for lo, hi in entries]
    return f"lambda {', '.join(names)}: ({', '.join(parts)},)"


