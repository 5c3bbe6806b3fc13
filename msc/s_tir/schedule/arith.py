"""Index arithmetic the layout primitives share: substitution that keeps an expression's
structure, and TVM-style folding of ``//`` / ``%`` by the bounds of the vars involved.

``E.binary`` puts sums in a canonical order (``rw + w * 2``); TVM's simplifier keeps the
order as written (``w * 2 + rw``) and structural equality compares the order, so primitives
that rewrite indices build them with :func:`fold`::

    raw_subst(h * 2 + rh, {"h": v0 // 112})                 # v0 // 112 * 2 + rh
    simplify_in(v0 // 12544, {"v0": (0, 12543)})            # 0
"""

from __future__ import annotations

from ...errors import ScheduleError
from ...tir import expr as E
from ...tir.function import BufferLoad
from .region import bounds

__all__ = ["fold", "map_children", "raw_subst", "simplify_in"]


def fold(op: str, a, b):
    """``a op b`` built as written, with constants and the identities folded."""
    ca, cb = E.as_int(a), E.as_int(b)
    if ca is not None and cb is not None:
        return E.binary(op, a, b)
    if op == "Mul" and (ca == 0 or cb == 0):
        return E.IntImm(0, a.dtype)
    if (op == "Mul" and cb == 1) or (op in ("Add", "Sub") and cb == 0) or \
            (op == "FloorDiv" and cb == 1):
        return a
    if (op == "Mul" and ca == 1) or (op == "Add" and ca == 0):
        return b
    return E.BinaryOp(op, a, b)


def map_children(e, fn, binary=None):
    """``e`` with ``fn`` applied to each child; a binary op is rebuilt by ``binary(op, a, b)``
    (default: :func:`fold`, which simplifies constants away)."""
    if isinstance(e, BufferLoad):
        return BufferLoad(e.buffer, tuple(fn(i) for i in e.indices))
    if isinstance(e, E.BinaryOp):
        return (binary or fold)(e.op, fn(e.a), fn(e.b))
    if isinstance(e, E.Select):
        return E.Select(fn(e.cond), fn(e.true_value), fn(e.false_value))
    if isinstance(e, E.Not):
        return E.Not(fn(e.a))
    if isinstance(e, E.Cast):
        return E.Cast(e.dtype, fn(e.value))
    if isinstance(e, E.PrimCall):
        return E.PrimCall(e.name, [fn(a) for a in e.args], e.dtype)
    return e


def raw_subst(e, mapping: dict):
    """``e`` with vars replaced by name (``mapping``), its structure kept."""
    if isinstance(e, E.Var):
        return mapping.get(e.name, e)
    return map_children(e, lambda c: raw_subst(c, mapping))


def simplify_in(e, ranges: dict):
    """``e`` with ``x // c`` and ``x % c`` folded where ``x`` provably lies in [0, c) for
    vars ranging over ``ranges`` (name -> (lo, hi)), as TVM's analyzer does with a block's
    iter var domains; loads' indices too."""
    if isinstance(e, E.BinaryOp) and e.op in ("FloorDiv", "FloorMod") and \
            isinstance(e.b, E.IntImm) and e.b.value > 0:
        a = simplify_in(e.a, ranges)
        try:
            lo, hi = (E.as_int(x) for x in bounds(a, ranges))
        except ScheduleError:
            lo = hi = None
        if lo is not None and hi is not None and 0 <= lo and hi < e.b.value:
            return E.IntImm(0, e.dtype) if e.op == "FloorDiv" else a
        return fold(e.op, a, e.b)
    return map_children(e, lambda c: simplify_in(c, ranges))
