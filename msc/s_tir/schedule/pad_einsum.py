"""``pad_einsum`` (TVM's ``PadEinsum``, ``pad_einsum.cc``): round the iteration domain of an
Einsum block up to multiples of ``padding`` and let it work on padded copies of its buffers.

    for i, j, k in T.grid(128, n, 128): C[i, j] += A[i, k] * B[j, k]
        -- sch.pad_einsum(C, [32, 32, 32]) -->
    B_pad[v0, v1] = T.if_then_else(v0 < n, B[v0, v1], T.float32(0))    (before the block)
    for i, j, k in T.grid(128, (n + 31) // 32 * 32, 128): C_pad[i, j] += A[i, k] * B_pad[j, k]
    C[v0, v1] = C_pad[v0, v1]                                           (after the block)

An Einsum block reads and writes each buffer once, at indices that are its iter vars (or
constants). Only buffers indexed by a padded iter var get a padded copy; reads are zero-filled
beyond the old extent, writes are copied back over the old shape. Refused as TVM refuses: a
padding that is not one positive int per iter var (``InvalidPaddingError``), a block that is
not an Einsum (``NonEinsumError``), a scope that is not a stage pipeline.
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
from .arith import map_children
from .blocks import buffer_name, find_block
from .cover import prove_eq
from .loops import fresh_name
from .refusals import check_stage_pipeline
from .region import accesses, block_reads, block_writes
from .tree import blocks_in, find_path, kids, rebuild, swap

__all__ = ["InvalidPaddingError", "NonEinsumError", "pad_einsum"]


class InvalidPaddingError(ScheduleError):
    """TVM's ``InvalidPaddingError``."""


class NonEinsumError(ScheduleError):
    """TVM's ``NonEinsumError``."""


def pad_einsum(func: PrimFunc, block_name: str, padding: list) -> PrimFunc:
    path = find_block(func, block_name, "pad_einsum")
    block = path[-1]
    check_stage_pipeline(func, path, "pad_einsum")
    if len(padding) != len(block.iter_vars) or any(int(p) <= 0 for p in padding):
        raise InvalidPaddingError(
            f"pad_einsum: The padding for the block {block_name!r} are invalid. It should be a "
            f"list of {len(block.iter_vars)} positive integers. Got {list(padding)}",
            key=block_name)
    reads, writes = _einsum(block)
    padded_iters, padded_loops = _padded_extents(block, padding)
    scope = next(s for s in reversed(path[:-1]) if isinstance(s, SBlock))
    items = list(scope.body.stmts) if isinstance(scope.body, SeqStmt) else [scope.body]
    pos = next(k for k, item in enumerate(items)
               if find_path(item, lambda s: s is block) is not None)
    copies, before, after = {}, [], []
    for (buf, idx), is_read in [(r, True) for r in reads] + [(w, False) for w in writes]:
        if not any(isinstance(i, E.Var) and i.name in padded_iters for i in idx):
            continue
        new = Buffer(buffer_name(func, f"{buf.name}_pad"), _padded_shape(buf, idx, padded_iters),
                     buf.dtype, scope=buf.scope)
        copies[buf.name] = new
        (before if is_read else after).append(_copy(func, buf, new, is_read))
    item = _replace(items[pos], copies, padded_iters, padded_loops)
    new_items = items[:pos] + before + [item] + after + items[pos + 1:]
    new_scope = replace(scope, body=seq(new_items),
                        alloc_buffers=scope.alloc_buffers + tuple(copies.values()))
    return replace(func, body=swap(func.body, scope, new_scope))


def _einsum(block: SBlock) -> tuple:
    """(reads, writes) as (buffer, indices); each buffer once, indices iter vars or ints."""
    own = {iv.var.name for iv in block.iter_vars}
    used: set = set()
    out = []
    for kind, buffers in (("read", block_reads(block)), ("write", block_writes(block))):
        found = []
        for buf in buffers:
            idx = {tuple(E.to_str(i) for i in a[2]): a[2] for part in _parts(block)
                   for a in accesses(part, kind, buf.name)}
            if buf.name in used or len(idx) != 1:
                raise _non_einsum(block)
            (indices,) = idx.values()
            if not all((isinstance(i, E.Var) and i.name in own) or E.as_int(i) is not None
                       for i in indices):
                raise _non_einsum(block)
            used.add(buf.name)
            found.append((buf, tuple(indices)))
        out.append(found)
    return tuple(out)


def _parts(block: SBlock) -> list:
    return [block.body] + ([block.init] if block.init is not None else [])


def _non_einsum(block: SBlock) -> NonEinsumError:
    return NonEinsumError(f"pad_einsum: The block {block.name!r} not a computation of Einsum "
                          "pattern.", key=block.name)


def _padded_extents(block: SBlock, padding: list) -> tuple:
    """(iter var name -> padded extent, loop var name -> padded extent) where they grow."""
    iters, loops = {}, {}
    for iv, pad in zip(block.iter_vars, padding):
        dtype = getattr(iv.extent, "dtype", "int32")
        size = E.IntImm(int(pad), dtype)
        new = E.mul(E.ceildiv(iv.extent, size), size)
        if prove_eq(new, iv.extent, {}):
            continue
        iters[iv.var.name] = new
        if isinstance(iv.binding, E.Var):
            iters[iv.binding.name] = new
            loops[iv.binding.name] = new
    return iters, loops


def _padded_shape(buf: Buffer, idx: tuple, padded: dict) -> tuple:
    shape = []
    for i, dim in zip(idx, buf.shape):
        if E.as_int(i) is not None:
            shape.append(E.IntImm(1, _dtype(dim)))
        else:
            shape.append(padded.get(i.name, dim))
    return tuple(shape)


def _dtype(e) -> str:
    return getattr(e, "dtype", "int32")


def _copy(func: PrimFunc, buf: Buffer, new: Buffer, is_read: bool):
    """TVM's ``MakeCopyBlock``: loops ``i..`` over the padded (read) or old (write) shape."""
    shape = new.shape if is_read else buf.shape
    loops = [E.Var(f"i{k}", _dtype(d)) for k, d in enumerate(shape)]
    ivs = [IterVar(E.Var(f"v{k}", _dtype(d)), E.IntImm(0, _dtype(d)), d, "spatial", lp)
           for k, (d, lp) in enumerate(zip(shape, loops))]
    idx = tuple(iv.var for iv in ivs)
    if is_read:
        grown = [E.binary("LT", v, old) for v, old, size in zip(idx, buf.shape, new.shape)
                 if not prove_eq(old, size, {})]
        value = BufferLoad(buf, idx)
        if grown:
            cond = grown[0]
            for extra in grown[1:]:
                cond = E.BinaryOp("And", cond, extra, "bool")
            zero = E.FloatImm(0.0, buf.dtype) if buf.dtype.startswith(("float", "bfloat")) \
                else E.IntImm(0, buf.dtype)
            value = E.PrimCall("if_then_else", [cond, value, zero], buf.dtype)
        body, src, dst = BufferStore(new, value, idx), buf, new
    else:
        body, src, dst = BufferStore(buf, BufferLoad(new, idx), idx), new, buf
    point = tuple((v, None) for v in idx)
    stmt = SBlock(fresh_name(func, new.name, {b.name for b in blocks_in(func.body)}), body,
                  tuple(ivs),
                  reads=(BufferRegion(src, point),), writes=(BufferRegion(dst, point),))
    for lp, d in reversed(list(zip(loops, shape))):
        stmt = For(lp, E.IntImm(0, _dtype(d)), d, "serial", stmt)
    return stmt


def _replace(s, copies: dict, iters: dict, loops: dict):
    """TVM's ``PadEinsumBufferReplacer``: padded iter var domains and loop extents, the padded
    buffers in every access and stated region."""
    def expr(e):
        if isinstance(e, BufferLoad) and e.buffer.name in copies:
            return BufferLoad(copies[e.buffer.name], tuple(expr(i) for i in e.indices))
        return map_children(e, expr)

    def regions(rs):
        if rs is None:
            return None
        return tuple(BufferRegion(copies[r.buffer.name], r.region) if r.buffer.name in copies
                     else r for r in rs)

    def stmt(node):
        if isinstance(node, BufferStore):
            buf = copies.get(node.buffer.name, node.buffer)
            return BufferStore(buf, expr(node.value), tuple(expr(i) for i in node.indices))
        if isinstance(node, For) and node.var.name in loops:
            node = replace(node, extent=loops[node.var.name])
        if isinstance(node, SBlock):
            node = replace(node, iter_vars=tuple(
                replace(iv, extent=iters[iv.var.name]) if iv.var.name in iters else iv
                for iv in node.iter_vars), reads=regions(node.reads),
                writes=regions(node.writes),
                init=stmt(node.init) if node.init is not None else None)
        for field in ("value", "cond"):
            if isinstance(getattr(node, field, None), E.PrimExpr):
                node = replace(node, **{field: expr(getattr(node, field))})
        return rebuild(node, [stmt(c) for c in kids(node)]) if kids(node) else node

    return stmt(s)
