"""Proving symbolic shape dims equal, for checking annotations as TVM does.

TVM accepts an annotation whose dims are provably equal to the inferred ones, and trusts it
where its arithmetic analyzer can prove neither equality nor difference; only a provable
difference is an error. Here: integer polynomials (msc.tir.expr.canonicalize), ``min`` /
``max`` folded when one side provably bounds the other, and interval bounds in which shape
vars are non-negative::

    prove_equal(n, T.max(n, 0))      # True
    prove_equal(T.min(1, n), 1)      # None: unknown (n may be 0), the annotation is trusted
    prove_equal(n + 1, n)            # False
    annotation_mismatch(ann, inferred)   # None, or why ``ann`` provably does not fit
"""

from __future__ import annotations

from ..tir import expr as tir
from .analysis import is_base_of
from .struct_info import ShapeStructInfo, StructInfo, TensorStructInfo, TupleStructInfo

__all__ = ["annotation_mismatch", "bounds", "prove_equal", "simplify"]

Bound = tuple  # (lo, hi); None is unbounded


def bounds(e: tir.PrimExpr) -> Bound:
    """Integer interval of ``e``; integer vars (shape dims) are taken as >= 0."""
    if isinstance(e, tir.IntImm):
        return e.value, e.value
    if isinstance(e, tir.Var):
        return (0, None) if tir.is_int(e.dtype) else (None, None)
    if isinstance(e, tir.BinaryOp):
        rule = _BOUND_RULES.get(e.op)
        if rule is not None:
            return rule(bounds(e.a), bounds(e.b), e.b)
    return None, None


def _add(a: Bound, b: Bound, _rhs) -> Bound:
    return _plus(a[0], b[0]), _plus(a[1], b[1])


def _sub(a: Bound, b: Bound, _rhs) -> Bound:
    return _plus(a[0], _neg(b[1])), _plus(a[1], _neg(b[0]))


def _mul(a: Bound, b: Bound, _rhs) -> Bound:
    if None not in a + b:
        products = [x * y for x in a for y in b]
        return min(products), max(products)
    if a[0] is not None and b[0] is not None and a[0] >= 0 and b[0] >= 0:
        return a[0] * b[0], None
    return None, None


def _min(a: Bound, b: Bound, _rhs) -> Bound:
    lo = None if a[0] is None or b[0] is None else min(a[0], b[0])
    hi = b[1] if a[1] is None else a[1] if b[1] is None else min(a[1], b[1])
    return lo, hi


def _max(a: Bound, b: Bound, _rhs) -> Bound:
    lo = b[0] if a[0] is None else a[0] if b[0] is None else max(a[0], b[0])
    hi = None if a[1] is None or b[1] is None else max(a[1], b[1])
    return lo, hi


def _floordiv(a: Bound, _b: Bound, rhs) -> Bound:
    if not (isinstance(rhs, tir.IntImm) and rhs.value > 0):
        return None, None
    c = rhs.value
    return (None if a[0] is None else a[0] // c), (None if a[1] is None else a[1] // c)


def _floormod(_a: Bound, _b: Bound, rhs) -> Bound:
    if isinstance(rhs, tir.IntImm) and rhs.value > 0:
        return 0, rhs.value - 1
    return None, None


_BOUND_RULES = {"Add": _add, "Sub": _sub, "Mul": _mul, "Min": _min, "Max": _max,
                "FloorDiv": _floordiv, "FloorMod": _floormod}


def _plus(x, y):
    return None if x is None or y is None else x + y


def _neg(x):
    return None if x is None else -x


def _nonneg(e: tir.PrimExpr) -> bool:
    lo = bounds(tir.canonicalize(e))[0]
    return lo is not None and lo >= 0


def simplify(e: tir.PrimExpr) -> tir.PrimExpr:
    """``e`` with min/max folded where one side provably bounds the other, canonicalized."""
    if not isinstance(e, tir.BinaryOp) or not tir.is_int(e.dtype):
        return e
    a, b = simplify(e.a), simplify(e.b)
    if e.op in ("Min", "Max"):
        a_first = _nonneg(tir.BinaryOp("Sub", b, a))  # a <= b
        b_first = _nonneg(tir.BinaryOp("Sub", a, b))  # b <= a
        if a_first or b_first:
            return a if a_first == (e.op == "Min") else b
    return tir.binary(e.op, a, b)


def prove_equal(a, b) -> bool | None:
    """True: provably equal; False: provably different; None: neither can be proven."""
    a, b = tir.convert(a), tir.convert(b)
    if a == b:
        return True
    if not (tir.is_int(a.dtype) and tir.is_int(b.dtype)):
        return None
    lo, hi = bounds(tir.canonicalize(tir.BinaryOp("Sub", simplify(a), simplify(b))))
    if lo == 0 and hi == 0:
        return True
    if (lo is not None and lo > 0) or (hi is not None and hi < 0):
        return False
    return None


def annotation_mismatch(ann: StructInfo, inferred: StructInfo) -> str | None:
    """None when ``ann`` may annotate a value of struct info ``inferred`` (proven, or not
    disproven, dim by dim); otherwise what does not fit."""
    if is_base_of(ann, inferred):
        return None
    if isinstance(ann, TupleStructInfo) and isinstance(inferred, TupleStructInfo) and \
            len(ann.fields) == len(inferred.fields):
        for i, (x, y) in enumerate(zip(ann.fields, inferred.fields)):
            why = annotation_mismatch(x, y)
            if why is not None:
                return f"field {i}: {why}"
        return None
    if _same_kind_with_dims(ann, inferred):
        return _dims_mismatch(ann.values, inferred.values)
    return "not a base of it"


def _same_kind_with_dims(ann, inferred) -> bool:
    if not isinstance(ann, (TensorStructInfo, ShapeStructInfo)) or type(ann) is not \
            type(inferred) or ann.values is None or inferred.values is None:
        return False
    if isinstance(ann, TensorStructInfo) and ann.dtype not in ("void", inferred.dtype):
        return False
    return len(ann.values) == len(inferred.values)


def _dims_mismatch(ann_dims, dims) -> str | None:
    for i, (x, y) in enumerate(zip(ann_dims, dims)):
        if prove_equal(x, y) is False:
            diff = tir.canonicalize(tir.BinaryOp("Sub", simplify(x), simplify(y)))
            return (f"dim {i}: {tir.to_str(x)} == {tir.to_str(y)} is provably false "
                    f"(their difference {tir.to_str(diff)} is never 0)")
    return None
