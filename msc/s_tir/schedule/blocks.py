"""Block primitives on a PrimFunc: decompose_reduction, and finding blocks by name
(cache_read / cache_write live in ``cache.py``, compute_at / reverse_compute_at in
``compute_at.py``). Blocks are named (names are unique in a function, as TVM requires); each
primitive returns the new function (and the new block's name)."""

from __future__ import annotations

from dataclasses import replace

from ...errors import ScheduleError
from ...tir import expr as E
from ...tir.function import (
    PrimFunc,
    SBlock,
    SeqStmt,
    walk_stmts,
)
from .loops import find_loop, fresh_name
from .tree import block_loops, blocks_in, find_path, kids, replace_at, subst_stmt, var_names

__all__ = ["buffer_name", "decompose_reduction", "find_block"]


def find_block(func: PrimFunc, name: str, what: str = "get_block") -> list:
    path = find_path(func.body, lambda s: isinstance(s, SBlock) and s.name == name)
    if path is None or path[-1] is func.body:
        names = [b.name for b in blocks_in(func.body)[1:]]
        raise ScheduleError(f"{what}: no block {name!r} in function {func.name!r}", key=name,
                            hint=f"blocks: {names}")
    return path


# ----------------------------------------------------------------------- names

def buffer_name(func: PrimFunc, base: str) -> str:
    taken = {b.name for b in func.buffers}
    for s in walk_stmts(func.body):
        if isinstance(s, SBlock):
            taken.update(b.name for b in s.alloc_buffers)
    return fresh_name(func, base, taken)


def _block_name(func: PrimFunc, base: str) -> str:
    return fresh_name(func, base, {b.name for b in blocks_in(func.body)})


# ----------------------------------------------------------------------- decompose reduction

def decompose_reduction(func: PrimFunc, block_name: str, var: E.Var):
    """The block's init becomes its own block ``<name>_init`` in a nest right before
    ``loop``; the block (renamed ``<name>_update``) keeps the update. Returns (func, init
    name, update name)."""
    path = find_block(func, block_name, "decompose_reduction")
    block = path[-1]
    if block.init is None:
        raise ScheduleError(f"decompose_reduction: block {block_name!r} has no T.init()",
                            key=block_name)
    loops = block_loops(path)
    at = next((k for k, lp in enumerate(loops) if lp.var is var), None)
    if at is None:
        raise ScheduleError(f"decompose_reduction: loop {var.name!r} does not enclose block "
                            f"{block_name!r}", key=block_name)
    reduce_vars = {v.name for iv in block.iter_vars if iv.kind != "spatial"
                   for v in E.free_vars(iv.binding)}
    bad = [lp.var.name for lp in loops[:at] if lp.var.name in reduce_vars]
    if bad:
        raise ScheduleError(f"decompose_reduction: reduce loop(s) {bad} are outside loop "
                            f"{var.name!r}", key=block_name,
                            hint="decompose at a loop above every reduce loop")
    init_nest = _init_nest(func, block, loops[at:], reduce_vars)
    update = _block_name(func, f"{block_name}_update")
    func = replace(func, body=replace_at(path, replace(block, init=None, name=update)))
    lpath = find_loop(func, var, "decompose_reduction")
    parent = lpath[-2]
    if isinstance(parent, SeqStmt):
        items = []
        for k in kids(parent):
            items += [init_nest, k] if k is lpath[-1] else [k]
        func = replace(func, body=replace_at(lpath[:-1], SeqStmt(tuple(items))))
    else:
        func = replace(func, body=replace_at(lpath, SeqStmt((init_nest, lpath[-1]))))
    return func, init_nest_name(init_nest), update


def init_nest_name(nest) -> str:
    return blocks_in(nest)[0].name


def _init_nest(func: PrimFunc, block: SBlock, loops: list, reduce_vars: set):
    spatial = [iv for iv in block.iter_vars if iv.kind == "spatial"]
    used = {v.name for iv in spatial for v in E.free_vars(iv.binding)}
    if block.predicate is not None:
        used |= {v.name for v in E.free_vars(block.predicate)}
    if used & reduce_vars:
        raise ScheduleError(f"decompose_reduction: block {block.name!r} mixes spatial and "
                            "reduce loops in one binding", key=block.name)
    taken = var_names(func.body)
    keep = [lp for lp in loops if lp.var.name in used]
    names = {lp.var.name: E.Var(fresh_name(func, f"{lp.var.name}_init", taken), lp.var.dtype)
             for lp in keep}
    # TVM's init block keeps the block's annotations, its loops their kind and thread tag
    init = SBlock(_block_name(func, f"{block.name}_init"), block.init, tuple(spatial),
                  predicate=block.predicate, annotations=dict(block.annotations))
    stmt = subst_stmt(init, names)
    for lp in reversed(keep):
        stmt = replace(lp, var=names[lp.var.name], body=stmt)
    return stmt
