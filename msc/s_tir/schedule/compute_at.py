"""``compute_at`` / ``reverse_compute_at`` with TVM's semantics (``compute_at.cc``).

The block leaves its place (with the loops that hold only it) and is put, under a fresh loop
nest, among the statements of the target loop's body: after its producers and before its
consumers there (``index`` picks the slot: -1 the last possible one, -2 the first, or a
number). The new nest runs the instances of the block that cover what the blocks under the
loop need: for compute_at what its consumers read there, for reverse_compute_at what its
producers write there, relaxed over the loops inside the target loop (see ``cover.py``)::

    sch.compute_at(sch.get_sblock("B"), i)       # B computes B[i * 8 : i * 8 + 8] under i

TVM's refusals, in TVM's words: a block that is neither complete nor a reduction, a block and
loop in different block scopes or the loop already enclosing the block, an output block
(compute_at), a consumer (producer) that is not under the loop, no slot between producers and
consumers, and the only leaf of a scope.
"""

from __future__ import annotations

from dataclasses import replace

from ...errors import ScheduleError
from ...tir import expr as E
from ...tir.function import (
    AllocBuffer,
    BufferRegion,
    BufferStore,
    For,
    PrimFunc,
    SBlock,
    SeqStmt,
    seq,
)
from .arith import fold
from .blocks import find_block
from .cover import block_var_domains, pin_unit, prove_ge, signed_terms, tidy
from .inline import exprs_of, own_stmts
from .loops import find_loop, fresh_name
from .region import accesses, block_reads, block_writes, bounds, loads, loop_ranges, union
from .tree import blocks_in, kids, rebuild, rewrite_expr, var_names

__all__ = ["block_regions", "check_not_output", "compare", "complete_code", "compute_at",
           "dependents", "reverse_compute_at", "scope_blocks"]

_COMPLETE = ("Definition of a complete block:\n1) All block vars are data parallel\n2) Dominant:"
             " the block is the only writer of its output, dominating the reader of its output "
             "buffers\n3) No overlap between the buffers the block reads and writes")
_REDUCTION = ("Definition of a reduction block:\n1) The block has the `init` statement\n2) All "
              "the block bindings are quasi-affine expressions\n3) All block vars are either "
              "data parallel block vars or reduction block vars\n4) Dominant: the block is the "
              "only writer of its output, dominating the reader of its output buffers\n5) The "
              "reduction block vars are not used to index the output buffers")


def compute_at(func: PrimFunc, block_name: str, var: E.Var, preserve_unit_loops: bool = False,
               index: int = -1) -> PrimFunc:
    """Move producer ``block_name`` under loop ``var`` of its consumers."""
    return _move(func, block_name, var, preserve_unit_loops, index, True)


def reverse_compute_at(func: PrimFunc, block_name: str, var: E.Var,
                       preserve_unit_loops: bool = False, index: int = -1) -> PrimFunc:
    """Move consumer ``block_name`` under loop ``var`` of its producers."""
    return _move(func, block_name, var, preserve_unit_loops, index, False)


def _move(func, block_name, var, preserve, index, forward) -> PrimFunc:
    what = "compute_at" if forward else "reverse_compute_at"
    bpath = find_block(func, block_name, what)
    block = bpath[-1]
    scope = next(n for n in reversed(bpath[:-1]) if isinstance(n, SBlock))
    siblings = scope_blocks(scope)
    producers, consumers = dependents(siblings, block)
    _check_complete_or_reduction(block, siblings, what)
    lpath = find_loop(func, var, what)
    ranges = _check_same_scope(bpath, lpath, scope, block, var, what)
    if forward:
        check_not_output(block, scope, what)
    removal = _removal_plan(bpath, scope, block, what)
    loop = lpath[-1]
    subtrees = list(loop.body.stmts) if isinstance(loop.body, SeqStmt) else [loop.body]
    at = _insertion_point(subtrees, producers, consumers, index, forward, what)
    provided = block_regions(block, "write" if forward else "read")
    required = _required(lpath, set(consumers if forward else producers), set(provided),
                         forward)
    doms = block_var_domains(block.iter_vars, provided, required, ranges)
    nest = _new_nest(func, block, doms, ranges, preserve)
    new_loop = replace(loop, body=seq(subtrees[:at] + [nest] + subtrees[at:]))
    return replace(func, body=_rebuild(func.body, loop, new_loop, removal))


# ----------------------------------------------------------------------------- the scope

def scope_blocks(scope: SBlock) -> list:
    """The blocks whose nearest enclosing block is ``scope``, in program order."""
    out: list = []

    def walk(s):
        if isinstance(s, SBlock):
            out.append(s)
            return
        for c in kids(s):
            walk(c)

    walk(scope.body)
    return out


def dependents(siblings: list, block: SBlock) -> tuple[list, list]:
    """(producers, consumers) of ``block`` among its scope's blocks, by name."""
    k = next(i for i, b in enumerate(siblings) if b is block)
    reads = {b.name for b in block_reads(block)}
    writes = {b.name for b in block_writes(block)}
    producers = [b.name for b in siblings[:k] if reads & {w.name for w in block_writes(b)}]
    consumers = [b.name for b in siblings[k + 1:] if writes & {r.name for r in block_reads(b)}]
    return producers, consumers


def _check_complete_or_reduction(block: SBlock, siblings: list, what: str) -> None:
    complete, reduction = complete_code(block, siblings), _reduction_code(block, siblings)
    if complete and reduction:
        raise ScheduleError(
            f"{what}: Not a complete or reduction block. The block {block.name!r} is not a "
            f"complete block - it violates condition #{complete}.\n{_COMPLETE}\nThe block is "
            f"not a reduction block either - it violates condition #{reduction}.\n{_REDUCTION}",
            key=block.name)


def _dominant(block: SBlock, siblings: list) -> bool:
    writes = {b.name for b in block_writes(block)}
    return not any(writes & {w.name for w in block_writes(b)} for b in siblings
                   if b is not block)


def complete_code(block: SBlock, siblings: list) -> int:
    if any(iv.kind != "spatial" for iv in block.iter_vars):
        return 1
    if not _dominant(block, siblings):
        return 2
    reads = {b.name for b in block_reads(block)}
    return 3 if reads & {b.name for b in block_writes(block)} else 0


def _reduction_code(block: SBlock, siblings: list) -> int:
    if block.init is None:
        return 1
    if any(iv.kind not in ("spatial", "reduce") for iv in block.iter_vars):
        return 3
    if not _dominant(block, siblings):
        return 4
    reduce = {iv.var.name for iv in block.iter_vars if iv.kind == "reduce"}
    for _, buf, idx in accesses(replace(block, init=None, iter_vars=()), "write"):
        if any(v.name in reduce for i in idx for v in E.free_vars(i)):
            return 5
    return 0


def _check_same_scope(bpath, lpath, scope, block, var, what) -> dict:
    """TVM's ``NotInSameScopeError``; the ranges of the loop and the loops above it."""
    above = [n for n in lpath if not isinstance(n, SeqStmt)]
    inner = next((n for n in reversed(above[:-1]) if not isinstance(n, For)), None)
    if inner is not scope or any(n is lpath[-1] for n in bpath):
        raise ScheduleError(
            f"{what}: Expected the block {block.name!r} and loop {var.name!r} to be under the "
            "same block scope, and loop not to be the ancestor of block", key=block.name)
    k = next(i for i, n in enumerate(above) if n is scope)
    return loop_ranges(above[k + 1:])


def check_not_output(block: SBlock, scope: SBlock, what: str) -> None:
    allocated = {b.name for b in scope.alloc_buffers}
    allocated |= {s.buffer.name for s in _scope_stmts(scope.body) if isinstance(s, AllocBuffer)}
    if any(b.name not in allocated for b in block_writes(block)):
        raise ScheduleError(f"{what}: Cannot operate on an output block. The block "
                            f"{block.name!r} is an output block", key=block.name,
                            hint="move its consumers with reverse_compute_at instead")


def _scope_stmts(s) -> list:
    if isinstance(s, SBlock):
        return []
    return [s] + [x for c in kids(s) for x in _scope_stmts(c)]


def _removal_plan(bpath, scope, block, what) -> tuple:
    """(the SeqStmt to drop a statement from, the statement): the block with the loops that
    hold only it, as TVM's ``LeafBlockRemovalPlan``."""
    node = block
    for parent in reversed(bpath[:-1]):
        if isinstance(parent, SeqStmt):
            return parent, node
        if parent is scope or isinstance(parent, SBlock):
            break
        node = parent
    raise ScheduleError(f"{what}: Cannot remove the only leaf in the scope. Block "
                        f"{block.name!r} is the only leaf in the scope {scope.name!r}, which "
                        "cannot be removed; Otherwise the scope will be empty.", key=block.name)


def _insertion_point(subtrees, producers, consumers, index, forward, what) -> int:
    last_producer, first_consumer = -1, len(subtrees)
    seen_p = seen_c = 0
    for k, sub in enumerate(subtrees):
        names = [b.name for b in blocks_in(sub, nested=False)]
        p, c = sum(n in producers for n in names), sum(n in consumers for n in names)
        seen_p, seen_c = seen_p + p, seen_c + c
        if p:
            last_producer = k
        if c and first_consumer == len(subtrees):
            first_consumer = k
    if last_producer >= first_consumer:
        raise ScheduleError(
            f"{what}: Cannot find the insertion point that satisfies the producer-consumer "
            "constraint. In 0-based indexing, the last producer appears in subtree "
            f"{last_producer}, and the first consumer appears in subtree {first_consumer}")
    missing = (len(consumers) - seen_c, "consumer(s)", consumers) if forward else \
        (len(producers) - seen_p, "producer(s)", producers)
    if missing[0] > 0:
        raise ScheduleError(
            f"{what}: Not all required blocks are under the loop scope. The primitive requires "
            f"all the {missing[1]} of the given block to be present under the target loop. "
            f"However, there are {missing[0]} {missing[1]} not satisfying the constraint. "
            f"List of the {missing[1]}: {missing[2]}")
    if index == -1:
        return first_consumer
    if index == -2:
        return last_producer + 1
    if last_producer + 1 <= index <= first_consumer:
        return index
    raise ScheduleError(f"{what}: Valid index:(-1, -2, [{last_producer + 1}, "
                        f"{first_consumer}]), current index={index}")


# ----------------------------------------------------------------------------- regions

def block_regions(block: SBlock, kind: str) -> dict:
    """name -> (Buffer, [region]) a block reads / writes, in its own vars: its stated
    ``T.reads`` / ``T.writes``, else the hull of its accesses (a reduction's reads include
    its output, as TVM infers them)."""
    stated = block.reads if kind == "read" else block.writes
    out: dict = {}
    if stated is not None:
        for r in stated:
            out.setdefault(r.buffer.name, (r.buffer, []))[1].append(_region_of(r))
        return out
    points: dict = {}
    for buf, idx in _own_accesses(block, kind):
        points.setdefault(buf.name, (buf, []))[1].append([(i, i) for i in idx])
    inner = loop_ranges([s for s in _scope_stmts(block.body) if isinstance(s, For)])
    for name, (buf, many) in points.items():
        relaxed = [[bounds(lo, inner) for lo, _ in region] for region in many]
        flat = [[(lo[0], lo[1]) for lo in region] for region in relaxed]
        out[name] = (buf, [union(flat)])
    return out


def _own_accesses(block: SBlock, kind: str) -> list:
    """(buffer, indices) of the block's own loads (kind "read") or stores ("write")."""
    found = []
    for stmt in own_stmts(block):
        if kind == "write" and isinstance(stmt, BufferStore):
            found.append((stmt.buffer, tuple(stmt.indices)))
        if kind == "read":
            for e in exprs_of(stmt):
                found.extend((ld.buffer, tuple(ld.indices)) for ld in loads(e))
    return found


def _region_of(r: BufferRegion) -> list:
    return [(lo, lo if hi is None else E.sub(hi, 1)) for lo, hi in r.region]


def _required(lpath, wanted: set, names: set, forward: bool) -> dict:
    """name -> (Buffer, [region in loop vars]) the wanted blocks under the target loop read
    (compute_at) or write, relaxed over the loops between each of them and the loop."""
    out: dict = {}
    loop = lpath[-1]
    for path in _block_paths(loop.body, []):
        other = path[-1]
        if other.name not in wanted:
            continue
        relax = []
        for n in reversed(path[:-1]):
            if isinstance(n, For):
                relax.append(n)
            elif not isinstance(n, SeqStmt):
                break
        inner = loop_ranges(relax)
        threads = _thread_ranges(lpath) if forward else {}
        binds = {iv.var.name: iv.binding for iv in other.iter_vars}
        for name, (buf, regions) in block_regions(other, "read" if forward else "write").items():
            if name not in names:
                continue
            relaxed = {**inner, **threads.get(_rank(buf.scope), {})}
            for region in regions:
                out.setdefault(name, (buf, []))[1].append(
                    [_relaxed(rewrite_expr(lo, binds), rewrite_expr(hi, binds), relaxed, dim)
                     for (lo, hi), dim in zip(region, buf.shape)])
    return out


def _relaxed(lo, hi, ranges: dict, dim) -> tuple:
    """(lo, hi) of an access over ``ranges``; the whole dim where the index is beyond msc's
    bounds (a float round trip such as ``T.Cast("int32", T.floor(...))``), as TVM's
    relaxation gives the buffer's extent there."""
    try:
        return bounds(lo, ranges)[0], bounds(hi, ranges)[1]
    except ScheduleError:
        if not any(v.name in ranges for v in E.free_vars(lo) + E.free_vars(hi)):
            raise
        return E.IntImm(0, dim.dtype), E.sub(dim, 1)


def _rank(scope: str) -> str:
    return scope.split(".")[0]


def _thread_ranges(lpath) -> dict:
    """Storage rank -> the thread-bound loops above the target loop a buffer of that rank is
    relaxed over (TVM's ``CanRelaxStorageUnderThread``: ``shared`` over ``threadIdx`` and
    ``vthread``, ``warp`` over ``threadIdx.x``)."""
    bound = [n for n in lpath[:-1] if isinstance(n, For) and n.kind == "thread_binding"]
    shared = [n for n in bound if (n.thread or "").startswith(("threadIdx", "vthread",
                                                                 "cthread"))]
    warp = [n for n in bound if n.thread == "threadIdx.x"]
    return {"shared": loop_ranges(shared), "warp": loop_ranges(warp)}


def _block_paths(s, prefix: list) -> list:
    """[..., block] paths (from ``s``) to the first-level blocks under ``s``."""
    path = prefix + [s]
    if isinstance(s, SBlock):
        return [path]
    return [p for c in kids(s) for p in _block_paths(c, path)]


# ----------------------------------------------------------------------------- the new nest

def _new_nest(func: PrimFunc, block: SBlock, doms: list, ranges: dict, preserve: bool):
    """TVM's ``MakeNewLoop``: a loop ``ax<k>`` per block var whose range is not one value
    (every var with ``preserve_unit_loops``), bindings ``min + ax<k>``, and a ``T.where``
    for the bounds not proven."""
    taken = var_names(func.body)
    ranges = dict(ranges)
    loops, values, conds = [], [], []
    for iv, info in zip(block.iter_vars, doms):
        lo, hi = info.dom
        extent = tidy(E.add(E.sub(hi, lo), 1), ranges)
        if preserve or E.as_int(extent) != 1:
            dtype = getattr(lo, "dtype", iv.var.dtype)
            ax = E.Var(fresh_name(func, f"ax{len(loops)}", taken), dtype)
            loops.append((ax, extent))
            value = fold("Add", lo, ax)
            ranges[ax.name] = (E.IntImm(0, dtype), E.sub(extent, 1))
        else:
            value = lo
        values.append(value)
        if info.bound is not None:
            blo, bhi = info.bound
            seen = pin_unit(value, ranges)
            if not prove_ge(value, blo, ranges):
                conds.append(compare("LE", blo, seen))
            if not prove_ge(bhi, value, ranges):
                conds.append(compare("LT", seen, E.add(bhi, 1)))
    pred = None
    for c in conds:
        pred = c if pred is None else E.binary("And", pred, c)
    ivs = tuple(replace(iv, binding=v) for iv, v in zip(block.iter_vars, values))
    stmt = replace(block, iter_vars=ivs, predicate=pred)
    for ax, extent in reversed(loops):
        stmt = For(ax, E.IntImm(0, ax.dtype), extent, "serial", stmt)
    return stmt


def compare(op: str, a, b):
    """``a op b`` with the constant terms of the var side moved to the constant side, as
    TVM's simplifier prints a bound (``1 <= h * 8 + ax0``, not ``0 <= h * 8 - 1 + ax0``)."""
    var_side, const_side, sign = (b, a, -1) if E.as_int(a) is not None else (a, b, 1)
    if E.as_int(const_side) is None:
        return E.BinaryOp(op, a, b)
    terms, k = signed_terms(var_side, 1)
    if not terms:
        return E.binary(op, a, b)
    rest = None
    for t_sign, term in terms:
        if rest is None:
            rest = term if t_sign > 0 else E.BinaryOp("Mul", term, E.IntImm(-1, term.dtype))
        else:
            rest = E.BinaryOp("Add" if t_sign > 0 else "Sub", rest, term)
    moved = E.IntImm(E.as_int(const_side) - k, const_side.dtype)
    return E.BinaryOp(op, moved, rest) if sign < 0 else E.BinaryOp(op, rest, moved)


def _rebuild(s, loop: For, new_loop: For, removal: tuple):
    """``s`` with ``loop`` replaced and the removed statement dropped from its sequence."""
    if s is loop:
        return new_loop
    children = kids(s)
    if not children:
        return s
    new = [_rebuild(c, loop, new_loop, removal) for c in children]
    if s is removal[0]:
        new = [n for n, c in zip(new, children) if c is not removal[1]]
        return seq(new)
    if all(n is c for n, c in zip(new, children)):
        return s
    return rebuild(s, new)
