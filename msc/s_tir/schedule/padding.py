"""``decompose_padding`` (TVM's): split a padding block into a block that fills the whole
buffer with the pad value and a block that writes only the in-bound part.

A padding block stores ``T.if_then_else(cond, value, pad)`` with a constant ``pad``; ``cond``
bounds each block var (``3 <= ax2 and ax2 < 228``). The fill block ``<name>_pad_const`` goes
right before ``loop`` (over copies of the loops from ``loop`` down); the block itself keeps
its nest below the last loop with one child, iterating only the in-bound range::

    pad_temp[ax0, ax1, ax2, ax3] = T.if_then_else(3 <= ax2 and ..., x[.., ax2 - 3, ..], 0)
    # -> pad_temp_pad_const: pad_temp[...] = 0 over the whole buffer, then
    #    pad_temp: for i2 in range(225): pad_temp[.., ax2 + 3, ..] = x[.., ax2, ..]

Refused, in TVM's words: a block that is not complete, a loop that is not above the block, a
body that is not such a store, a pad value that is not a constant, a condition that is always
true, block vars the condition does not bound independently.
"""

from __future__ import annotations

from dataclasses import replace

from ...errors import ScheduleError
from ...tir import expr as E
from ...tir.function import BufferStore, For, PrimFunc, SBlock, SeqStmt, seq
from .arith import raw_subst
from .blocks import find_block
from .compute_at import compare, complete_code, scope_blocks
from .cover import pin_unit, prove_ge
from .region import loop_ranges
from .tree import block_loops, kids, rebuild, swap

__all__ = ["decompose_padding"]


def decompose_padding(func: PrimFunc, block_name: str, var: E.Var) -> tuple[PrimFunc, str]:
    """Returns (func, the name of the fill block)."""
    what = "decompose_padding"
    path = find_block(func, block_name, what)
    block = path[-1]
    scope = next(n for n in reversed(path[:-1]) if isinstance(n, SBlock))
    code = complete_code(block, scope_blocks(scope))
    if code:
        raise ScheduleError(f"{what}: Incomplete block. The block {block_name!r} is not a "
                            f"complete block - it violates condition #{code}.", key=block_name)
    loops = block_loops(path)                     # outermost first
    at = next((k for k, lp in enumerate(loops) if lp.var is var), None)
    if at is None:
        raise ScheduleError(f"{what}: The input loop {var.name!r} of decompose_padding is "
                            f"required to be an ancestor of block {block_name!r}",
                            key=block_name)
    inner_at = _in_bound_position(loops, at)
    ranges = loop_ranges(loops)
    store, cond, value, pad = _match(block, what)
    values = [iv.binding for iv in block.iter_vars]
    pred = _conjuncts(raw_subst(cond, {iv.var.name: iv.binding for iv in block.iter_vars}))
    if block.predicate is not None:
        pred += _conjuncts(block.predicate)
    pred = [c for c in pred if not _proven(c, ranges)]
    if not pred:
        raise ScheduleError(f"{what}: decompose_padding expect the block {block_name!r} to "
                            "match padding pattern\n  The in-bound predicate is trivial",
                            key=block_name)
    region = [_in_bound(v, pred, ranges, what, block_name) for v in values]
    name = f"{block_name}_pad_const"
    fill = _fill_nest(block, store, pad, loops[at:], ranges, name)
    kept = _in_bound_nest(block, store, value, pred, region, loops[inner_at:], ranges)
    body = _replace(func.body, loops[at], loops[inner_at], fill, kept)
    return replace(func, body=body), name


def _in_bound_position(loops: list, at: int) -> int:
    """The highest loop at or below ``loops[at]`` whose loops below hold one child each."""
    k = len(loops) - 1
    while k > at and isinstance(loops[k - 1].body, (For, SBlock)):
        k -= 1
    return k


def _match(block: SBlock, what: str):
    """(store, cond, in-bound value, pad value) of ``buf[...] = if_then_else(c, v, pad)``."""
    def fail(msg):
        return ScheduleError(f"{what}: decompose_padding expect the block {block.name!r} to "
                             f"match padding pattern\n  {msg}", key=block.name)

    store = block.body
    if not isinstance(store, BufferStore) or block.init is not None:
        raise fail("Block body expect a BufferStore to the write buffer")
    call = store.value
    if not (isinstance(call, E.PrimCall) and call.name == "if_then_else") and \
            not isinstance(call, E.Select):
        raise fail("Value of BufferStore expect to be constrained by a padding predicate")
    cond, value, pad = (call.cond, call.true_value, call.false_value) \
        if isinstance(call, E.Select) else tuple(call.args)
    if not isinstance(pad, (E.IntImm, E.FloatImm)):
        raise fail("Pad value should be constant")
    return store, cond, value, pad


def _conjuncts(e) -> list:
    if isinstance(e, E.BinaryOp) and e.op == "And":
        return _conjuncts(e.a) + _conjuncts(e.b)
    if isinstance(e, E.PrimCall) and e.name == "likely":
        return _conjuncts(e.args[0])
    return [e]


def _proven(c, ranges: dict) -> bool:
    """A comparison that holds for every value of the loops."""
    if not isinstance(c, E.BinaryOp):
        return E.as_int(c) == 1
    gap = {"LT": 1, "LE": 0, "GT": 1, "GE": 0}.get(c.op)
    if gap is None:
        return False
    small, big = (c.a, c.b) if c.op in ("LT", "LE") else (c.b, c.a)
    return prove_ge(E.sub(big, small), gap, ranges)


def _in_bound(value, pred: list, ranges: dict, what: str, name: str) -> tuple:
    """(min, extent) of ``value`` where every comparison of it with a constant holds."""
    if E.as_int(value) is not None:
        return value, E.IntImm(1, value.dtype)
    lo, hi = None, None
    if isinstance(value, E.Var) and value.name in ranges:
        lo, last = ranges[value.name]
        hi = E.add(last, 1)
    for c in pred:
        got = _bound_of(c, value)
        if got is None:
            continue
        kind, bound = got
        if kind == "lo":
            lo = bound if lo is None else E.max(lo, bound)
        else:
            hi = bound if hi is None else E.min(hi, bound)
    if lo is None or hi is None or E.as_int(lo) is None or E.as_int(hi) is None:
        raise ScheduleError(f"{what}: decompose_padding expect the block {name!r} to match "
                            "padding pattern\n  Block iters are not independent wrt padding "
                            "condition", key=name)
    return lo, E.sub(hi, lo)


def _bound_of(c, value):
    """("lo", m) for ``m <= value`` or ("hi", m) for ``value < m``, from a comparison of
    ``value + k`` with a constant; None when ``c`` does not bound ``value``."""
    if not (isinstance(c, E.BinaryOp) and c.op in ("LT", "LE", "GT", "GE")):
        return None
    small, big, strict = (c.a, c.b, c.op == "LT") if c.op in ("LT", "LE") else \
        (c.b, c.a, c.op == "GT")
    for side, const, upper in ((small, big, True), (big, small, False)):
        k = E.as_int(E.sub(side, value))
        if k is None or E.as_int(const) is None:
            continue
        bound = E.as_int(const) - k
        if upper:    # value + k < const  /  value + k <= const
            return "hi", E.IntImm(bound if strict else bound + 1, value.dtype)
        return "lo", E.IntImm(bound + 1 if strict else bound, value.dtype)
    return None


def _fill_nest(block, store, pad, loops, ranges, name):
    fresh = {lp.var.name: E.Var(lp.var.name, lp.var.dtype) for lp in loops}
    # the copies are new loops: only the loops above them are known to the simplifier
    above = {k: v for k, v in ranges.items() if k not in fresh}
    ivs = tuple(replace(iv, kind="spatial", var=E.Var(iv.var.name, iv.var.dtype),
                        binding=raw_subst(pin_unit(iv.binding, above), fresh))
                for iv in block.iter_vars)
    names = {iv.var.name: new.var for iv, new in zip(block.iter_vars, ivs)}
    body = BufferStore(store.buffer, pad, tuple(raw_subst(i, names) for i in store.indices))
    pred = None if block.predicate is None else raw_subst(block.predicate, fresh)
    stmt = SBlock(name, body, ivs, reads=(), writes=None, predicate=pred)
    for lp in reversed(loops):
        stmt = For(fresh[lp.var.name], lp.min, lp.extent, "serial", stmt)
    return stmt


def _in_bound_nest(block, store, value, pred, region, loops, ranges):
    own = {lp.var.name for lp in loops}
    new_ranges = dict(ranges)
    shift, ivs, loop_ext = {}, [], {}
    for iv, (lo, extent) in zip(block.iter_vars, region):
        var = E.Var(iv.var.name, iv.var.dtype)
        shift[iv.var.name] = _plus(var, lo)
        binding = iv.binding
        if isinstance(binding, E.Var) and binding.name in own:
            loop_ext[binding.name] = extent
            new_ranges[binding.name] = (E.IntImm(0, extent.dtype), E.sub(extent, 1))
            shift[binding.name] = _plus(binding, lo)
        else:
            binding = pin_unit(_minus(binding, lo), ranges)
        ivs.append(replace(iv, var=var, min=E.IntImm(0, extent.dtype), extent=extent,
                           kind="spatial", binding=binding))
    body = BufferStore(store.buffer, _tidy(raw_subst(value, shift)),
                       tuple(_tidy(raw_subst(i, shift)) for i in store.indices))
    kept = [compare(c.op, *_sides(raw_subst(c, shift))) for c in pred
            if not _proven(raw_subst(c, shift), new_ranges)]
    where = None
    for c in kept:
        where = c if where is None else E.BinaryOp("And", where, c)
    stmt = replace(block, iter_vars=tuple(ivs), body=body, predicate=where,
                   reads=None if block.reads is None else block.reads, writes=block.writes)
    for lp in reversed(loops):
        if lp.var.name in loop_ext:
            lp = replace(lp, min=E.IntImm(0, lp.var.dtype), extent=loop_ext[lp.var.name])
        stmt = replace(lp, body=stmt)
    return stmt


def _sides(c):
    return c.a, c.b


def _plus(var, lo):
    return var if E.as_int(lo) == 0 else E.BinaryOp("Add", var, lo)


def _minus(e, lo):
    return e if E.as_int(lo) == 0 else E.BinaryOp("Sub", e, lo)


def _tidy(e):
    """Index arithmetic folded (``ax2 + 3 - 3`` is ``ax2``), loads' indices too."""
    from .arith import map_children

    if isinstance(e, E.BinaryOp) and e.op in ("Add", "Sub") and e.dtype.startswith("int"):
        return E.binary(e.op, _tidy(e.a), _tidy(e.b))
    return map_children(e, _tidy)


def _replace(s, outer: For, inner: For, fill, kept):
    """``outer`` preceded by ``fill``, with ``inner`` replaced by ``kept``."""
    if s is outer:
        rest = kept if outer is inner else swap(s, inner, kept)
        return SeqStmt((fill, rest))
    children = kids(s)
    if not children:
        return s
    fresh = [_replace(c, outer, inner, fill, kept) for c in children]
    if all(a is b for a, b in zip(fresh, children)):
        return s
    if isinstance(s, SeqStmt):
        return seq([x for n in fresh for x in (n.stmts if isinstance(n, SeqStmt) else [n])])
    return rebuild(s, fresh)
