"""``rolling_buffer`` (TVM's): keep only a sliding window of a tiled producer's buffer.

After ``compute_at`` puts a producer under a tile loop of its consumer, neighbouring tiles
often need overlapping rows (a 3x3 pooling reads rows ``4 * i .. 4 * i + 5`` for tile ``i``).
``rolling_buffer`` shrinks the buffer along the outermost such dim to the window (6 rows),
indexes it modulo the window (``B[cc, vi % 6]``) everywhere in the scope, makes that block
axis opaque, and adds a ``T.where`` so each tile after the first computes only the rows the
previous tile did not (``i_0 < 1 or 2 <= ax0``)::

    sch.compute_at(sch.get_sblock("B"), io)
    sch.rolling_buffer(sch.get_sblock("B"), 0)

TVM's refusals: an output block, a block with other than read-after-write dependencies, a
block whose consumers do not share a loop with it, no dim of the tile's region that rolls.
"""

from __future__ import annotations

from dataclasses import replace

from ...errors import ScheduleError
from ...tir import expr as E
from ...tir.function import (
    AllocBuffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
    PrimFunc,
    SBlock,
    SeqStmt,
)
from .arith import map_children, raw_subst
from .blocks import find_block
from .compute_at import block_regions, check_not_output, dependents, scope_blocks
from .region import block_reads, block_writes, bounds, loop_ranges
from .tree import block_loops, find_path, kids, rebuild, swap

__all__ = ["rolling_buffer"]


def rolling_buffer(func: PrimFunc, block_name: str, write_index: int) -> PrimFunc:
    what = "rolling_buffer"
    path = find_block(func, block_name, what)
    block = path[-1]
    writes = block_writes(block)
    if not 0 <= write_index < len(writes):
        raise ScheduleError(f"{what}: block {block_name!r} has no write buffer {write_index}",
                            key=block_name, hint=f"its writes: {[b.name for b in writes]}")
    buf = writes[write_index]
    scope_at = max(k for k, n in enumerate(path[:-1]) if isinstance(n, SBlock))
    scope = path[scope_at]
    check_not_output(block, scope, what)
    siblings = scope_blocks(scope)
    _check_raw_only(block, siblings, what)
    region = _relaxed_region(func, path, block, buf, siblings, what)
    axis, extent, rolls = _rolling_axis(block, block_loops(path), region, buf, what)
    new_buf = replace(buf, shape=tuple(extent if k == axis else d
                                       for k, d in enumerate(buf.shape)))
    plan = _Plan(buf, new_buf, axis, extent, rolls)
    new_scope = _rewrite_scope(scope, plan)
    return replace(func, body=swap(func.body, scope, new_scope))


class _Plan:
    def __init__(self, old, new, axis, extent, rolls):
        self.old, self.new, self.axis, self.extent = old, new, axis, extent
        self.rolls = rolls  # per dim: (loop var, overlap) or None


def _check_raw_only(block: SBlock, siblings: list, what: str) -> None:
    """TVM's ``RollingBufferDependencyError``: no write-after-write or write-after-read
    dependency in or out of the block."""
    k = next(i for i, b in enumerate(siblings) if b is block)
    mine_w = {b.name for b in block_writes(block)}
    mine_r = {b.name for b in block_reads(block)}
    for j, other in enumerate(siblings):
        if other is block:
            continue
        ow, orr = {b.name for b in block_writes(other)}, {b.name for b in block_reads(other)}
        waw = bool(ow & mine_w)
        war = bool(orr & mine_w) if j < k else bool(ow & mine_r)
        if waw or war:
            raise ScheduleError(f"{what}: The target block {block.name!r} is required to "
                                "have only RAW dependencies", key=block.name)


def _relaxed_region(func, path, block, buf, siblings, what) -> list:
    """The region of ``buf`` the block writes in one iteration of the lowest loop it shares
    with its consumers: [(min, extent)] per dim."""
    consumers = set(dependents(siblings, block)[1])
    paths = [path] + [find_path(func.body, lambda s, n=n: isinstance(s, SBlock) and s.name == n)
                      for n in consumers]
    common = None
    for nodes in zip(*paths):
        if any(n is not nodes[0] for n in nodes):
            break
        if not isinstance(nodes[0], SeqStmt):
            common = nodes[0]
    if not isinstance(common, For) or common is block:
        raise ScheduleError(
            f"{what}: rolling_buffer injection is invalid. The block {block.name!r} should be "
            f"tiled so that the lca of the access location of the target buffer {buf.name!r} "
            "is a for loop.", key=block.name)
    loops = block_loops(path)
    inner = loop_ranges(loops[next(k for k, lp in enumerate(loops) if lp is common) + 1:])
    binds = {iv.var.name: iv.binding for iv in block.iter_vars}
    out = []
    for lo, hi in block_regions(block, "write")[buf.name][1][0]:
        rlo = bounds(raw_subst(lo, binds), inner)[0]
        rhi = bounds(raw_subst(hi, binds), inner)[1]
        out.append((rlo, E.add(E.sub(rhi, rlo), 1)))
    return out


def _rolling_axis(block, loops, region, buf, what):
    """(axis, window extent, per dim (loop var, overlap) or None): the outermost loop that
    strides a dim whose window overlaps the next tile's."""
    rolls = []
    for lo, extent in region:
        got = _stride(lo)
        if got is False:
            raise _match_error(block, buf, region, what)
        var, stride = got if got is not None else (None, 0)
        overlap = E.as_int(extent) - stride if var is not None else 0
        rolls.append((var, overlap) if var is not None and overlap > 0 else None)
    for lp in loops:
        for axis, roll in enumerate(rolls):
            if roll is not None and roll[0] == lp.var.name:
                return axis, region[axis][1], rolls
    raise _match_error(block, buf, region, what)


def _stride(lo):
    """(var name, stride) of ``v``, ``v * s`` or ``(v * s) // d``; None for a constant;
    False for anything else (TVM's patterns)."""
    if isinstance(lo, E.Var):
        return lo.name, 1
    if isinstance(lo, E.BinaryOp) and lo.op == "Mul" and isinstance(lo.a, E.Var) \
            and E.as_int(lo.b) is not None:
        return lo.a.name, E.as_int(lo.b)
    if isinstance(lo, E.BinaryOp) and lo.op == "FloorDiv" and E.as_int(lo.b) is not None \
            and isinstance(lo.a, E.BinaryOp) and lo.a.op == "Mul" and \
            isinstance(lo.a.a, E.Var) and E.as_int(lo.a.b) is not None:
        return lo.a.a.name, -(-E.as_int(lo.a.b) // E.as_int(lo.b))
    if E.as_int(lo) is not None:
        return None
    return False


def _match_error(block, buf, region, what):
    text = ", ".join(f"{E.to_str(lo)}:{E.to_str(E.add(lo, ext))}" for lo, ext in region)
    return ScheduleError(
        f"{what}: rolling_buffer expect the buffer region to have at least one dimention "
        f"matching the rolling pattern such as: hh.outer * stride + hh.inner. The target "
        f"buffer {buf.name} with region [{text}] should have at least one dimension range "
        "that matches a rolling pattern such as hh.outer * stride + hh.inner.", key=block.name)


# ----------------------------------------------------------------------------- rewriting

def _rewrite_scope(scope: SBlock, plan: _Plan) -> SBlock:
    allocs = tuple(plan.new if b.name == plan.old.name else b for b in scope.alloc_buffers)
    return replace(scope, alloc_buffers=allocs, body=_stmt(scope.body, plan))


def _stmt(s, plan: _Plan):
    if isinstance(s, SBlock):
        return _block(s, plan)
    if isinstance(s, BufferStore):
        value, indices = _expr(s.value, plan), tuple(_expr(i, plan) for i in s.indices)
        if s.buffer.name == plan.old.name:
            return BufferStore(plan.new, value, _rolled(indices, plan))
        return BufferStore(s.buffer, value, indices)
    if isinstance(s, AllocBuffer) and s.buffer.name == plan.old.name:
        return AllocBuffer(plan.new)
    for field in ("cond", "value"):
        if isinstance(getattr(s, field, None), E.PrimExpr) and not isinstance(s, BufferStore):
            s = replace(s, **{field: _expr(getattr(s, field), plan)})
    children = kids(s)
    return rebuild(s, [_stmt(c, plan) for c in children]) if children else s


def _block(b: SBlock, plan: _Plan) -> SBlock:
    stores = _stores_old(b, plan)
    ivs = tuple(replace(iv, kind="opaque") if k == plan.axis else iv
                for k, iv in enumerate(b.iter_vars))
    init = _stmt(b.init, plan) if b.init is not None else None
    new = replace(b, iter_vars=ivs, init=init, body=_stmt(b.body, plan),
                  reads=_regions(b.reads, plan), writes=_regions(b.writes, plan),
                  alloc_buffers=tuple(plan.new if a.name == plan.old.name else a
                                      for a in b.alloc_buffers))
    if stores:
        new = replace(new, predicate=_skip_done(b, plan))
    return new


def _stores_old(b: SBlock, plan: _Plan) -> bool:
    from .inline import own_stmts

    return any(isinstance(s, BufferStore) and s.buffer.name == plan.old.name
               for s in own_stmts(b))


def _skip_done(b: SBlock, plan: _Plan):
    """The block's predicate and, per rolled dim, ``v < 1 or overlap <= value at v = 0``: a
    tile after the first computes only what the previous tile did not."""
    pred = b.predicate
    for k, roll in enumerate(plan.rolls):
        if roll is None or k >= len(b.iter_vars):
            continue
        var, overlap = roll
        first = raw_subst(b.iter_vars[k].binding, {var: E.IntImm(0, "int32")})
        loop_var = next(v for v in E.free_vars(b.iter_vars[k].binding) if v.name == var)
        cond = E.BinaryOp("Or", E.BinaryOp("LT", loop_var, E.IntImm(1, loop_var.dtype)),
                          E.BinaryOp("LE", E.IntImm(overlap, first.dtype), first))
        pred = cond if pred is None else E.BinaryOp("And", pred, cond)
    return pred


def _regions(regions, plan: _Plan):
    if regions is None:
        return None
    out = []
    for r in regions:
        if r.buffer.name != plan.old.name:
            out.append(r)
            continue
        dims = list(r.region)
        lo, hi = dims[plan.axis]
        dims[plan.axis] = (_mod(lo, plan), None) if hi is None else \
            (E.IntImm(0, lo.dtype), plan.extent)
        out.append(BufferRegion(plan.new, tuple(dims)))
    return tuple(out)


def _expr(e, plan: _Plan):
    if isinstance(e, BufferLoad):
        indices = tuple(_expr(i, plan) for i in e.indices)
        if e.buffer.name == plan.old.name:
            return BufferLoad(plan.new, _rolled(indices, plan))
        return BufferLoad(e.buffer, indices)
    if not isinstance(e, E.PrimExpr):
        return e
    return map_children(e, lambda c: _expr(c, plan), binary=E.BinaryOp)


def _rolled(indices: tuple, plan: _Plan) -> tuple:
    return tuple(_mod(i, plan) if k == plan.axis else i for k, i in enumerate(indices))


def _mod(e, plan: _Plan):
    return E.BinaryOp("FloorMod", e, E.IntImm(E.as_int(plan.extent), e.dtype))
