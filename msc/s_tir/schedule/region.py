"""Which elements of a buffer a loop nest touches: accesses and interval bounds.

``compute_at`` needs the region a consumer reads under a loop, ``reverse_compute_at`` the
region a producer writes there. Block indices are rewritten into loop vars (through the
iter var bindings), then bounded per dim with interval arithmetic: loops inside the target
loop range over their domain, loops outside it stay symbolic::

    lo, hi = bounds(vi * 4 + k, inner={"k": (0, 3)})      # (vi * 4, vi * 4 + 3)
"""

from __future__ import annotations

from ...errors import ScheduleError
from ...tir import expr as E
from ...tir.function import BufferLoad, BufferStore, For, SBlock
from .tree import kids, rewrite_expr

__all__ = ["accesses", "block_reads", "block_writes", "bounds", "loads", "loop_ranges",
           "stmt_exprs", "union"]


def loads(e) -> list:
    """Every BufferLoad in expression ``e`` (its indices' loads too), outermost first."""
    found: list = []
    _loads(e, found)
    return found


def _loads(e, found: list) -> None:
    if isinstance(e, BufferLoad):
        found.append(e)
        for i in e.indices:
            _loads(i, found)
        return
    for c in E.children(e):
        _loads(c, found)


def _stmt_accesses(s, binds: dict, out: list) -> None:
    """(kind, buffer, indices in loop vars) of every load/store under ``s``."""
    if isinstance(s, SBlock):
        inner = dict(binds)
        inner.update({iv.var.name: rewrite_expr(iv.binding, binds) for iv in s.iter_vars})
        for part in ([s.init] if s.init is not None else []) + [s.body]:
            _stmt_accesses(part, inner, out)
        return
    if isinstance(s, BufferStore):
        loads: list = []
        _loads(s.value, loads)
        for i in s.indices:
            _loads(i, loads)
        out.extend(("read", ld.buffer, tuple(rewrite_expr(i, binds) for i in ld.indices))
                   for ld in loads)
        out.append(("write", s.buffer, tuple(rewrite_expr(i, binds) for i in s.indices)))
        return
    for expr in stmt_exprs(s):
        loads = []
        _loads(expr, loads)
        out.extend(("read", ld.buffer, tuple(rewrite_expr(i, binds) for i in ld.indices))
                   for ld in loads)
    for child in kids(s):
        _stmt_accesses(child, binds, out)


def stmt_exprs(s) -> list:
    """The expressions a statement holds itself (value, cond, min, extent)."""
    return [getattr(s, f) for f in ("cond", "value", "min", "extent")
            if isinstance(getattr(s, f, None), E.PrimExpr)]


def accesses(s, kind: str | None = None, buffer: str | None = None) -> list:
    """(kind, buffer, indices) under ``s``, filtered by kind ("read"/"write") and name."""
    out: list = []
    _stmt_accesses(s, {}, out)
    return [a for a in out if (kind is None or a[0] == kind)
            and (buffer is None or a[1].name == buffer)]


def _ordered_buffers(block: SBlock, kind: str) -> list:
    seen: dict = {}
    for k, buf, _ in accesses(block):
        if k == kind:
            seen.setdefault(buf.name, buf)
    return list(seen.values())


def block_writes(block: SBlock) -> list:
    """The buffers a block writes: its ``T.writes``, else the ones it stores to."""
    if block.writes is not None:
        return [r.buffer for r in block.writes]
    return _ordered_buffers(block, "write")


def block_reads(block: SBlock) -> list:
    """The buffers a block reads: its ``T.reads``, else the ones it loads, in order (a
    reduction's own output is not a read, as in TVM's inferred regions)."""
    if block.reads is not None:
        return [r.buffer for r in block.reads]
    written = {b.name for b in block_writes(block)} if block.init is not None else set()
    return [b for b in _ordered_buffers(block, "read") if b.name not in written]


def loop_ranges(loops: list) -> dict:
    """name -> (min, max) of each loop var (max = min + extent - 1)."""
    return {lp.var.name: (lp.min, E.sub(E.add(lp.min, lp.extent), 1)) for lp in loops
            if isinstance(lp, For)}


def bounds(e, inner: dict) -> tuple:
    """(lo, hi) of integer expression ``e`` when the vars of ``inner`` range over their
    (min, max); other vars stay as they are. ScheduleError on what it cannot bound."""
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return e, e
    if isinstance(e, E.Var):
        return inner.get(e.name, (e, e))
    if isinstance(e, (E.Cast, E.PrimCall)):
        result = _monotone(e, inner)
        if result is not None:
            return result
    if isinstance(e, E.BinaryOp):
        handler = _BOUNDS.get(e.op)
        if handler is not None:
            result = handler(e, inner)
            if result is not None:
                return result
    if not any(v.name in inner for v in E.free_vars(e)):
        return e, e
    raise ScheduleError(f"cannot bound the access index {E.to_str(e)}",
                        hint="compute_at needs affine indices (+, -, * or // by constants)")


def _add(e, inner):
    (al, ah), (bl, bh) = bounds(e.a, inner), bounds(e.b, inner)
    return E.add(al, bl), E.add(ah, bh)


def _sub(e, inner):
    (al, ah), (bl, bh) = bounds(e.a, inner), bounds(e.b, inner)
    return E.sub(al, bh), E.sub(ah, bl)


def _mul(e, inner):
    a, c = (e.a, e.b) if isinstance(e.b, E.IntImm) else (e.b, e.a)
    if not isinstance(c, E.IntImm):
        return None
    lo, hi = bounds(a, inner)
    lo, hi = E.mul(lo, c), E.mul(hi, c)
    return (lo, hi) if c.value >= 0 else (hi, lo)


def _floordiv(e, inner):
    if not (isinstance(e.b, E.IntImm) and e.b.value > 0):
        return None
    lo, hi = bounds(e.a, inner)
    return E.floordiv(lo, e.b), E.floordiv(hi, e.b)


def _floormod(e, inner):
    if not (isinstance(e.b, E.IntImm) and e.b.value > 0):
        return None
    lo, hi = bounds(e.a, inner)
    if E.sub(hi, lo) == E.IntImm(0, lo.dtype):
        return E.floormod(lo, e.b), E.floormod(lo, e.b)
    return E.IntImm(0, e.dtype), E.IntImm(e.b.value - 1, e.dtype)


def _minmax(pick):
    def bound(e, inner):
        (al, ah), (bl, bh) = bounds(e.a, inner), bounds(e.b, inner)
        return pick(al, bl), pick(ah, bh)
    return bound


def _monotone(e, inner):
    """Bounds through a cast or ``floor`` / ``ceil`` (non-decreasing functions), as in
    ``T.Cast("int32", T.floor(T.Cast("float32", v * 2) + 0.5))``; None when not constant."""
    import math

    arg = e.value if isinstance(e, E.Cast) else (e.args[0] if len(e.args) == 1 else None)
    fn = {"Cast": float, "floor": math.floor, "ceil": math.ceil}.get(
        "Cast" if isinstance(e, E.Cast) else getattr(e, "name", None))
    if arg is None or fn is None:
        return None
    ends = bounds(arg, inner)
    if not all(x.is_const for x in ends):
        return None
    values = [fn(x.value) for x in ends]
    if E.is_float(e.dtype):
        return tuple(E.FloatImm(float(v), e.dtype) for v in values)
    return tuple(E.IntImm(int(v), e.dtype) for v in values)


_BOUNDS = {"Add": _add, "Sub": _sub, "Mul": _mul, "FloorDiv": _floordiv,
           "FloorMod": _floormod, "Min": _minmax(E.min), "Max": _minmax(E.max)}


def union(regions: list) -> list:
    """Per dim (lo, hi) covering every region of ``regions`` (lists of (lo, hi))."""
    out = list(regions[0])
    for region in regions[1:]:
        out = [(_pick(E.min, a[0], b[0]), _pick(E.max, a[1], b[1])) for a, b in zip(out, region)]
    return out


def _pick(f, a, b):
    diff = E.sub(a, b)
    if isinstance(diff, E.IntImm):  # same symbolic part: the constant decides
        return b if (diff.value > 0) == (f is E.min) else a
    return f(a, b)
