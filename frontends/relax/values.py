"""Relax values as MSC attr strings (msc-conventions 1.2).

Call attrs, and the arguments that become attrs (ShapeExpr, PrimValue, tuples of them,
strings, dtypes), are encoded the way MSC's ``StringUtils::ToString`` does: lists
comma-joined with a trailing comma for one element, floats with 6 decimals, bools 0/1, None
and the void dtype as ``""``. A symbolic dim is ``-1``; the tensor's prims name it::

    call_attrs(conv)                  # {"strides": "1,1", "padding": "0,0,0,0", ...}
    arg_attr(R.shape([1, 6, 1, 1]))   # "1,6,1,1"
    fused_attrs([perm, perm, perm, attention, perm])["axes_3"]
"""

from __future__ import annotations

from msc.graph import encode_attr
from msc.relax.expr import (
    Call,
    Constant,
    DataTypeImm,
    Expr,
    PrimValue,
    ShapeExpr,
    StringImm,
    Tuple,
)
from msc.tir import expr as tir

__all__ = ["arg_attr", "arg_scalars", "call_attrs", "fused_attrs", "is_attr_arg", "scalar_attr"]

_VOID = "void"


def _plain(value):
    """A Relax attr value as a plain Python value encode_attr understands."""
    if isinstance(value, tir.PrimExpr):
        return value.value if value.is_const else -1
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Expr):
        return arg_attr(value)
    return value


def attr_string(value) -> str:
    value = _plain(value)
    if isinstance(value, str) and value == _VOID:
        return ""
    try:
        return encode_attr(value)
    except Exception:  # noqa: BLE001 - an exotic attr (an index map...) prints as itself
        return str(value)


def call_attrs(call: Call) -> dict[str, str]:
    """The attrs of one call, in declaration order."""
    return {k: attr_string(v) for k, v in (call.attrs or {}).items()}


def fused_attrs(calls) -> dict[str, str]:
    """The union of the attrs of ``calls`` (in order); a repeated key gets ``_1``, ``_2``...
    (MSC's FuncAttrGetter)."""
    merged: dict[str, str] = {}
    for call in calls:
        for key, value in call_attrs(call).items():
            unique, k = key, 0
            while unique in merged:
                k += 1
                unique = f"{key}_{k}"
            merged[unique] = value
    return merged


_ATTR_ARGS = (ShapeExpr, PrimValue, Tuple, StringImm, DataTypeImm)


def is_attr_arg(expr: Expr) -> bool:
    """Whether an argument becomes an attr rather than an input or a weight."""
    if isinstance(expr, Tuple):
        return all(is_attr_arg(f) for f in expr.fields)
    return isinstance(expr, _ATTR_ARGS)


_ARG_VALUES = {
    ShapeExpr: lambda e: [_plain(v) for v in e.values],
    PrimValue: lambda e: _plain(e.value),
    Tuple: lambda e: [_arg_value(f) for f in e.fields],
    StringImm: lambda e: e.value,
    DataTypeImm: lambda e: "" if e.value == _VOID else e.value,
}


def _arg_value(expr: Expr):
    return _ARG_VALUES[type(expr)](expr)


def arg_scalars(expr: Expr) -> list:
    """The scalars of an attr-like argument, flattened (PrimExprs where symbolic)."""
    if isinstance(expr, ShapeExpr):
        return list(expr.values)
    if isinstance(expr, PrimValue):
        return [expr.value]
    if isinstance(expr, Tuple):
        return [v for f in expr.fields for v in arg_scalars(f)]
    return []


def arg_attr(expr: Expr) -> str:
    """An attr-like argument (see ``is_attr_arg``) as an attr string."""
    return attr_string(_arg_value(expr))


def scalar_attr(const: Constant, precision: int = 6) -> str | None:
    """A 0-d constant's value as MSC writes it (``"%.<precision>f"``), else None."""
    if const.data.ndim != 0:
        return None
    return f"{float(const.data):.{precision}f}"
