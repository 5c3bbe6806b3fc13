"""Block-axis primitives: ``reorder_block_iter_var`` (TVM's): the order in which a block
declares its iter vars, which is what ``T.axis.remap`` prints and what later primitives
(blockize, tensorize) read. The loops and the computed values do not change."""

from __future__ import annotations

from dataclasses import replace

from ...errors import ScheduleError
from ...tir.function import PrimFunc
from .blocks import find_block
from .tree import replace_at

__all__ = ["reorder_block_iter_var"]


def reorder_block_iter_var(func: PrimFunc, block_name: str, new_order: list) -> PrimFunc:
    """The block's iter vars in ``new_order`` (a permutation of their positions)."""
    path = find_block(func, block_name, "reorder_block_iter_var")
    block = path[-1]
    count = len(block.iter_vars)
    order = [int(k) for k in new_order]
    if sorted(order) != list(range(count)):
        raise ScheduleError(f"reorder_block_iter_var: {order} is not a permutation of the "
                            f"{count} iter vars of block {block_name!r}", key=block_name,
                            hint=f"give each position 0..{count - 1} once")
    new = replace(block, iter_vars=tuple(block.iter_vars[k] for k in order))
    return replace(func, body=replace_at(path, new))
