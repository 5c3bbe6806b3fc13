"""Symbolic scalar expressions (TIR PrimExpr subset) used for shapes and prim values.

Integer arithmetic is simplified on construction into a canonical sum of products, so shapes
that are equal compare equal (``n * 2 == 2 * n``, ``(n + 1) - 1 == n``) and print the way TVM
prints them (``n * 2``, ``T.min(a, b)``, ``n // 2``)::

    n = Var("n", "int64")
    assert (n + 1) * 2 - 2 == n * 2
    assert str(floordiv(n * 4, 2)) == "n * 2"
"""

from __future__ import annotations

import math

from ..errors import ValidationError

Number = int | float | bool

# Binary node kinds -> (printed operator or T.<func>, python folding fn). The kind names are the
# TIR type keys without "tir." (they become MSCPrim optypes).
_ARITH = {
    "Add": ("+", lambda a, b: a + b),
    "Sub": ("-", lambda a, b: a - b),
    "Mul": ("*", lambda a, b: a * b),
    "FloorDiv": ("//", lambda a, b: a // b),
    "FloorMod": ("%", lambda a, b: a % b),
    "Div": ("T.Div", lambda a, b: a / b if isinstance(a + b, float) else int(a / b)),
    "Mod": ("T.truncmod", lambda a, b: int(math.fmod(a, b))),
    "Min": ("T.min", min),
    "Max": ("T.max", max),
}
_COMPARE = {
    "EQ": ("==", lambda a, b: a == b), "NE": ("!=", lambda a, b: a != b),
    "LT": ("<", lambda a, b: a < b), "LE": ("<=", lambda a, b: a <= b),
    "GT": (">", lambda a, b: a > b), "GE": (">=", lambda a, b: a >= b),
    "And": ("and", lambda a, b: a and b), "Or": ("or", lambda a, b: a or b),
}
BINARY_KINDS = {**_ARITH, **_COMPARE}
# Printing precedence for infix operators (higher binds tighter).
_PREC = {"or": 1, "and": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3,
         "+": 4, "-": 4, "*": 5, "//": 5, "%": 5}


class PrimExpr:
    """Base of symbolic scalars. Immutable; equality is structural after simplification."""

    __slots__ = ("_key", "dtype")
    kind = "PrimExpr"

    def __setattr__(self, name, value):
        if hasattr(self, "_key"):
            raise AttributeError(f"{type(self).__name__} is immutable")
        object.__setattr__(self, name, value)

    # Arithmetic builds simplified expressions.
    @property
    def ty(self) -> PrimType:
        """TVM's ``expr.ty`` (its type; ``.dtype`` of it is the expression's dtype)."""
        return PrimType(self.dtype)

    def __and__(self, o): return _bitwise("bitwise_and", self, o)
    def __rand__(self, o): return _bitwise("bitwise_and", o, self)
    def __or__(self, o): return _bitwise("bitwise_or", self, o)
    def __ror__(self, o): return _bitwise("bitwise_or", o, self)
    def __lshift__(self, o): return _bitwise("shift_left", self, o)
    def __rlshift__(self, o): return _bitwise("shift_left", o, self)
    def __rshift__(self, o): return _bitwise("shift_right", self, o)
    def __rrshift__(self, o): return _bitwise("shift_right", o, self)

    def astype(self, dtype: str) -> PrimExpr:
        """``Cast(dtype, self)`` (TVM's ``expr.astype``; the same dtype gives ``self``)."""
        return self if dtype == self.dtype else Cast(dtype, self)

    def __add__(self, o): return add(self, o)
    def __radd__(self, o): return add(o, self)
    def __sub__(self, o): return sub(self, o)
    def __rsub__(self, o): return sub(o, self)
    def __mul__(self, o): return mul(self, o)
    def __rmul__(self, o): return mul(o, self)
    def __floordiv__(self, o): return floordiv(self, o)
    def __rfloordiv__(self, o): return floordiv(o, self)
    def __mod__(self, o): return floormod(self, o)
    def __rmod__(self, o): return floormod(o, self)
    def __neg__(self): return mul(self, -1)

    def __eq__(self, other) -> bool:
        if isinstance(other, bool):  # T.bool(True) == True, as in TVM
            return isinstance(self, IntImm) and self.dtype == "bool" and \
                bool(self.value) == other
        if isinstance(other, (int, float)):
            return isinstance(self, (IntImm, FloatImm)) and self.value == other
        return isinstance(other, PrimExpr) and self._key == other._key

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return to_str(self)

    __str__ = __repr__

    @property
    def is_const(self) -> bool:
        return isinstance(self, (IntImm, FloatImm))


class IntImm(PrimExpr):
    __slots__ = ("value",)
    kind = "Int"
    is_const = True  # shadows PrimExpr.is_const: read once per dim of every tensor

    def __init__(self, value: int, dtype: str = "int64"):
        if isinstance(value, str):  # TVM's argument order: IntImm("int8", 0)
            value, dtype = dtype, value
        object.__setattr__(self, "value", int(value))
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "_key", ("Int", int(value)))

    def __int__(self) -> int:
        return self.value

    __index__ = __int__

    def __bool__(self) -> bool:
        return bool(self.value)


class FloatImm(PrimExpr):
    __slots__ = ("value",)
    kind = "Float"
    is_const = True

    def __init__(self, value: float, dtype: str = "float32"):
        if isinstance(value, str):  # TVM's argument order: FloatImm("float16", 1.0)
            value, dtype = dtype, value
        object.__setattr__(self, "value", float(value))
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "_key", ("Float", float(value), dtype))

    def __float__(self) -> float:
        return self.value

    def __repr__(self) -> str:  # TVM's repr (str stays the bare value, as in expressions)
        return f"T.{self.dtype}({self.value!r})"


class Var(PrimExpr):
    """A named symbolic size (``T.int64()`` in TVMScript). Vars with the same name are equal."""

    __slots__ = ("name",)
    kind = "Var"

    def __init__(self, name: str, dtype: str = "int64", ty=None):  # ty: TVM's keyword
        if not isinstance(name, str) or not name:
            raise ValidationError(f"a symbolic var needs a non-empty name, got {name!r}")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "dtype", getattr(ty, "dtype", ty) or dtype)
        object.__setattr__(self, "_key", ("Var", name))

    @property
    def name_hint(self) -> str:
        return self.name


SizeVar = Var


class BinaryOp(PrimExpr):
    """``a <kind> b`` where kind is a TIR type key such as Add, FloorDiv, Min, LT."""

    __slots__ = ("a", "b", "op")

    def __init__(self, op: str, a: PrimExpr, b: PrimExpr, dtype: str | None = None):
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)
        bool_result = op in _COMPARE
        object.__setattr__(self, "dtype", dtype or ("bool" if bool_result else a.dtype))
        object.__setattr__(self, "_key", (op, a._key, b._key))

    @property
    def kind(self) -> str:
        return self.op


class Not(PrimExpr):
    __slots__ = ("a",)
    kind = "Not"

    def __init__(self, a: PrimExpr):
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "dtype", "bool")
        object.__setattr__(self, "_key", ("Not", a._key))


class Select(PrimExpr):
    """``T.Select(cond, t, f)`` / ``T.if_then_else``."""

    __slots__ = ("cond", "false_value", "true_value")
    kind = "if_then_else"

    def __init__(self, cond: PrimExpr, true_value: PrimExpr, false_value: PrimExpr):
        object.__setattr__(self, "cond", cond)
        object.__setattr__(self, "true_value", true_value)
        object.__setattr__(self, "false_value", false_value)
        object.__setattr__(self, "dtype", true_value.dtype)
        object.__setattr__(self, "_key", ("Select", cond._key, true_value._key,
                                          false_value._key))


class PrimType:
    """The type of a scalar expression (TVM's ``PrimType``): its dtype."""

    __slots__ = ("dtype",)

    def __init__(self, dtype: str):
        self.dtype = dtype

    def __eq__(self, other) -> bool:
        return isinstance(other, PrimType) and other.dtype == self.dtype

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"T.{self.dtype}"


def _bitwise(name: str, a, b) -> PrimExpr:
    """``a & b``, ``a << b``, ...: TIR's bitwise calls, in the dtype of the left operand."""
    a, b = convert(a), convert(b)
    return PrimCall(name, [a, b], a.dtype)


class Cast(PrimExpr):
    __slots__ = ("value",)
    kind = "Cast"

    def __init__(self, dtype: str, value: PrimExpr):
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "_key", ("Cast", dtype, value._key))


class PrimCall(PrimExpr):
    """A call to a TIR intrinsic by name, e.g. ``T.exp(x)`` (name ``"exp"``)."""

    __slots__ = ("args", "name")

    def __init__(self, name: str, args, dtype: str = "int64"):
        args = tuple(convert(a) for a in args)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "_key", ("Call", name, tuple(a._key for a in args)))

    @property
    def kind(self) -> str:
        return self.name


def convert(value) -> PrimExpr:
    """Python int/float/bool or PrimExpr -> PrimExpr."""
    if isinstance(value, PrimExpr):
        return value
    if type(value) is int and -1 <= value <= _SMALL_MAX:
        return _SMALL[value]  # one shared IntImm per small dim (they are immutable)
    if isinstance(value, bool):
        return IntImm(int(value), "bool")
    if isinstance(value, int) or _is_np_int(value):
        return IntImm(int(value))
    if isinstance(value, float) or _is_np_float(value):
        return FloatImm(float(value))
    raise ValidationError(f"cannot use {value!r} ({type(value).__name__}) as a symbolic scalar",
                          hint="use an int, a float or a tir.Var")


_SMALL_MAX = 1024
_SMALL = {v: IntImm(v) for v in range(-1, _SMALL_MAX + 1)}


def const(value, dtype: str | None = None) -> PrimExpr:
    """TVM's ``tir.const`` / ``te.const``: a typed constant (int32 and float32 by default)."""
    if isinstance(value, bool) or dtype == "bool":
        return IntImm(int(value), "bool")
    if dtype is not None and is_float(dtype) or dtype is None and isinstance(value, float):
        return FloatImm(float(value), dtype or "float32")
    return IntImm(int(value), dtype or "int32")


def is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def is_int(dtype: str) -> bool:
    return dtype.startswith(("int", "uint"))


INT64_MAX = 2 ** 63 - 1


def dim_problem(dim: PrimExpr, size: bool = True) -> str | None:
    """Why ``dim`` cannot be a tensor dim, or None: it must be integer typed and, when a
    constant ``size``, within 0 .. int64 max (parsers name the offending dim with this)."""
    if dim.dtype == "bool" or not is_int(dim.dtype):
        return f"must be an integer, got {dim.dtype}"
    if size and isinstance(dim, IntImm) and not 0 <= dim.value <= INT64_MAX:
        return f"{dim.value} is out of range (0 .. 2**63 - 1)"
    return None


def _is_np_int(value) -> bool:
    return hasattr(value, "dtype") and getattr(value.dtype, "kind", "") in "iu" and \
        getattr(value, "ndim", 1) == 0


def _is_np_float(value) -> bool:
    return hasattr(value, "dtype") and getattr(value.dtype, "kind", "") == "f" and \
        getattr(value, "ndim", 1) == 0


# --------------------------------------------------------------------------------------------
# Integer polynomials {monomial (sorted atom keys): coeff}; atoms (vars, floordivs, ...) in
# ``atoms`` as they first appear.

def _poly(e: PrimExpr, atoms: dict) -> dict:
    if isinstance(e, IntImm):
        return {(): e.value} if e.value else {}
    if isinstance(e, BinaryOp) and e.op in ("Add", "Sub", "Mul"):
        pa, pb = _poly(e.a, atoms), _poly(e.b, atoms)
        if e.op == "Mul":
            return _poly_mul(pa, pb)
        return _poly_add(pa, pb, 1 if e.op == "Add" else -1)
    atoms[e._key] = e
    return {(e._key,): 1}


def _poly_add(pa: dict, pb: dict, sign: int) -> dict:
    out = dict(pa)
    for m, c in pb.items():
        out[m] = out.get(m, 0) + sign * c
    return {m: c for m, c in out.items() if c}


def _poly_mul(pa: dict, pb: dict) -> dict:
    out: dict = {}
    for ma, ca in pa.items():
        for mb, cb in pb.items():
            m = tuple(sorted(ma + mb, key=repr))
            out[m] = out.get(m, 0) + ca * cb
    return {m: c for m, c in out.items() if c}


def _from_poly(poly: dict, atoms: dict, dtype: str) -> PrimExpr:
    """In TVM's canonical order: terms by descending scale, ties as they first appear, the
    constant last (``oh + kh`` is kept, ``n - 1`` stays a Sub)."""
    terms = sorted((m for m in poly if m), key=lambda m: -poly[m])
    const, result = poly.get((), 0), None
    if terms and poly[terms[0]] < 0 and const > 0:  # 4 - n rather than n * -1 + 4
        result, const = IntImm(const, dtype), 0
    for m in terms:
        coeff = poly[m]
        mono = _monomial(m, atoms, abs(coeff) if result is not None else coeff, dtype)
        if result is None:
            result = mono
        else:
            result = BinaryOp("Add" if coeff > 0 else "Sub", result, mono)
    if result is None:
        return IntImm(const, dtype)
    if const:
        result = BinaryOp("Add" if const > 0 else "Sub", result, IntImm(abs(const), dtype))
    return result


def _monomial(m: tuple, atoms: dict, coeff: int, dtype: str) -> PrimExpr:
    keys = sorted(m, key=list(atoms).index)  # atoms as they first appear
    expr: PrimExpr = atoms[keys[0]]
    for key in keys[1:]:
        expr = BinaryOp("Mul", expr, atoms[key])
    if coeff != 1:
        expr = BinaryOp("Mul", expr, IntImm(coeff, dtype))
    return expr


def _is_int_expr(e: PrimExpr) -> bool:
    return e.dtype.startswith(("int", "uint")) and not isinstance(e, FloatImm)


def canonicalize(e: PrimExpr) -> PrimExpr:
    if not _is_int_expr(e):
        return e
    atoms: dict = {}
    return _from_poly(_poly(e, atoms), atoms, e.dtype)


def _const_fold(op: str, a: PrimExpr, b: PrimExpr) -> PrimExpr | None:
    if not (a.is_const and b.is_const):
        return None
    if op in ("FloorDiv", "FloorMod", "Div", "Mod") and b.value == 0:
        raise ValidationError(f"symbolic expression divides by zero: {a} {op} 0")
    value = BINARY_KINDS[op][1](a.value, b.value)
    if op in _COMPARE:
        return IntImm(int(value), "bool")
    return FloatImm(value, a.dtype) if isinstance(value, float) else IntImm(value, a.dtype)


def _binary(op: str, a, b) -> PrimExpr:
    a, b = convert(a), convert(b)
    if is_float(a.dtype) != is_float(b.dtype) and "bool" not in (a.dtype, b.dtype):
        # TVM's BinaryOpMatchTypes: the int operand is cast to the float's dtype
        a, b = (a, Cast(a.dtype, b)) if is_float(a.dtype) else (Cast(b.dtype, a), b)
    folded = _const_fold(op, a, b)
    if folded is not None:
        return folded
    special = _SIMPLIFY.get(op)
    result = special(a, b) if special else None
    if result is not None:
        return result
    expr = BinaryOp(op, a, b)
    return canonicalize(expr) if op in ("Add", "Sub", "Mul") else expr


def _simplify_floordiv(a: PrimExpr, b: PrimExpr) -> PrimExpr | None:
    if b == 1:
        return a
    if isinstance(b, IntImm) and _is_int_expr(a):
        poly = _poly(a, atoms := {})
        if poly and all(c % b.value == 0 for m, c in poly.items() if m):  # (x*c + r) // c
            return _from_poly({m: c // b.value for m, c in poly.items()}, atoms, a.dtype)
    return None


def _simplify_floormod(a: PrimExpr, b: PrimExpr) -> PrimExpr | None:
    if b == 1:
        return IntImm(0, a.dtype)
    if isinstance(b, IntImm) and _is_int_expr(a):
        poly = _poly(a, {})
        if all(c % b.value == 0 for m, c in poly.items() if m):  # (x * c + r) % c is r % c
            return IntImm(poly.get((), 0) % b.value, a.dtype)
    return None


def _simplify_minmax(pick, dual: str):
    def simplify(a: PrimExpr, b: PrimExpr) -> PrimExpr | None:
        if a == b or isinstance(b, BinaryOp) and b.op == dual and a in (b.a, b.b):
            return a  # min(a, max(a, c)) is a (absorption; max(a, min(a, c)) too)
        if isinstance(a, BinaryOp) and a.op == dual and b in (a.a, a.b):
            return b
        diff = canonicalize(BinaryOp("Sub", a, b)) if _is_int_expr(a) else None
        if diff is not None and diff.is_const:
            return pick(a, b, diff.value)
        return None
    return simplify


_SIMPLIFY = {
    "FloorDiv": _simplify_floordiv,
    "FloorMod": _simplify_floormod,
    "Min": _simplify_minmax(lambda a, b, d: a if d <= 0 else b, "Max"),
    "Max": _simplify_minmax(lambda a, b, d: a if d >= 0 else b, "Min"),
}


def add(a, b) -> PrimExpr: return _binary("Add", a, b)
def sub(a, b) -> PrimExpr: return _binary("Sub", a, b)
def mul(a, b) -> PrimExpr: return _binary("Mul", a, b)
def floordiv(a, b) -> PrimExpr: return _binary("FloorDiv", a, b)
def floormod(a, b) -> PrimExpr: return _binary("FloorMod", a, b)
def truncdiv(a, b) -> PrimExpr: return _binary("Div", a, b)
def truncmod(a, b) -> PrimExpr: return _binary("Mod", a, b)
def min(a, b) -> PrimExpr: return _binary("Min", a, b)
def max(a, b) -> PrimExpr: return _binary("Max", a, b)
def binary(op: str, a, b) -> PrimExpr: return _binary(op, a, b)


def ceildiv(a, b) -> PrimExpr:
    """ceil(a / b) for non-negative sizes, written as TVM does: (a + b - 1) // b."""
    return floordiv(add(a, sub(b, 1)), b)


def if_then_else(cond, t, f) -> PrimExpr:
    cond, t, f = convert(cond), convert(t), convert(f)
    if cond.is_const:
        return t if cond.value else f
    return Select(cond, t, f)


def as_int(e) -> int | None:
    """The int value of a constant expression (or int), else None."""
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, int) and not isinstance(e, bool):
        return e
    return None


def free_vars(e: PrimExpr) -> list[Var]:
    """Vars of ``e`` in first-appearance order."""
    found: dict = {}
    _collect_vars(e, found)
    return list(found.values())


def _collect_vars(e: PrimExpr, found: dict) -> None:
    if isinstance(e, Var):
        found.setdefault(e.name, e)
    for child in children(e):
        _collect_vars(child, found)


def children(e: PrimExpr) -> tuple:
    if isinstance(e, BinaryOp):
        return (e.a, e.b)
    if isinstance(e, Select):
        return (e.cond, e.true_value, e.false_value)
    if isinstance(e, (Not,)):
        return (e.a,)
    if isinstance(e, Cast):
        return (e.value,)
    if isinstance(e, PrimCall):
        return e.args
    return ()


def substitute(e: PrimExpr, mapping: dict) -> PrimExpr:
    """Replace vars (by name or Var) with values, re-simplifying on the way up."""
    names = {(k.name if isinstance(k, Var) else k): convert(v) for k, v in mapping.items()}
    return _subst(convert(e), names)


def _subst(e: PrimExpr, names: dict) -> PrimExpr:
    if isinstance(e, Var):
        return names.get(e.name, e)
    if isinstance(e, BinaryOp):
        return _binary(e.op, _subst(e.a, names), _subst(e.b, names))
    if isinstance(e, Select):
        return if_then_else(*(_subst(c, names) for c in children(e)))
    if isinstance(e, Not):
        inner = _subst(e.a, names)
        return IntImm(int(not inner.value), "bool") if inner.is_const else Not(inner)
    if isinstance(e, Cast):
        inner = _subst(e.value, names)
        return convert(inner.value) if inner.is_const else Cast(e.dtype, inner)
    if isinstance(e, PrimCall):
        return PrimCall(e.name, [_subst(a, names) for a in e.args], e.dtype)
    return e


def evaluate(e, env: dict | None = None) -> Number:
    """Value of ``e`` with vars bound by ``env`` (name -> number); ValidationError if unbound."""
    result = substitute(e, env or {})
    if not result.is_const:
        missing = ", ".join(v.name for v in free_vars(result))
        raise ValidationError(f"symbolic expression {e} has unbound vars: {missing}",
                              hint="bind every symbolic dim (e.g. from the input shapes)")
    return result.value


# --------------------------------------------------------------------------------------------
# Printing (TVMScript style).

def to_str(e: PrimExpr, prefix: str = "T.") -> str:
    return _fmt(e, prefix, 0)


def _fmt(e: PrimExpr, p: str, parent_prec: int) -> str:
    if isinstance(e, IntImm):
        if e.dtype == "bool":
            return "True" if e.value else "False"
        return str(e.value) if e.value >= 0 or parent_prec == 0 else f"({e.value})"
    if isinstance(e, FloatImm):
        return repr(e.value)
    if isinstance(e, Var):
        return e.name
    if isinstance(e, BinaryOp):
        return _fmt_binary(e, p, parent_prec)
    if isinstance(e, Not):
        return f"not {_fmt(e.a, p, 6)}"
    if isinstance(e, Select):
        args = ", ".join(_fmt(c, p, 0) for c in children(e))
        return f"{p}Select({args})"
    if isinstance(e, Cast):
        return f'{p}Cast("{e.dtype}", {_fmt(e.value, p, 0)})'
    if isinstance(e, PrimCall):
        return f"{p}{e.name}({', '.join(_fmt(a, p, 0) for a in e.args)})"
    raise ValidationError(f"cannot print {type(e).__name__}")


def _fmt_binary(e: BinaryOp, p: str, parent_prec: int) -> str:
    sym = BINARY_KINDS[e.op][0]
    if sym.startswith("T."):
        return f"{p}{sym[2:]}({_fmt(e.a, p, 0)}, {_fmt(e.b, p, 0)})"
    prec = _PREC[sym]
    # Left-associative: the right operand needs parens at equal precedence.
    text = f"{_fmt(e.a, p, prec)} {sym} {_fmt(e.b, p, prec + 1)}"
    return f"({text})" if prec < parent_prec else text
