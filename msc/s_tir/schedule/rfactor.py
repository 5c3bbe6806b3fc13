"""rfactor: a reduction split into partial results along one of its loops (TVM's
``sch.rfactor(loop, factor_axis)``).

For ``C[i, j] += A[i, k] * B[j, k]`` with ``k = ko * 4 + ki`` and ``rfactor(ki, 0)``:

* the block becomes ``<name>_rf``, writing ``C_rf[vki, i, j]``: the factored loop is a new
  spatial axis (first), the other reduce loops become reduce axes of their own, and the old
  reduce axis is replaced by its binding over them;
* a write-back block (the old name) follows in a nest of the spatial loops and the factored
  loop, reducing ``C_rf`` over the factored axis into ``C``.

Partial sums along ``ki`` are independent, so the factored loop can then run in parallel or
vectorized. The reducer is recognized from the update: ``+``, ``*``, ``min`` or ``max`` of the
block's own element and one more value, with an init storing to the same element. Refused as
TVM refuses: a block without init or with a different pattern, a loop that is not serial, that
binds a spatial axis or no reduce axis, that has more than the block under it, a factor axis
out of range, a block whose reduce axes are not all bound by loops under its nest.
"""

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
)
from .blocks import buffer_name
from .loops import find_loop, fresh_name
from .refusals import check_stage_pipeline
from .region import loads
from .tree import block_loops, blocks_in, find_path, kids, replace_at, rewrite_expr, var_names

__all__ = ["rfactor"]

_REDUCERS = {"Add", "Mul", "Min", "Max"}


def _fail(message: str, key: str, hint: str | None = None):
    return ScheduleError(f"rfactor: {message}", key=key, hint=hint)


def _reducer(block: SBlock) -> tuple[BufferStore, str, E.PrimExpr]:
    """``(update store, op, the value combined with the element)`` of a reduction block."""
    if block.init is None or not any(iv.kind == "reduce" for iv in block.iter_vars):
        raise _fail(f"block {block.name!r} is not a reduction block (no init or no reduce "
                    "axis)", block.name)
    store, init = block.body, block.init
    if not isinstance(store, BufferStore) or not isinstance(init, BufferStore):
        raise _fail(f"the init and the update of block {block.name!r} must each be one "
                    "BufferStore", block.name)
    if init.buffer.name != store.buffer.name or init.indices != store.indices:
        raise _fail(f"the init and the update of block {block.name!r} store different "
                    "elements", block.name)
    reduce_vars = {iv.var.name for iv in block.iter_vars if iv.kind == "reduce"}
    if any(v.name in reduce_vars for i in store.indices for v in E.free_vars(i)):
        raise _fail(f"block {block.name!r} stores at a reduce axis: not a reduction",
                    block.name)
    value = store.value
    own = BufferLoad(store.buffer, store.indices)
    if isinstance(value, E.BinaryOp) and value.op in _REDUCERS:
        for a, b in ((value.a, value.b), (value.b, value.a)):
            if a == own and not _reads(b, store.buffer.name):
                if not _is_identity(value.op, init.value):
                    raise _fail(f"the init of block {block.name!r} is not the identity of "
                                f"its reduction ({value.op})", block.name)
                return store, value.op, b
    raise _fail(f"the update of block {block.name!r} is not a commutative reduction "
                "(+, *, min, max) of its element and one more value", block.name,
                "write it as C[i] = C[i] + x")


def _is_identity(op: str, value) -> bool:
    """``value`` is the identity of the reducer: 0 for +, 1 for *, +-inf (or the dtype's
    extreme) for min / max."""
    if not isinstance(value, (E.IntImm, E.FloatImm)):
        return False
    v = value.value
    if op in ("Add", "Mul"):
        return v == (0 if op == "Add" else 1)
    import numpy as np

    info = np.finfo(value.dtype) if isinstance(value, E.FloatImm) else np.iinfo(value.dtype)
    high = v == float("inf") or v >= info.max
    low = v == float("-inf") or v <= info.min
    return high if op == "Min" else low


def _quasi_affine(e) -> bool:
    """Sums of loop vars times constants, and their ``//`` / ``%`` by constants."""
    if isinstance(e, (E.Var, E.IntImm)):
        return True
    if isinstance(e, E.BinaryOp):
        if e.op in ("Add", "Sub"):
            return _quasi_affine(e.a) and _quasi_affine(e.b)
        if e.op == "Mul":
            return (isinstance(e.a, E.IntImm) and _quasi_affine(e.b)) or \
                (isinstance(e.b, E.IntImm) and _quasi_affine(e.a))
        if e.op in ("FloorDiv", "FloorMod"):
            return isinstance(e.b, E.IntImm) and e.b.value > 0 and _quasi_affine(e.a)
    return False


def _reads(e, name: str) -> bool:
    return any(ld.buffer.name == name for ld in loads(e))


def _plain(e, names: dict):
    """``e`` with vars replaced by name, its terms kept in their order (TVM prints the
    binding it substituted as written; msc's simplifying rewrite would reorder it)."""
    if isinstance(e, E.Var):
        return names.get(e.name, e)
    if isinstance(e, E.BinaryOp):
        return E.BinaryOp(e.op, _plain(e.a, names), _plain(e.b, names))
    return rewrite_expr(e, names)


def _combine(op: str, a, b):
    return E.BinaryOp(op, a, b)


def rfactor(func: PrimFunc, var: E.Var, factor_axis: int) -> tuple[PrimFunc, str]:
    """See the module doc; returns (func, the rf block's name)."""
    lpath = find_loop(func, var, "rfactor")
    loop = lpath[-1]
    inner = blocks_in(loop.body, nested=False)
    if len(inner) != 1 or not _single_chain(loop):
        raise _fail(f"loop {var.name!r} must hold exactly one block and nothing else",
                    var.name, "split the loop's other statements out first")
    block = inner[0]
    if loop.kind != "serial" or loop.annotations or loop.thread is not None:
        raise _fail(f"loop {var.name!r} is {loop.kind}: only a plain serial loop factors",
                    var.name)
    path = find_path(func.body, lambda s: s is block)
    check_stage_pipeline(func, path, "rfactor")
    loops = block_loops(path)
    store, op, rhs = _reducer(block)
    if block.predicate is not None:
        raise _fail(f"block {block.name!r} has a predicate (T.where): its partial results "
                    "would not cover the factored loop", block.name)
    bad = [iv.var.name for iv in block.iter_vars if not _quasi_affine(iv.binding)]
    if bad:
        raise _fail(f"the bindings of {bad} in block {block.name!r} are not quasi-affine in "
                    "the loops", block.name)
    spatial = [iv for iv in block.iter_vars if iv.kind == "spatial"]
    reduce_ = [iv for iv in block.iter_vars if iv.kind == "reduce"]
    if any(iv.kind not in ("spatial", "reduce") for iv in block.iter_vars):
        raise _fail(f"block {block.name!r} has axes that are neither spatial nor reduce",
                    block.name)
    _check_loops(block, loops, spatial, reduce_, var)
    ndim = len(store.buffer.shape)
    if not -(ndim + 1) <= factor_axis <= ndim:
        raise _fail(f"factor_axis {factor_axis} is out of range for a {ndim}-d buffer",
                    block.name, f"use {-(ndim + 1)} .. {ndim}")
    axis = factor_axis % (ndim + 1)
    reduce_loops = {v.name for iv in reduce_ for v in E.free_vars(iv.binding)}
    dropped = [lp for lp in loops if lp.var.name in reduce_loops and lp is not loop]
    for lp in dropped:
        if not _single_chain(lp):
            raise _fail(f"reduce loop {lp.var.name!r} holds more than block {block.name!r}",
                        lp.var.name, "rfactor removes it from the write-back nest")
    taken = var_names(func.body)
    rf_buf = _rf_buffer(func, store.buffer, loop, axis)
    renamed = {lp.var.name: E.Var(fresh_name(func, lp.var.name, taken), lp.var.dtype)
               for lp in loops}
    rf_block, rf_name = _rf_block(func, block, store, op, rhs, loops, spatial, reduce_, loop,
                                  rf_buf, axis, taken, renamed)
    rf_nest = rf_block
    for lp in reversed(loops):
        rf_nest = replace(lp, var=renamed[lp.var.name], body=rf_nest)
    # the partial results are computed in a nest of their own, before the block's nest; the
    # block itself becomes the write-back, without the other reduce loops
    top = loops[0] if loops else block
    body = _insert_before(find_path(func.body, lambda s: s is top), rf_nest)
    path = find_path(body, lambda s: s is block)
    write_back = _write_back(func, block, store, op, spatial, loop, rf_buf, axis, taken)
    body = _without_loops(path, {id(lp) for lp in dropped}, write_back)
    body = _alloc(body, rf_buf)
    return replace(func, body=body), rf_name


def _single_chain(loop: For) -> bool:
    """Nothing but loops down to the one block (TVM: the loop's subtree is that block)."""
    node = loop.body
    while isinstance(node, For):
        node = node.body
    return isinstance(node, SBlock)


def _check_loops(block: SBlock, loops: list, spatial: list, reduce_: list, var) -> None:
    spatial_vars = {v.name for iv in spatial for v in E.free_vars(iv.binding)}
    reduce_vars = {v.name for iv in reduce_ for v in E.free_vars(iv.binding)}
    if var.name in spatial_vars:
        raise _fail(f"loop {var.name!r} binds a spatial axis of block {block.name!r}",
                    var.name, "factor a loop over the reduction only")
    if var.name not in reduce_vars:
        raise _fail(f"loop {var.name!r} binds no reduce axis of block {block.name!r}",
                    var.name)
    loop_names = {lp.var.name for lp in loops}
    stray = reduce_vars - loop_names
    if stray or reduce_vars & spatial_vars:
        raise _fail(f"the reduce axes of block {block.name!r} are bound by {sorted(stray)} "
                    "outside its loops, or share loops with spatial axes", block.name)


def _rf_buffer(func: PrimFunc, buf: Buffer, loop: For, axis: int) -> Buffer:
    shape = list(buf.shape)
    shape.insert(axis, loop.extent)
    return Buffer(buffer_name(func, f"{buf.name}_rf"), tuple(shape), buf.dtype)


def _rf_block(func, block, store, op, rhs, loops, spatial, reduce_, loop, rf_buf, axis,
              taken, renamed):
    """The block over ``C_rf``: the factored loop's axis, the spatial axes, a reduce axis per
    other reduce loop; the old reduce axes replaced by their bindings."""
    reduce_loops = {v.name for iv in reduce_ for v in E.free_vars(iv.binding)}
    new_ivs, loop_to_iv = [], {}
    rf_var = E.Var(fresh_name(func, f"v{loop.var.name}", taken), loop.var.dtype)
    new_ivs.append(IterVar(rf_var, E.IntImm(0, loop.extent.dtype), loop.extent, "spatial",
                           renamed[loop.var.name]))
    loop_to_iv[loop.var.name] = rf_var
    new_ivs += [replace(iv, binding=_plain(iv.binding, renamed)) for iv in spatial]
    for lp in loops:
        if lp.var.name in reduce_loops and lp is not loop:
            v = E.Var(fresh_name(func, f"v{lp.var.name}", taken), lp.var.dtype)
            new_ivs.append(IterVar(v, E.IntImm(0, lp.extent.dtype), lp.extent, "reduce",
                                   renamed[lp.var.name]))
            loop_to_iv[lp.var.name] = v
    subst = {iv.var.name: _plain(iv.binding, loop_to_iv) for iv in reduce_}
    index = list(store.indices)
    index.insert(axis, rf_var)
    own = BufferLoad(rf_buf, tuple(index))
    part = rewrite_expr(rhs, subst)
    name = fresh_name(func, f"{block.name}_rf", {b.name for b in blocks_in(func.body)})
    pred = _plain(block.predicate, renamed) if block.predicate is not None else None
    if len(loop_to_iv) == 1:  # no reduce axis left: each partial is one value, no init
        init, body = None, BufferStore(rf_buf, part, tuple(index))
    else:
        init = BufferStore(rf_buf, block.init.value, tuple(index))
        body = BufferStore(rf_buf, _combine(op, own, part), tuple(index))
    new = replace(block, name=name, iter_vars=tuple(new_ivs), reads=None, writes=None,
                  init=init, body=body, predicate=pred)
    return new, name


def _write_back(func, block, store, op, spatial, loop, rf_buf, axis, taken):
    """``C[s] = C[s] op C_rf[.., r, ..]``: the block's spatial axes as they were, and a
    reduce axis over the factored loop."""
    rf_iv = IterVar(E.Var(fresh_name(func, f"v{loop.var.name}", taken), loop.var.dtype),
                    E.IntImm(0, loop.extent.dtype), loop.extent, "reduce", loop.var)
    # its own names for the spatial axes (TVM's vi_1): the rf block keeps vi
    names = {iv.var.name: E.Var(fresh_name(func, iv.var.name, taken), iv.var.dtype)
             for iv in spatial}
    ivs = [replace(iv, var=names[iv.var.name]) for iv in spatial]
    target = tuple(rewrite_expr(i, names) for i in store.indices)
    index = list(target)
    index.insert(axis, rf_iv.var)
    own = BufferLoad(store.buffer, target)
    body = BufferStore(store.buffer, _combine(op, own, BufferLoad(rf_buf, tuple(index))),
                       target)
    return replace(block, iter_vars=(rf_iv, *ivs), reads=None, writes=None,
                   init=BufferStore(store.buffer, block.init.value, target), body=body,
                   predicate=None)


def _without_loops(path: list, dropped: set, block: SBlock):
    """The root of ``path`` (which ends at the old block) with the block replaced and the
    loops in ``dropped`` (a chain down to it) spliced out."""
    first = next((k for k, node in enumerate(path) if id(node) in dropped), None)
    if first is None:
        return replace_at(path, block)
    chain = block
    for node in reversed(path[first:-1]):
        if id(node) not in dropped:
            chain = replace(node, body=chain)
    return replace_at(path[:first + 1], chain)


def _insert_before(path: list, stmt):
    """The root of ``path`` with ``stmt`` placed right before the path's last node."""
    node, parent = path[-1], path[-2]
    if isinstance(parent, SeqStmt):
        items = []
        for k in kids(parent):
            items += [stmt, k] if k is node else [k]
        return replace_at(path[:-1], seq(items))
    return replace_at(path, SeqStmt((stmt, node)))


def _alloc(body, buf: Buffer):
    """``buf`` allocated in the root block."""
    if not isinstance(body, SBlock):
        raise ScheduleError("rfactor: the function has no root block to allocate in")
    return replace(body, alloc_buffers=body.alloc_buffers + (buf,))
