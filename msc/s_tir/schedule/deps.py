"""Block dependencies and annotations (TVM's ``get_producers`` / ``get_consumers`` /
``get_output_blocks``, ``annotate`` / ``unannotate``).

A block's producers are the blocks of its scope (the blocks whose nearest enclosing block
is the same) that write, before it, a buffer it reads; its consumers the ones that read,
after it, a buffer it writes. A scope's output blocks are the blocks under it (nested ones
too) that write a buffer not allocated inside the scope. Annotations are TVM's free-form
``key -> value`` attributes of a loop (``T.serial(..., annotations={...})``) or a block
(``T.sblock_attr({...})``); values are ints, floats, strings and lists / dicts of them.
"""

from __future__ import annotations

from dataclasses import replace

from ...errors import ScheduleError
from ...tir.function import PrimFunc, SBlock
from .blocks import find_block
from .loops import find_loop
from .region import block_reads, block_writes
from .tree import blocks_in, child_blocks, replace_at

__all__ = ["annotate", "consumers", "output_blocks", "producers"]


def _scope_blocks(func: PrimFunc, name: str, what: str) -> tuple[SBlock, list]:
    """(the block, the blocks of its scope in program order)."""
    path = find_block(func, name, what)
    scope = next(n for n in reversed(path[:-1]) if isinstance(n, SBlock))
    return path[-1], child_blocks(scope.body)


def producers(func: PrimFunc, name: str) -> list[str]:
    block, scope = _scope_blocks(func, name, "get_producers")
    reads = {b.name for b in block_reads(block)}
    before = scope[:next(k for k, b in enumerate(scope) if b is block)]
    return [b.name for b in before if reads & {w.name for w in block_writes(b)}]


def consumers(func: PrimFunc, name: str) -> list[str]:
    block, scope = _scope_blocks(func, name, "get_consumers")
    writes = {b.name for b in block_writes(block)}
    after = scope[next(k for k, b in enumerate(scope) if b is block) + 1:]
    return [b.name for b in after if writes & {r.name for r in block_reads(b)}]


def output_blocks(func: PrimFunc, scope_name: str) -> list[str]:
    scope = func.body if scope_name == "root" else find_block(func, scope_name,
                                                              "get_output_blocks")[-1]
    if not isinstance(scope, SBlock):
        raise ScheduleError(f"get_output_blocks: function {func.name!r} has no root block")
    inner = {a.name for b in blocks_in(scope) for a in b.alloc_buffers}
    return [b.name for b in blocks_in(scope.body)
            if any(w.name not in inner for w in block_writes(b))]


def annotate(func: PrimFunc, target: tuple, key: str, value, remove: bool = False) -> PrimFunc:
    """``target`` is ("block", name) or ("loop", var); ``remove`` drops ``key``."""
    kind, ref = target
    what = "unannotate" if remove else "annotate"
    if kind == "block":
        path = find_block(func, ref, what)
    else:
        path = find_loop(func, ref, what)
    node = path[-1]
    notes = dict(node.annotations)
    if remove:
        if key not in notes:
            label = node.name if isinstance(node, SBlock) else node.var.name
            raise ScheduleError(f"unannotate: {label!r} has no annotation {key!r}", key=key,
                                hint=f"its annotations: {sorted(notes)}")
        del notes[key]
    else:
        notes[key] = value
    return replace(func, body=replace_at(path, replace(node, annotations=notes)))


