"""compute_inline and reverse_compute_inline, with TVM's semantics and refusals.

``compute_inline(B)``: a block that only computes ``B[v...] = f(v...)`` (spatial axes, no
init, its store indices its own iter vars) disappears; each load ``B[i...]`` of the other
blocks becomes ``f(i...)``, and ``B``'s allocation goes. ``reverse_compute_inline(C)``: a
consumer ``C[g(v)] = h(B[v...], ...)`` of a single producer ``B[u...] = f(u...)`` disappears
into that producer, which then stores ``C[g(u)] = h(f(u), ...)``; where the producer covers
more than the consumer read, a predicate keeps the extra points out (TVM's over-computed
producer). What TVM refuses is refused here in its terms: an output buffer, a block with an
init or reduce axes, a store or load that is not a permutation of iter vars, several
writers or readers, opaque access (``B.access_ptr``, ``T.match_buffer`` of ``B``).
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
    PrimFunc,
    SBlock,
    walk_stmts,
)
from .arith import map_children
from .blocks import find_block
from .region import bounds, loads, stmt_exprs
from .tree import blocks_in, find_path, kids, rebuild, replace_at, rewrite_expr

__all__ = ["compute_inline", "reverse_compute_inline"]


# ---------------------------------------------------------------------------- looking

def _complete_store(block: SBlock, what: str) -> BufferStore:
    """The block's one BufferStore; the block must be spatial, without an init."""
    if block.init is not None or any(iv.kind != "spatial" for iv in block.iter_vars):
        raise ScheduleError(f"{what}: block {block.name!r} is a reduction block (it has an "
                            "init or reduce axes); only a complete spatial block can be "
                            "inlined", key=block.name)
    if not isinstance(block.body, BufferStore):
        raise ScheduleError(f"{what}: the body of block {block.name!r} is not a single "
                            "BufferStore", key=block.name,
                            hint="the block must compute exactly one buffer element")
    return block.body


def _distinct_iter_vars(indices, block: SBlock, what: str, role: str) -> list[str]:
    ivs = {iv.var.name for iv in block.iter_vars}
    names = [i.name for i in indices if isinstance(i, E.Var) and i.name in ivs]
    if len(names) != len(indices) or len(set(names)) != len(names):
        text = ", ".join(E.to_str(i) for i in indices)
        raise ScheduleError(f"{what}: the {role} indices [{text}] of block {block.name!r} are "
                            "not distinct iter vars of the block", key=block.name,
                            hint="TVM inlines through a permutation of the block's axes only")
    return names


def own_stmts(block: SBlock) -> list:
    """The statements of ``block`` that are not inside a nested block."""
    out, stack = [], [block.body] + ([block.init] if block.init is not None else [])
    while stack:
        node = stack.pop()
        out.append(node)
        if not isinstance(node, SBlock):
            stack.extend(kids(node))
    return out


def exprs_of(stmt) -> list:
    """The statement's own expressions, a store's indices among them."""
    return stmt_exprs(stmt) + (list(stmt.indices) if isinstance(stmt, BufferStore) else [])


def _loads_in(e, name: str, found: list) -> None:
    found.extend(ld for ld in loads(e) if ld.buffer.name == name)


def uses_data(e, name: str) -> bool:
    if isinstance(e, E.Var):
        return e.name == f"{name}.data"
    kids_ = e.indices if isinstance(e, BufferLoad) else E.children(e)
    return any(uses_data(c, name) for c in kids_)


def _writers(func: PrimFunc, name: str) -> list[SBlock]:
    return [b for b in blocks_in(func.body)[1:]
            if any(isinstance(s, BufferStore) and s.buffer.name == name for s in own_stmts(b))]


def _readers(func: PrimFunc, name: str) -> list[SBlock]:
    out = []
    for block in blocks_in(func.body)[1:]:
        found: list = []
        exprs = [e for s in own_stmts(block) for e in exprs_of(s)]
        if block.predicate is not None:
            exprs.append(block.predicate)
        for e in exprs:
            _loads_in(e, name, found)
        if found:
            out.append(block)
    return out


def _check_intermediate(func: PrimFunc, buf: Buffer, block: SBlock, what: str) -> None:
    """``buf`` is allocated inside the function, written by ``block`` only, never accessed
    opaquely (its data pointer) nor matched."""
    if any(p.name == buf.name for p in func.buffers):
        raise ScheduleError(f"{what}: block {block.name!r} is an output block: it writes "
                            f"{buf.name!r}, a parameter of the function", key=block.name,
                            hint="only blocks computing an intermediate buffer inline")
    if [w.name for w in _writers(func, buf.name)] != [block.name]:
        raise ScheduleError(f"{what}: buffer {buf.name!r} has several writers", key=block.name)
    for s in walk_stmts(func.body):
        if isinstance(s, SBlock) and any(r.buffer.name == buf.name for _, r in s.match_buffers):
            raise ScheduleError(f"{what}: block {s.name!r} matches a region of {buf.name!r} "
                                "(T.match_buffer): an opaque access", key=s.name)
        exprs = exprs_of(s) + ([s.predicate] if isinstance(s, SBlock) and
                                s.predicate is not None else [])
        if any(uses_data(e, buf.name) for e in exprs):
            raise ScheduleError(f"{what}: {buf.name!r} is accessed opaquely (its data "
                                "pointer, e.g. access_ptr)", key=buf.name)


# ---------------------------------------------------------------------------- rewriting

def _inline_loads(e, name: str, value, params: list[str]):
    """``e`` with every load of ``name`` replaced by ``value`` at the load's indices."""
    if isinstance(e, BufferLoad):
        indices = tuple(_inline_loads(i, name, value, params) for i in e.indices)
        if e.buffer.name == name:
            return rewrite_expr(value, dict(zip(params, indices)))
        return BufferLoad(e.buffer, indices)
    if isinstance(e, E.PrimExpr) and E.children(e):
        return _map_children(e, lambda c: _inline_loads(c, name, value, params))
    return e


def _substitute_loads(e, name: str, value):
    """``e`` with every load of ``name`` replaced by ``value`` as it is."""
    if isinstance(e, BufferLoad):
        if e.buffer.name == name:
            return value
        return BufferLoad(e.buffer, tuple(_substitute_loads(i, name, value) for i in e.indices))
    if isinstance(e, E.PrimExpr) and E.children(e):
        return _map_children(e, lambda c: _substitute_loads(c, name, value))
    return e


def _map_children(e, fn):
    # rebuilt as written: the inlined expression keeps its arithmetic (no constant folding)
    return map_children(e, fn, binary=E.binary)


def _inline_stmt(s, name: str, value, params: list[str]):
    """Every load of ``name`` under ``s`` (predicates, regions aside) inlined."""
    def fx(e):
        return _inline_loads(e, name, value, params) if e is not None else None

    if isinstance(s, SBlock):
        body = _inline_stmt(s.body, name, value, params)
        init = _inline_stmt(s.init, name, value, params) if s.init is not None else None
        new = replace(s, body=body, init=init, predicate=fx(s.predicate))
        return _refresh_reads(new, name) if new != s else s
    if isinstance(s, BufferStore):
        return BufferStore(s.buffer, fx(s.value), tuple(fx(i) for i in s.indices))
    parts = kids(s)
    if not parts and not exprs_of(s):
        return s
    new = s
    for field in ("value", "cond", "min", "extent"):
        if isinstance(getattr(s, field, None), E.PrimExpr):
            new = replace(new, **{field: fx(getattr(s, field))})
    if parts:
        new = rebuild(new, [_inline_stmt(c, name, value, params) for c in kids(new)])
    return new


def _point(buf: Buffer, indices) -> BufferRegion:
    return BufferRegion(buf, tuple((i, None) for i in indices))


def _refresh_reads(block: SBlock, gone: str) -> SBlock:
    """A block whose stated reads named ``gone``: those reads become the points it now
    loads (other stated regions stay as written)."""
    if block.reads is None or not any(r.buffer.name == gone for r in block.reads):
        return block
    kept = [r for r in block.reads if r.buffer.name != gone]
    names = {r.buffer.name for r in kept}
    for stmt in own_stmts(block):
        for e in exprs_of(stmt):
            for load in loads(e):
                if load.buffer.name not in names:
                    names.add(load.buffer.name)
                    kept.append(_point(load.buffer, load.indices))
    return replace(block, reads=tuple(kept))


def _drop_alloc(body, name: str):
    """``body`` with ``name`` no longer in any block's alloc_buffers."""
    path = find_path(body, lambda s: isinstance(s, SBlock) and
                     any(b.name == name for b in s.alloc_buffers))
    if path is None:
        return body
    owner = path[-1]
    allocs = tuple(b for b in owner.alloc_buffers if b.name != name)
    return replace_at(path, replace(owner, alloc_buffers=allocs))


def _remove(body, path: list):
    """``body`` without the block at the end of ``path`` and the loops left empty by it."""
    new = replace_at(path, None)
    if new is None:
        raise ScheduleError("the block is the only statement of the function",
                            hint="nothing would remain to compute")
    return new


# ---------------------------------------------------------------------------- primitives

def compute_inline(func: PrimFunc, name: str) -> PrimFunc:
    what = "compute_inline"
    path = find_block(func, name, what)
    block = path[-1]
    store = _complete_store(block, what)
    params = _distinct_iter_vars(store.indices, block, what, "store")
    buf = store.buffer
    _check_intermediate(func, buf, block, what)
    found: list = []
    _loads_in(store.value, buf.name, found)
    if found:
        raise ScheduleError(f"{what}: block {name!r} reads the buffer it writes",
                            key=name)
    body = _remove(func.body, path)
    body = _inline_stmt(body, buf.name, store.value, params)
    return replace(func, body=_drop_alloc(body, buf.name))


def reverse_compute_inline(func: PrimFunc, name: str) -> PrimFunc:
    what = "reverse_compute_inline"
    path = find_block(func, name, what)
    consumer = path[-1]
    store = _complete_store(consumer, what)
    produced = _produced_reads(func, consumer, what)
    buf = produced
    found: list = []
    _loads_in(store.value, buf.name, found)
    for idx in store.indices:
        _loads_in(idx, buf.name, found)
    if consumer.predicate is not None:
        raise ScheduleError(f"{what}: block {name!r} has a predicate (T.where)", key=name,
                            hint="only a consumer that computes every point inlines back")
    if not found:
        raise ScheduleError(f"{what}: block {name!r} reads {buf.name!r} only opaquely",
                            key=name)
    first = found[0].indices
    if any(ld.indices != first for ld in found[1:]):
        raise ScheduleError(f"{what}: block {name!r} loads {buf.name!r} at different "
                            "indices", key=name, hint="TVM inlines one access pattern")
    producer = _writers(func, buf.name)[0]
    if [r.name for r in _readers(func, buf.name) if r is not producer] != [name]:
        raise ScheduleError(f"{what}: buffer {buf.name!r} has readers besides block "
                            f"{name!r}", key=name)
    _check_intermediate(func, buf, producer, what)
    pstore = _complete_store(producer, what)
    mapping, conds = _inverse(first, consumer, producer, pstore.indices, what)
    # the consumer's axes -> the producer's; then its loads of B, which now read the
    # producer's own point, -> the producer's value (no round trip through the indices)
    value = _substitute_loads(rewrite_expr(store.value, mapping), buf.name, pstore.value)
    indices = tuple(_substitute_loads(rewrite_expr(i, mapping), buf.name, pstore.value)
                    for i in store.indices)
    new_producer = replace(producer, body=BufferStore(store.buffer, value, indices),
                           predicate=_and(producer.predicate, *_tighten(conds)))
    new_producer = _retarget_regions(new_producer, buf.name, store.buffer, indices, consumer)
    body = _remove(func.body, path)
    ppath = find_path(body, lambda s: isinstance(s, SBlock) and s.name == producer.name)
    body = replace_at(ppath, new_producer)
    return replace(func, body=_drop_alloc(body, buf.name))


def _produced_reads(func: PrimFunc, consumer: SBlock, what: str) -> Buffer:
    """The one buffer ``consumer`` reads that a block of the function writes."""
    found = [ld for s in own_stmts(consumer) for e in exprs_of(s) for ld in loads(e)]
    seen: dict = {}
    for ld in found:
        if _writers(func, ld.buffer.name):
            seen.setdefault(ld.buffer.name, ld.buffer)
    if len(seen) != 1:
        raise ScheduleError(f"{what}: block {consumer.name!r} must read exactly one buffer "
                            f"that a block produces; it reads {sorted(seen) or 'none'}",
                            key=consumer.name)
    return next(iter(seen.values()))


def affine_terms(e) -> tuple[dict, int] | None:
    """``({var name: coefficient}, constant)`` of a sum of vars times constants, else None."""
    if isinstance(e, E.Var):
        return {e.name: 1}, 0
    if isinstance(e, E.IntImm):
        return {}, e.value
    if isinstance(e, E.BinaryOp) and e.op in ("Add", "Sub"):
        a, b = affine_terms(e.a), affine_terms(e.b)
        if a is None or b is None:
            return None
        sign = 1 if e.op == "Add" else -1
        terms = dict(a[0])
        for name, c in b[0].items():
            terms[name] = terms.get(name, 0) + sign * c
        return terms, a[1] + sign * b[1]
    if isinstance(e, E.BinaryOp) and e.op == "Mul":
        const, other = (e.a, e.b) if isinstance(e.a, E.IntImm) else (e.b, e.a)
        inner = affine_terms(other) if isinstance(const, E.IntImm) else None
        if inner is None:
            return None
        return {k: v * const.value for k, v in inner[0].items()}, inner[1] * const.value
    return None


def _inverse(indices, consumer: SBlock, producer: SBlock, stored, what: str):
    """``(consumer iter var -> expression of the producer's, extra predicates)``.

    Each index of the consumer's load meets the producer's store index ``p`` at the same
    position (a producer axis, or an expression of its axes). An index is a mixed-radix sum
    of consumer axes (``vj * 16 + vk`` over extents 8 and 16), so each axis is read back as
    ``p // stride % extent`` (the outermost without the modulo); a plain ``vi`` is ``p``.
    Where the consumer covers fewer points of ``p`` than the producer computes, the predicate
    ``p < covered`` (in loop vars) keeps the rest out; covering more is refused."""
    civs = {iv.var.name: iv for iv in consumer.iter_vars}
    spans = [_span(p, producer, what) for p in stored]
    mapping, conds, used = {}, [], set()
    for index, (base, p_ext, binding) in zip(indices, spans):
        terms = affine_terms(index)
        axes = sorted(terms[0].items(), key=lambda kv: kv[1]) if terms else None
        if not _mixed_radix(axes, terms, civs, used):
            raise ScheduleError(f"{what}: the load index {E.to_str(index)} of block "
                                f"{consumer.name!r} is not a mixed-radix sum of its axes",
                                key=consumer.name, hint="TVM inlines through affine maps "
                                "of the consumer's axes onto the producer's")
        covered = axes[-1][1] * E.as_int(civs[axes[-1][0]].extent)
        if covered > p_ext:
            raise ScheduleError(f"{what}: block {producer.name!r} does not cover the "
                                f"points of {E.to_str(base)} block {consumer.name!r} reads "
                                f"({covered} > {p_ext})", key=consumer.name)
        if covered < p_ext:
            conds.append(_less(binding, covered))
        for k, (name, stride) in enumerate(axes):
            used.add(name)
            value = base if stride == 1 else \
                E.floordiv(base, E.IntImm(stride, base.dtype))
            if k + 1 < len(axes):
                value = E.floormod(value, civs[name].extent)
            mapping[name] = value
    for name, iv in civs.items():
        if name not in mapping:
            if E.as_int(iv.extent) != 1:
                raise ScheduleError(f"{what}: axis {name!r} of block {consumer.name!r} does "
                                    "not index the produced buffer", key=consumer.name,
                                    hint="every consumer axis must be read back")
            mapping[name] = iv.min
    return mapping, conds


def _span(stored, producer: SBlock, what: str) -> tuple:
    """``(index, points it spans, the index in loop vars)`` of a producer store index, which
    must span 0 .. n-1 over the producer's domain."""
    ivs = {iv.var.name: iv for iv in producer.iter_vars}
    if isinstance(stored, E.Var) and stored.name in ivs:
        iv = ivs[stored.name]
        lo, ext = E.as_int(iv.min), E.as_int(iv.extent)
        binding = iv.binding
    else:
        inner = {n: (iv.min, E.sub(E.add(iv.min, iv.extent), 1)) for n, iv in ivs.items()}
        try:
            low, high = bounds(stored, inner)
        except ScheduleError:
            low = high = None
        lo, hi = E.as_int(low), E.as_int(high)
        ext = None if lo is None or hi is None else hi - lo + 1
        binding = rewrite_expr(stored, {n: iv.binding for n, iv in ivs.items()})
    if lo != 0 or ext is None:
        raise ScheduleError(f"{what}: the store index {E.to_str(stored)} of block "
                            f"{producer.name!r} does not span a constant range from 0",
                            key=producer.name)
    return stored, ext, binding


def _mixed_radix(axes, terms, civs: dict, used: set) -> bool:
    """``axes`` (name, stride) ascending: strides 1, e0, e0 * e1 ... of spatial consumer axes
    starting at 0, none used by another index, no constant offset."""
    if not axes or terms[1] != 0:
        return False
    stride = 1
    for name, coeff in axes:
        iv = civs.get(name)
        extent = E.as_int(iv.extent) if iv is not None else None
        if iv is None or name in used or coeff != stride or extent is None or \
                E.as_int(iv.min) != 0:
            return False
        stride *= extent
    return True


def _less(value, bound: int):
    """``value < bound``, with ``x // c < k`` written ``x < c * k`` as TVM simplifies it."""
    if isinstance(value, E.BinaryOp) and value.op == "FloorDiv" and \
            isinstance(value.b, E.IntImm) and value.b.value > 0:
        return E.BinaryOp("LT", value.a, E.IntImm(bound * value.b.value, value.a.dtype))
    return E.BinaryOp("LT", value, E.IntImm(bound, value.dtype))


def _and(first, *conds):
    """``first and cond...``, leaving out a condition ``first`` already states."""
    result, stated = first, _conjuncts(first)
    for cond in conds:
        if cond in stated:
            continue
        result = cond if result is None else E.BinaryOp("And", result, cond)
    return result


def _tighten(conds: list) -> list:
    """TVM's rewrite of ``x < c1 and x % c2 < c3``: the bound drops to the last point with
    ``x % c2 < c3`` (``c1 - c2 + c3`` when ``c2`` divides ``c1``), as its analyzer simplifies
    an inlined block's predicate."""
    mods = {(c.a.a._key, c.a.b.value): c.b.value for c in conds
            if c.op == "LT" and isinstance(c.a, E.BinaryOp) and c.a.op == "FloorMod"
            and isinstance(c.a.b, E.IntImm) and isinstance(c.b, E.IntImm)}
    out = []
    for c in conds:
        bound = c.b.value if c.op == "LT" and isinstance(c.b, E.IntImm) else None
        for (key, c2), c3 in mods.items():
            if bound is not None and key == c.a._key and c2 > 0 and \
                    (bound % c2 == 0 or bound % c2 > c3):
                bound = bound - (bound % c2 or c2) + c3
                c = E.BinaryOp("LT", c.a, E.IntImm(bound, c.b.dtype))
        out.append(c)
    return out


def _conjuncts(e) -> list:
    if e is None:
        return []
    if isinstance(e, E.BinaryOp) and e.op == "And":
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [e]


def _retarget_regions(block: SBlock, gone: str, out: Buffer, indices, consumer) -> SBlock:
    """Stated regions of the new producer: it writes ``out`` (no longer ``gone``) and reads
    what it reads now."""
    writes = block.writes
    if writes is not None:
        writes = tuple([r for r in writes if r.buffer.name != gone] + [_point(out, indices)])
    reads = block.reads
    if reads is not None:
        names = {r.buffer.name for r in reads}
        extra = [ld for ld in loads(block.body.value) if ld.buffer.name not in names]
        for ld in extra:
            names.add(ld.buffer.name)
            reads = reads + (_point(ld.buffer, ld.indices),)
    return replace(block, writes=writes, reads=reads)
