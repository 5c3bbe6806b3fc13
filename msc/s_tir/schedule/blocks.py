"""Block primitives on a PrimFunc: cache_read / cache_write, compute_at /
reverse_compute_at, decompose_reduction. Blocks are named (names are unique in a function,
as TVM requires); each primitive returns the new function (and the new block's name).

The root block's body is a sequence of top-level statements; caches are whole-buffer copy
nests placed next to the block's statement, and compute_at / reverse_compute_at move such a
single-block nest under a loop of another statement, shrunk to the region used there."""

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
from .region import accesses, block_reads, block_writes, bounds, loads, loop_ranges, union
from .storage import check_scope
from .tree import block_loops, blocks_in, find_path, kids, replace_at, subst_stmt, var_names

__all__ = ["buffer_name", "cache_read", "cache_write", "compute_at", "decompose_reduction",
           "find_block",
           "reverse_compute_at"]


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


# ----------------------------------------------------------------------- compute at

def _single_nest(func: PrimFunc, block_name: str, what: str):
    """(top index, block) of a block that is alone in its top-level loop nest, with spatial
    axes only, and that stores to one buffer at exactly its axes."""
    path = find_block(func, block_name, what)
    block = path[-1]
    top = _top(func, block)
    if len(blocks_in(_items(func)[top])) != 1 or len(path) < 2:
        raise ScheduleError(f"{what}: block {block_name!r} must be alone in its loop nest",
                            key=block_name)
    if any(iv.kind != "spatial" for iv in block.iter_vars) or block.init is not None:
        raise ScheduleError(f"{what}: block {block_name!r} has reduce axes", key=block_name,
                            hint="only spatial blocks (copies, elementwise) move here")
    stores = [s for s in walk_stmts(block.body) if isinstance(s, BufferStore)]
    axes = tuple(iv.var.name for iv in block.iter_vars)
    if not stores or any(tuple(getattr(i, "name", None) for i in s.indices) != axes
                         or s.buffer.name != stores[0].buffer.name for s in stores):
        raise ScheduleError(f"{what}: block {block_name!r} must store one buffer at exactly "
                            "its axes", key=block_name)
    return top, block, stores[0].buffer


def _check_target(func: PrimFunc, block_name: str, var: E.Var, what: str) -> None:
    """TVM's first two refusals: the loop encloses the block already, or (compute_at) the
    block writes a function output, which no consumer inside the function reads whole."""
    path = find_block(func, block_name, what)
    if any(isinstance(s, For) and s.var is var for s in path):
        raise ScheduleError(f"{what}: loop {var.name!r} is an ancestor of block "
                            f"{block_name!r}", key=block_name,
                            hint="pick a loop of another block's nest")
    params = {b.name for b in func.buffers}
    written = {b.name for b in block_writes(path[-1])} & params
    if what == "compute_at" and written:
        raise ScheduleError(f"compute_at: block {block_name!r} is an output block (it writes "
                            f"the function's buffer {min(written)!r})", key=block_name,
                            hint="move its consumers with reverse_compute_at instead")


def _raw_loads(stmt, name: str) -> list:
    """Loads of buffer ``name`` in ``stmt`` as written (indices in the block's axes)."""
    found = [ld for s in walk_stmts(stmt)
             for e in (getattr(s, "value", None), *getattr(s, "indices", ()))
             if isinstance(e, E.PrimExpr) for ld in loads(e)]
    return [ld for ld in found if ld.buffer.name == name]


def _inner_ranges(loop: For) -> dict:
    return loop_ranges([s for s in walk_stmts(loop.body) if isinstance(s, For)])


def _moved_nest(func: PrimFunc, block: SBlock, region: list, outer: list,
                preserve_unit_loops: bool = False) -> object:
    """The block over ``region`` ((lo, hi) per axis): fresh loops, bindings lo + ax, and a
    ``T.where`` for dims not provably inside the buffer; loops of extent 1 are kept only with
    ``preserve_unit_loops``."""
    taken = var_names(func.body)
    ranges, conds, loops, ivs = loop_ranges(outer), [], [], []
    for iv, (lo, hi) in zip(block.iter_vars, region):
        extent = E.sub(E.add(hi, 1), lo)
        ax = E.Var(fresh_name(func, f"ax{len(loops)}", taken), iv.var.dtype)
        loops.append((ax, extent))
        # TVM's order: lo + ax (E.add would sort the terms)
        binding = ax if E.as_int(lo) == 0 else E.BinaryOp("Add", lo, ax)
        ivs.append(replace(iv, binding=binding))
        glo, ghi = bounds(binding, {**ranges, ax.name: (E.IntImm(0, ax.dtype),
                                                         E.sub(extent, 1))})
        if not (E.as_int(glo) is not None and E.as_int(glo) >= E.as_int(iv.min) and
                E.as_int(ghi) is not None and E.as_int(ghi) < E.as_int(E.add(iv.min,
                                                                             iv.extent))):
            conds.append(E.binary("LT", binding, E.add(iv.min, iv.extent)))
    pred = block.predicate
    for c in conds:
        pred = c if pred is None else E.binary("And", pred, c)
    stmt = replace(block, iter_vars=tuple(ivs), predicate=pred)
    for ax, extent in reversed(loops):
        if E.as_int(extent) == 1 and not preserve_unit_loops:
            stmt = subst_stmt(stmt, {ax.name: E.IntImm(0, ax.dtype)})
        else:
            stmt = For(ax, E.IntImm(0, ax.dtype), extent, "serial", stmt)
    return stmt


def _region(loop: For, kind: str, buf: Buffer, what: str) -> list:
    found = accesses(loop.body, kind, buf.name)
    if not found:
        raise ScheduleError(f"{what}: nothing under loop {loop.var.name!r} "
                            f"{'reads' if kind == 'read' else 'writes'} {buf.name!r}",
                            key=loop.var.name)
    inner = _inner_ranges(loop)
    return union([[bounds(i, inner) for i in idx] for _, _, idx in found])


def _check_between(func, lo: int, hi: int, names: set, what: str) -> None:
    for item in _items(func)[lo:hi]:
        touched = {a[1].name for a in accesses(item)} & names
        if touched:
            raise ScheduleError(f"{what}: buffer(s) {sorted(touched)} are used between the "
                                "two loop nests", hint="move the statements apart first")


def compute_at(func: PrimFunc, block_name: str, var: E.Var,
               preserve_unit_loops: bool = False) -> PrimFunc:
    """Move a producer block under ``loop`` of its consumer, computing only the region the
    loop's body reads."""
    _check_target(func, block_name, var, "compute_at")
    top, block, out = _single_nest(func, block_name, "compute_at")
    lpath = find_loop(func, var, "compute_at")
    loop, at = lpath[-1], _top(func, lpath[-1])
    if at <= top:
        raise ScheduleError(f"compute_at: loop {var.name!r} is not after block "
                            f"{block_name!r}", key=block_name)
    readers = [k for k, item in enumerate(_items(func)) if k != top
               and accesses(item, "read", out.name)]
    inside = len(accesses(loop.body, "read", out.name))
    if readers != [at] or inside != len(accesses(_items(func)[at], "read", out.name)):
        raise ScheduleError(f"compute_at requires all the consumer blocks of {block_name!r} "
                            f"to be under loop {var.name!r}: {out.name!r} is read outside it",
                            key=block_name, hint="pick a loop that encloses every reader")
    reads = {a[1].name for a in accesses(block, "read")}
    _check_between(func, top + 1, at, reads | {out.name}, "compute_at")
    if {a[1].name for a in accesses(_items(func)[at], "write")} & reads:
        raise ScheduleError(f"compute_at: the consumer writes what {block_name!r} reads")
    nest = _moved_nest(func, block, _region(loop, "read", out, "compute_at"),
                       [s for s in lpath if isinstance(s, For)], preserve_unit_loops)
    func = replace(func, body=replace_at(lpath, replace(loop, body=seq([nest, loop.body]))))
    items = _items(func)
    del items[top]
    return _with_items(func, items)


def reverse_compute_at(func: PrimFunc, block_name: str, var: E.Var,
                       preserve_unit_loops: bool = False) -> PrimFunc:
    """Move a consumer block under ``loop`` of its producer, right after the loop's body,
    computing the region the body writes."""
    _check_target(func, block_name, var, "reverse_compute_at")
    top, block, _ = _single_nest(func, block_name, "reverse_compute_at")
    lpath = find_loop(func, var, "reverse_compute_at")
    loop, at = lpath[-1], _top(func, lpath[-1])
    if at >= top:
        raise ScheduleError(f"reverse_compute_at: loop {var.name!r} is not before block "
                            f"{block_name!r}", key=block_name)
    written = {a[1].name for a in accesses(loop.body, "write")}
    src = [b for b in block_reads(block) if b.name in written]
    if not src:
        raise ScheduleError(f"reverse_compute_at: block {block_name!r} reads nothing written "
                            f"under loop {var.name!r}", key=block_name)
    src = src[0]
    if len(accesses(_items(func)[at], "write", src.name)) != len(accesses(loop.body, "write",
                                                                           src.name)):
        raise ScheduleError(f"reverse_compute_at: {src.name!r} is also written outside loop "
                            f"{var.name!r}", key=block_name)
    axes = tuple(iv.var.name for iv in block.iter_vars)
    if any(tuple(getattr(i, "name", None) for i in ld.indices) != axes
           for ld in _raw_loads(block.body, src.name)):
        raise ScheduleError(f"reverse_compute_at: block {block_name!r} must read "
                            f"{src.name!r} at exactly its axes", key=block_name)
    _check_between(func, at + 1, top, {a[1].name for a in accesses(block)}, "reverse_compute_at")
    nest = _moved_nest(func, block, _region(loop, "write", src, "reverse_compute_at"),
                       [s for s in lpath if isinstance(s, For)], preserve_unit_loops)
    func = replace(func, body=replace_at(lpath, replace(loop, body=seq([loop.body, nest]))))
    items = _items(func)
    del items[top]
    return _with_items(func, items)


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
    init = SBlock(_block_name(func, f"{block.name}_init"), block.init, tuple(spatial),
                  predicate=block.predicate)
    stmt = subst_stmt(init, names)
    for lp in reversed(keep):
        stmt = For(names[lp.var.name], lp.min, lp.extent, lp.kind, stmt)
    return stmt
