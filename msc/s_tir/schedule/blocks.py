"""Block primitives on a PrimFunc: cache_read / cache_write, decompose_reduction
(compute_at / reverse_compute_at live in ``compute_at.py``). Blocks are named (names are
unique in a function, as TVM requires); each primitive returns the new function (and the new
block's name).

The root block's body is a sequence of top-level statements; caches are whole-buffer copy
nests placed next to the block's statement."""

from __future__ import annotations

from dataclasses import replace

from ...errors import ScheduleError
from ...tir import expr as E
from ...tir.function import (
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    IterVar,
    PrimFunc,
    SBlock,
    SeqStmt,
    seq,
    walk_stmts,
)
from .loops import find_loop, fresh_name
from .region import accesses, block_reads, block_writes
from .storage import check_scope
from .tree import block_loops, blocks_in, find_path, kids, replace_at, subst_stmt, var_names

__all__ = ["buffer_name", "cache_read", "cache_write", "decompose_reduction", "find_block"]


def find_block(func: PrimFunc, name: str, what: str = "get_block") -> list:
    path = find_path(func.body, lambda s: isinstance(s, SBlock) and s.name == name)
    if path is None or path[-1] is func.body:
        names = [b.name for b in blocks_in(func.body)[1:]]
        raise ScheduleError(f"{what}: no block {name!r} in function {func.name!r}", key=name,
                            hint=f"blocks: {names}")
    return path


# ----------------------------------------------------------------------- root statements

def _root(func: PrimFunc) -> SBlock:
    if not isinstance(func.body, SBlock):
        raise ScheduleError(f"function {func.name!r} has no blocks to schedule",
                            hint="write its loops with `with T.block(...)`")
    return func.body


def _items(func: PrimFunc) -> list:
    body = _root(func).body
    return list(body.stmts) if isinstance(body, SeqStmt) else [body]


def _with_items(func: PrimFunc, items: list, allocs: tuple = ()) -> PrimFunc:
    root = _root(func)
    return replace(func, body=replace(root, body=seq(items),
                                      alloc_buffers=root.alloc_buffers + tuple(allocs)))


def _top(func: PrimFunc, node) -> int:
    for k, item in enumerate(_items(func)):
        if find_path(item, lambda s: s is node) is not None:
            return k
    raise ScheduleError("the block is not under the root block", hint="nested blocks are "
                        "not supported by this primitive")


def buffer_name(func: PrimFunc, base: str) -> str:
    taken = {b.name for b in func.buffers}
    for s in walk_stmts(func.body):
        if isinstance(s, SBlock):
            taken.update(b.name for b in s.alloc_buffers)
    return fresh_name(func, base, taken)


def _block_name(func: PrimFunc, base: str) -> str:
    return fresh_name(func, base, {b.name for b in blocks_in(func.body)})


def _copy_nest(func: PrimFunc, name: str, dst: Buffer, src: Buffer) -> For:
    """``for ax..: with T.block(name): dst[v..] = src[v..]`` over the whole buffer."""
    taken = var_names(func.body)
    loops = [E.Var(fresh_name(func, f"ax{k}", taken), "int64" if _i64(d) else "int32")
             for k, d in enumerate(dst.shape)]
    ivs = [IterVar(E.Var(fresh_name(func, f"v{k}", taken), v.dtype), E.IntImm(0, v.dtype), d,
                   "spatial", v) for k, (v, d) in enumerate(zip(loops, dst.shape))]
    index = tuple(iv.var for iv in ivs)
    stmt = SBlock(name, BufferStore(dst, BufferLoad(src, index), index), tuple(ivs))
    for v, d in reversed(list(zip(loops, dst.shape))):
        stmt = For(v, E.IntImm(0, v.dtype), d, "serial", stmt)
    return stmt


def _i64(dim) -> bool:
    return getattr(dim, "dtype", "int32") == "int64"


def _pick(buffers: list, index: int, block: SBlock, what: str) -> Buffer:
    if not 0 <= index < len(buffers):
        raise ScheduleError(f"{what}: block {block.name!r} has no buffer {index}",
                            key=block.name, hint=f"its buffers: {[b.name for b in buffers]}")
    return buffers[index]


def cache_read(func: PrimFunc, block_name: str, index: int, scope: str):
    """The block reads buffer ``index`` of its reads from a copy made just before its
    top-level statement; returns (func, copy block name)."""
    path = find_block(func, block_name, "cache_read")
    block = path[-1]
    buf = _pick(block_reads(block), index, block, "cache_read")
    scope = check_scope(scope, "cache_read")
    _single_writer(func, buf, "cache_read", block_name)
    if buf.name in {b.name for b in block_writes(block)}:
        raise ScheduleError(f"cache_read: block {block_name!r} also writes {buf.name!r}",
                            key=block_name, hint="use cache_write for that buffer")
    top = _top(func, block)
    if accesses(_items(func)[top], "write", buf.name):
        raise ScheduleError(f"cache_read: {buf.name!r} is written next to block "
                            f"{block_name!r}", key=block_name)
    cache = Buffer(buffer_name(func, f"{buf.name}_{scope}"), buf.shape, buf.dtype,
                   scope=scope)
    name = _block_name(func, f"{buf.name}_{scope}")
    nest = _copy_nest(func, name, cache, buf)
    new_block = _rename_buffer(block, buf, cache)
    func = replace(func, body=replace_at(path, new_block))
    items = _items(func)
    items.insert(top, nest)
    return _with_items(func, items, (cache,)), name


def cache_write(func: PrimFunc, block_name: str, index: int, scope: str):
    """The block writes buffer ``index`` of its writes into a cache, copied back right
    after its top-level statement; returns (func, copy block name)."""
    path = find_block(func, block_name, "cache_write")
    block = path[-1]
    buf = _pick(block_writes(block), index, block, "cache_write")
    scope = check_scope(scope, "cache_write")
    _single_writer(func, buf, "cache_write", block_name)
    top = _top(func, block)
    others = [b for b in blocks_in(_items(func)[top]) if b is not block and accesses(
        b, None, buf.name) and not blocks_in(b.body)[1:]]
    if others:
        raise ScheduleError(f"cache_write: block {others[0].name!r} also uses {buf.name!r} "
                            f"next to block {block_name!r}", key=block_name)
    cache = Buffer(buffer_name(func, f"{buf.name}_{scope}"), buf.shape, buf.dtype,
                   scope=scope)
    name = _block_name(func, f"{buf.name}_{scope}")
    func = replace(func, body=replace_at(path, _rename_buffer(block, buf, cache)))
    items = _items(func)
    items.insert(top + 1, _copy_nest(func, name, buf, cache))
    return _with_items(func, items, (cache,)), name


def _single_writer(func: PrimFunc, buf: Buffer, what: str, block_name: str) -> None:
    """TVM caches a buffer that one block produces (none, for an input)."""
    writers = [b.name for b in blocks_in(func.body)[1:]
               if any(isinstance(s, BufferStore) and s.buffer.name == buf.name
                      for s in walk_stmts(b.body)) and not blocks_in(b.body)[1:]]
    if len(writers) > 1:
        raise ScheduleError(f"{what}: {buf.name!r} has several producers {writers}",
                            key=block_name, hint="cache a buffer one block writes")


def _rename_buffer(block: SBlock, old: Buffer, new: Buffer) -> SBlock:
    from .tree import rewrite_stmt

    return rewrite_stmt(block, {}, {old.name: new})


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
