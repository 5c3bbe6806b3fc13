"""Blocks to plain loops, before code generation: what ``codegen`` compiles.

An s_tir block becomes lets for its iter vars, its allocations, then its init (run when every
reduce iter var is at its min) and body. A reduction block that a perfect loop nest encloses is
lowered the way a scheduler would (TVM's ``decompose_reduction`` plus a loop reorder):

- the init is hoisted out of the reduce loops, so the hot loop has no branch;
- the innermost loop is whichever of the last spatial loop and the last reduce loop gives the
  contiguous accesses: ``sum(axis=1)`` of NCHW data and ``max_pool2d`` vectorize over the
  output width, ``softmax`` over its last axis keeps the reduce loop innermost, a matmul
  becomes the i-k-j loop::

    for i, j, k: C[i, j] += A[i, k] * B[k, j]    ->    for i: (for j: C[i, j] = 0)
                                                       for k: for j: C[i, j] += A[i, k] * B[k, j]
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from ...tir import expr as E
from ...tir.function import (
    AllocBuffer,
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    IfThenElse,
    LetStmt,
    SBlock,
    SeqStmt,
    Stmt,
    While,
    expr_children,
    seq,
)

__all__ = ["BufferView", "RegionView", "lower_blocks"]

# A reduce loop this short (a pooling window, a 3x3 kernel) is not worth vectorizing.
_SHORT_REDUCE = 16
# Reduce loops with at most this many iterations in all are unrolled inside the inner loop.
_UNROLL_WINDOW = 32
# T.unroll loops up to this many iterations are unrolled explicitly (longer ones stay loops).
_UNROLL_STEPS = 64


def lower_blocks(stmt: Stmt) -> Stmt:
    """``stmt`` with every SBlock replaced by plain statements."""
    handler = _LOWER.get(type(stmt))
    return handler(stmt) if handler else stmt


def _for(s: For) -> Stmt:
    if s.kind == "unroll" and isinstance(s.extent, E.IntImm) and \
            isinstance(s.min, E.IntImm) and 1 <= s.extent.value <= _UNROLL_STEPS:
        body = lower_blocks(s.body)  # T.unroll (a schedule's choice): one copy per value
        return seq([SeqStmt((LetStmt(s.var, E.IntImm(s.min.value + v, s.var.dtype)), body))
                    for v in range(s.extent.value)])
    nest = _reduction_nest(s)
    if nest is None:
        nest = _fused_nest(s)
    return nest if nest is not None else replace(s, body=lower_blocks(s.body))


def _if(s: IfThenElse) -> Stmt:
    other = lower_blocks(s.else_case) if s.else_case is not None else None
    return IfThenElse(s.cond, lower_blocks(s.then_case), other)


def _block(b: SBlock) -> Stmt:
    stmts = [LetStmt(iv.var, iv.binding) for iv in b.iter_vars]
    stmts += [AllocBuffer(buf) for buf in b.alloc_buffers]
    stmts += [RegionView(view, region.buffer, region.region) for view, region in b.match_buffers]
    inner = []
    if b.init is not None:
        conds = [E.BinaryOp("EQ", iv.var, iv.min) for iv in b.iter_vars if iv.kind == "reduce"]
        init = lower_blocks(b.init)
        inner.append(IfThenElse(_all(conds), init) if conds else init)
    inner.append(lower_blocks(b.body))
    body = seq(inner)
    if b.predicate is not None:
        body = IfThenElse(b.predicate, body)
    return seq(stmts + [body])


def _all(conds: list) -> E.PrimExpr:
    result = conds[0]
    for c in conds[1:]:
        result = E.BinaryOp("And", result, c)
    return result


_LOWER = {
    For: _for,
    SeqStmt: lambda s: SeqStmt(tuple(lower_blocks(c) for c in s.stmts)),
    IfThenElse: _if,
    While: lambda s: While(s.cond, lower_blocks(s.body)),
    SBlock: _block,
}


# ------------------------------------------------------------------------- reduction nests

def _chain(top: For):
    loops, s = [top], top.body
    while isinstance(s, For):
        loops.append(s)
        s = s.body
    return loops, s


def _names(e: E.PrimExpr) -> set:
    return {v.name for v in E.free_vars(e)}


def _reduction_nest(top: For) -> Stmt | None:
    """The decomposed, reordered nest of a reduction block, or None if it does not apply."""
    loops, block = _chain(top)
    if not (isinstance(block, SBlock) and block.init is not None and block.predicate is None
            and not block.alloc_buffers):
        return None
    split = _split_loops(loops, block)
    if split is None:
        return None
    spatial, reduce = split
    inner = _pick_inner(spatial, reduce, block)
    mins = {lp.var.name: lp.min for lp in reduce}
    init_lets = [LetStmt(iv.var, iv.min if iv.kind == "reduce" else E.substitute(iv.binding, mins))
                 for iv in block.iter_vars]
    lets = [LetStmt(iv.var, iv.binding) for iv in block.iter_vars]
    init = seq(init_lets + [lower_blocks(block.init)])
    body = seq(lets + [lower_blocks(block.body)])
    window = _unrolled(reduce, body) if inner is not None else None
    if window is not None:  # a small window: accumulate in registers, vectorize over inner
        return _wrap(spatial, seq([init, window]))
    if inner is not None:
        init, body = _wrap([inner], init), _wrap([inner], body)
    outer = [lp for lp in spatial if lp is not inner]
    return _wrap(outer, seq([init, _wrap(reduce, body)]))


def _unrolled(reduce: list, body: Stmt) -> Stmt | None:
    """The reduce loops fully unrolled around ``body`` when their trip count is a small
    constant (each copy binds the loop vars to constants), else None."""
    if not all(isinstance(lp.min, E.IntImm) and isinstance(lp.extent, E.IntImm) for lp in reduce):
        return None
    total = 1
    for lp in reduce:
        total *= lp.extent.value
    if total > _UNROLL_WINDOW:
        return None
    copies = []
    for values in itertools.product(*(range(lp.extent.value) for lp in reduce)):
        lets = [LetStmt(lp.var, E.IntImm(lp.min.value + v, lp.var.dtype))
                for lp, v in zip(reduce, values)]
        copies.append(SeqStmt((*lets, body)))
    return seq(copies)


def _split_loops(loops: list, block: SBlock):
    """(spatial loops, reduce loops) when the nest may be reordered, else None."""
    names = {lp.var.name for lp in loops}
    red, spat = set(), set()
    for iv in block.iter_vars:
        used = _names(iv.binding)
        if iv.kind == "reduce":
            red |= used
        elif iv.kind == "spatial":
            spat |= used
        else:
            return None
    if red & spat or not red <= names:
        return None
    if any((_names(lp.min) | _names(lp.extent)) & names for lp in loops):
        return None  # a loop range depends on another loop of the nest
    mins = {lp.var.name: lp.min for lp in loops if lp.var.name in red}
    for iv in block.iter_vars:  # at the reduce loops' first iteration, init must run
        if iv.kind == "reduce" and E.sub(E.substitute(iv.binding, mins), iv.min) != 0:
            return None
    return ([lp for lp in loops if lp.var.name not in red],
            [lp for lp in loops if lp.var.name in red])


def _wrap(loops: list, body: Stmt) -> Stmt:
    for lp in reversed(loops):
        body = replace(lp, body=body)
    return body


def _pick_inner(spatial: list, reduce: list, block: SBlock) -> For | None:
    """The last spatial loop when running it innermost gives cheaper accesses than the last
    reduce loop (costs from each access's stride along the loop var)."""
    if not spatial or not reduce:
        return None
    s, r = spatial[-1], reduce[-1]
    binds = {iv.var.name: iv.binding for iv in block.iter_vars}
    accesses = _accesses(block.body)
    cost_s = sum(_stride_cost(a, binds, s.var) for a in accesses)
    cost_r = sum(_stride_cost(a, binds, r.var) for a in accesses)
    extent = r.extent.value if isinstance(r.extent, E.IntImm) else None
    if extent is not None and extent < _SHORT_REDUCE:
        cost_r += 3
    return s if cost_s < cost_r else None


def _accesses(stmt) -> list:
    """(buffer, indices) of every load and store in a block body."""
    found: list = []

    def expr(e):
        if isinstance(e, BufferLoad):
            found.append((e.buffer, e.indices))
        for c in expr_children(e):
            expr(c)

    def visit(s):
        if isinstance(s, SeqStmt):
            for c in s.stmts:
                visit(c)
        elif isinstance(s, BufferStore):
            found.append((s.buffer, s.indices))
            expr(s.value)
            for i in s.indices:  # loads in a store's index (index_put's y[i0[b], i1[b]])
                expr(i)
        elif isinstance(s, LetStmt):
            expr(s.value)

    visit(stmt)
    return found


def _stride_cost(access, binds: dict, var: E.Var) -> int:
    buf, indices = access
    flat, stride = E.IntImm(0), E.IntImm(1)
    for index, dim in zip(reversed(indices), reversed(buf.shape)):
        flat = E.add(flat, E.mul(E.substitute(index, binds), stride))
        stride = E.mul(stride, dim)
    step = E.sub(E.substitute(flat, {var.name: E.add(var, 1)}), flat)
    if not isinstance(step, E.IntImm):
        return 4
    step = abs(step.value)
    return 0 if step <= 1 else 1 if step <= 4 else 4


@dataclass(frozen=True)
class RegionView(Stmt):
    """``view`` is the tile ``region`` of ``base`` (a block's ``T.match_buffer``, as
    ``tensorize`` writes them), walked with ``base``'s strides; for the rest of the
    sequence."""

    view: Buffer
    base: Buffer
    region: tuple


# ----------------------------------------------------------------------- spatial loop fusion

@dataclass(frozen=True)
class BufferView(Stmt):
    """``view`` is ``base``'s memory under another shape (the dims a fused loop walks
    merged into one); for the rest of the enclosing sequence."""

    view: Buffer
    base: Buffer


def _fused_nest(top: For) -> Stmt | None:
    """An elementwise nest whose innermost loops walk every buffer contiguously, with those
    loops merged into one (``for ax2, ax3: y[c, ax2, ax3] = x[c, ax2, ax3] + b[c]`` runs one
    loop of H*W): long inner loops vectorize without remainders per row."""
    loops, block = _chain(top)
    if not isinstance(block, SBlock) or block.init is not None or block.predicate is not None \
            or block.alloc_buffers or len(loops) < 2 or not _straight(block.body):
        return None
    ivs = _plain_iter_vars(loops, block)
    if ivs is None:
        return None
    accesses = _accesses(block.body)
    pinned = _pinned_vars(block.body)
    group = 1
    while group < len(loops) and _fusable(ivs[-group - 1], ivs[-group], loops[-group], accesses,
                                          pinned):
        group += 1
    if group < 2:
        return None
    fused_loops, names = loops[-group:], {iv.var.name for iv in ivs[-group:]}
    extent = E.IntImm(1)
    for lp in fused_loops:
        extent = E.mul(extent, lp.extent)
    var = E.Var("fused", fused_loops[0].var.dtype)
    views: dict = {}
    body = _rewrite_stmt(block.body, lambda buf, index: _fuse_index(buf, index, names, var,
                                                                    views))
    lets = [LetStmt(iv.var, iv.binding) for iv in ivs[:-group]]
    nest = _wrap(loops[:-group], For(var, E.IntImm(0, var.dtype), extent, "serial",
                                     seq(lets + [body])))
    return seq([BufferView(v, b) for v, b in views.values()] + [nest])


def _straight(stmt) -> bool:
    return all(isinstance(s, (SeqStmt, BufferStore, LetStmt)) for s in _stmts(stmt))


def _plain_iter_vars(loops: list, block: SBlock):
    """The block's iter vars in loop order when each is a spatial var bound to its own plain
    loop (min 0, same extent), else None."""
    by_loop = {}
    for iv in block.iter_vars:
        if iv.kind != "spatial" or not isinstance(iv.binding, E.Var):
            return None
        by_loop[iv.binding.name] = iv
    ivs = [by_loop.get(lp.var.name) for lp in loops]
    if any(iv is None for iv in ivs) or len(by_loop) != len(loops):
        return None
    for lp, iv in zip(loops, ivs):
        if lp.kind != "serial" or lp.annotations or lp.min != 0 or iv.extent != lp.extent:
            return None
    return ivs


def _pinned_vars(stmt) -> set:
    """Vars used other than as a whole buffer index (in values, conditions, compound
    indices): their loops keep their own var."""
    found: set = set()

    def expr(e, as_index=False):
        if isinstance(e, E.Var) and not as_index:
            found.add(e.name)
        if isinstance(e, BufferLoad):
            for i in e.indices:
                expr(i, as_index=True)
            return
        if as_index and not isinstance(e, (E.Var, E.IntImm)):
            found.update(_names(e))
            return
        for c in expr_children(e):
            expr(c)

    for s in _stmts(stmt):
        if isinstance(s, BufferStore):
            expr(s.value)
            for i in s.indices:
                expr(i, as_index=True)
        elif isinstance(s, LetStmt):
            expr(s.value)
    return found


def _stmts(stmt):
    yield stmt
    if isinstance(stmt, SeqStmt):
        for c in stmt.stmts:
            yield from _stmts(c)


def _fusable(outer_iv, inner_iv, inner_loop: For, accesses: list, pinned: set) -> bool:
    u, w = outer_iv.var.name, inner_iv.var.name
    if u in pinned or w in pinned:
        return False
    for buf, index in accesses:
        pos = {i.name: k for k, i in enumerate(index) if isinstance(i, E.Var)}
        if u not in pos and w not in pos:
            continue
        if pos.get(w) is None or pos.get(u) != pos[w] - 1 or buf.shape[pos[w]] != \
                inner_loop.extent:
            return False
    return True


def _fuse_index(buf, index, names: set, var: E.Var, views: dict):
    """(buffer or view, index) of an access once the loops of ``names`` are one loop."""
    at = [k for k, i in enumerate(index) if isinstance(i, E.Var) and i.name in names]
    if not at:
        return buf, index
    first, last = at[0], at[-1]
    key = (buf.name, first, last)
    if key not in views:
        merged = E.IntImm(1)
        for d in buf.shape[first:last + 1]:
            merged = E.mul(merged, d)
        shape = buf.shape[:first] + (merged,) + buf.shape[last + 1:]
        views[key] = (Buffer(f"{buf.name}_fused", shape, buf.dtype), buf)
    view = views[key][0]
    return view, tuple(index[:first]) + (var,) + tuple(index[last + 1:])


def _rewrite_stmt(stmt, access):
    if isinstance(stmt, SeqStmt):
        return SeqStmt(tuple(_rewrite_stmt(c, access) for c in stmt.stmts))
    if isinstance(stmt, BufferStore):
        buf, index = access(stmt.buffer, tuple(_rewrite_expr(i, access) for i in stmt.indices))
        return BufferStore(buf, _rewrite_expr(stmt.value, access), index)
    if isinstance(stmt, LetStmt):
        return replace(stmt, value=_rewrite_expr(stmt.value, access))
    return stmt


def _rewrite_expr(e, access):
    if isinstance(e, BufferLoad):
        buf, index = access(e.buffer, tuple(_rewrite_expr(i, access) for i in e.indices))
        return BufferLoad(buf, index)
    if isinstance(e, E.BinaryOp):
        return E.BinaryOp(e.op, _rewrite_expr(e.a, access), _rewrite_expr(e.b, access), e.dtype)
    if isinstance(e, E.Select):
        return E.Select(*(_rewrite_expr(c, access) for c in (e.cond, e.true_value,
                                                             e.false_value)))
    if isinstance(e, E.Cast):
        return E.Cast(e.dtype, _rewrite_expr(e.value, access))
    if isinstance(e, E.Not):
        return E.Not(_rewrite_expr(e.a, access))
    if isinstance(e, E.PrimCall):
        return E.PrimCall(e.name, [_rewrite_expr(a, access) for a in e.args], e.dtype)
    return e
