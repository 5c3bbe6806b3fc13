"""Operators and intrinsic calls of TIR expressions, as tables of emitters
(``exprs.ExprEmitter`` calls them).

Integer division never traps: a 0 divisor gives 0 and INT_MIN / -1 wraps, as numpy does.
Float ``T.max`` / ``T.min`` are ``llvm.maximum`` / ``minimum``: NaN propagates as in numpy
(``maxnum`` reductions also trip an LLVM 22 vectorizer assertion at some trip counts);
``T.round`` rounds half to even (as TVM's LLVM codegen and numpy do).
"""

from __future__ import annotations

from llvmlite import ir

from ...errors import BuildError
from ...tir import expr as E
from ...tir.function import expr_children
from ...tir.intrin import PREDICATES
from . import math as M
from .dtypes import (
    AS_LT,
    COMPARE,
    F32,
    FM,
    I1,
    INLINE_F32,
    INT_BITWISE,
    LIBM,
    LLVM_UNARY,
    has_load,
    is_float,
    is_signed,
)

_FLOAT_ARITH = {
    "Add": lambda s, a, b: s.b.fadd(a, b, flags=FM),
    "Sub": lambda s, a, b: s.b.fsub(a, b, flags=FM),
    "Mul": lambda s, a, b: s.b.fmul(a, b, flags=FM),
    "Div": lambda s, a, b: s.b.fdiv(a, b, flags=FM),
    "FloorDiv": lambda s, a, b: s.intrinsic("llvm.floor", s.b.fdiv(a, b, flags=FM)),
    "FloorMod": lambda s, a, b: _float_floormod(s, a, b),
    "Mod": lambda s, a, b: s.b.frem(a, b),
    "Min": lambda s, a, b: s.intrinsic("llvm.minimum", a, b),
    "Max": lambda s, a, b: s.intrinsic("llvm.maximum", a, b),
}


def _float_floormod(s, a, b):
    """numpy's mod: fmod with the sign of the divisor."""
    r = s.b.frem(a, b)
    zero = ir.Constant(r.type, 0.0)
    fix = s.b.and_(s.b.fcmp_ordered("!=", r, zero),
                   s.b.xor(s.b.fcmp_ordered("<", r, zero), s.b.fcmp_ordered("<", b, zero)))
    return s.b.select(fix, s.b.fadd(r, b), r)


def _wrap_flags(s) -> tuple:
    return ("nsw",) if s.in_index else ()


def _int_div(s, a, b, signed: bool, kind: str):
    """Guarded integer division: kind is trunc | floor, returning (quotient, remainder)."""
    bld, ty = s.b, a.type
    zero, one = ir.Constant(ty, 0), ir.Constant(ty, 1)
    bad = bld.icmp_unsigned("==", b, zero)
    if signed:
        bad = bld.or_(bad, bld.icmp_signed("==", b, ir.Constant(ty, -1)))
    safe = bld.select(bad, one, b)
    q = bld.sdiv(a, safe) if signed else bld.udiv(a, safe)
    r = bld.srem(a, safe) if signed else bld.urem(a, safe)
    if signed and kind == "floor":
        fix = bld.and_(bld.icmp_signed("!=", r, zero),
                       bld.icmp_signed("<", bld.xor(r, b), zero))
        q = bld.sub(q, bld.zext(fix, ty))
        r = bld.add(r, bld.select(fix, b, zero))
    if signed:  # b == -1: q = -a (wrapping), r = 0
        neg1 = bld.icmp_signed("==", b, ir.Constant(ty, -1))
        q = bld.select(neg1, bld.sub(zero, a), q)
    is0 = bld.icmp_unsigned("==", b, zero)
    return bld.select(is0, zero, q), bld.select(bad, zero, r)


def _int_minmax(pred: str):
    def emit(s, a, b, dtype):
        cmp = s.b.icmp_signed(pred, a, b) if is_signed(dtype) else s.b.icmp_unsigned(pred, a, b)
        return s.b.select(cmp, a, b)
    return emit


_INT_ARITH = {
    "Add": lambda s, a, b, d: s.b.add(a, b, flags=_wrap_flags(s)),
    "Sub": lambda s, a, b, d: s.b.sub(a, b, flags=_wrap_flags(s)),
    "Mul": lambda s, a, b, d: s.b.mul(a, b, flags=_wrap_flags(s)),
    "Div": lambda s, a, b, d: _int_div(s, a, b, is_signed(d), "trunc")[0],
    "Mod": lambda s, a, b, d: _int_div(s, a, b, is_signed(d), "trunc")[1],
    "FloorDiv": lambda s, a, b, d: _int_div(s, a, b, is_signed(d), "floor")[0],
    "FloorMod": lambda s, a, b, d: _int_div(s, a, b, is_signed(d), "floor")[1],
    "Min": _int_minmax("<"),
    "Max": _int_minmax(">"),
}


def _common(a: str, b: str) -> str:
    """The dtype two comparison operands are compared in."""
    if a == b:
        return a
    if is_float(a) != is_float(b):
        return a if is_float(a) else b
    rank = ["bool", "uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64",
            "float16", "bfloat16", "float32", "float64"]
    return max(a, b, key=lambda d: rank.index(d) if d in rank else 0)


def _binary(s, e: E.BinaryOp) -> ir.Value:
    if e.op in ("And", "Or"):
        return _logical(s, e)
    if e.op in COMPARE:
        return _compare(s, e)
    dt = e.dtype
    a = s.coerce(s.expr(e.a), e.a.dtype, dt)
    b = s.coerce(s.expr(e.b), e.b.dtype, dt)
    if is_float(dt):
        return _FLOAT_ARITH[e.op](s, a, b)
    return _INT_ARITH[e.op](s, a, b, dt)


def _logical(s, e: E.BinaryOp) -> ir.Value:
    a, b = s.cond(e.a), s.cond(e.b)
    is_and = e.op == "And"
    for x, y in ((a, b), (b, a)):
        if isinstance(x, ir.Constant):
            if bool(x.constant) == is_and:
                return y  # True and y / False or y
            return x
    return s.b.and_(a, b) if is_and else s.b.or_(a, b)


def _compare(s, e: E.BinaryOp) -> ir.Value:
    if e.op in AS_LT and e.a.dtype != "bool" and not is_float(_common(e.a.dtype, e.b.dtype)) \
            and not (has_load(e.a) or has_load(e.b)) and s.proven(AS_LT[e.op](e.a, e.b)):
        return ir.Constant(I1, 1)
    dt = _common(e.a.dtype, e.b.dtype)
    a = s.coerce(s.expr(e.a), e.a.dtype, dt)
    b = s.coerce(s.expr(e.b), e.b.dtype, dt)
    op = COMPARE[e.op]
    if is_float(dt):
        return s.b.fcmp_unordered(op, a, b) if op == "!=" else s.b.fcmp_ordered(op, a, b)
    if is_signed(dt):
        return s.b.icmp_signed(op, a, b)
    return s.b.icmp_unsigned(op, a, b)


def _not(s, e: E.Not) -> ir.Value:
    v = s.cond(e.a)
    if isinstance(v, ir.Constant):
        return ir.Constant(I1, int(not v.constant))
    return s.b.xor(v, ir.Constant(I1, 1))


def _select(s, e: E.Select) -> ir.Value:
    cond = s.cond(e.cond)
    t = s.coerce(s.expr(e.true_value), e.true_value.dtype, e.dtype)
    f = s.coerce(s.expr(e.false_value), e.false_value.dtype, e.dtype)
    return s.b.select(cond, t, f)


def _cast(s, e: E.Cast) -> ir.Value:
    return s.coerce(s.expr(e.value), e.value.dtype, e.dtype)


# ------------------------------------------------------------------------------ intrinsics

def _if_then_else(s, e: E.PrimCall) -> ir.Value:
    """Both sides evaluated (loads clamped unless proven in range), then a select."""
    cond, t, f = e.args
    c = s.cond(cond)
    if isinstance(c, ir.Constant):
        taken = t if c.constant else f
        return s.coerce(s.expr(taken), taken.dtype, e.dtype)
    s.spec += 1
    try:
        tv = s.coerce(s.expr(t), t.dtype, e.dtype)
        fv = s.coerce(s.expr(f), f.dtype, e.dtype)
    finally:
        s.spec -= 1
    return s.b.select(c, tv, fv)


def _float_args(s, e: E.PrimCall) -> list:
    dt = e.dtype if is_float(e.dtype) else "float32"
    return [s.coerce(s.expr(a), a.dtype, dt) for a in e.args]


def _float_call(s, e: E.PrimCall) -> ir.Value:
    name = e.name
    args = _float_args(s, e)
    x = args[0]
    if x.type == F32 and name in INLINE_F32:
        return INLINE_F32[name](s.b, x)
    if x.type == F32 and name == "pow":  # float64 keeps libm pow
        uniform = not isinstance(args[1], ir.Constant) and _uniform(e.args[1])
        return (M.pow_uniform_f32 if uniform else M.pow_f32)(s.b, x, args[1])
    if name in LLVM_UNARY:
        return s.intrinsic(LLVM_UNARY[name], x)
    if name == "rsqrt":
        return s.b.fdiv(ir.Constant(x.type, 1.0), s.intrinsic("llvm.sqrt", x), flags=FM)
    if name == "sigmoid":
        e_neg = s.libm("exp", [s.b.fneg(x)])
        return s.b.fdiv(ir.Constant(x.type, 1.0), s.b.fadd(ir.Constant(x.type, 1.0), e_neg))
    if name == "exp10":
        return s.libm("pow", [ir.Constant(x.type, 10.0), x])
    if name == "copysign":
        return M.copysign(s.b, x, args[1])
    if name == "ldexp":
        return s.b.fmul(x, s.libm("exp2", [args[1]]))
    if name in LIBM:
        return s.libm(name, args)
    raise BuildError(f"the TIR compiler has no implementation of T.{name}",
                     hint="supported: " + ", ".join(sorted(set(LIBM) | set(INLINE_F32)
                                                           | set(LLVM_UNARY))))


def _uniform(e: E.PrimExpr) -> bool:
    """No var anywhere, buffer indices included: the same value on every loop iteration."""
    return not isinstance(e, E.Var) and all(_uniform(c) for c in expr_children(e))


def _predicate(s, e: E.PrimCall) -> ir.Value:
    (a,) = e.args
    if not is_float(a.dtype):
        return ir.Constant(I1, int(e.name == "isfinite"))
    x = s.expr(a)
    if e.name == "isnan":
        return s.b.fcmp_unordered("uno", x, x)
    inf = ir.Constant(x.type, float("inf"))
    ax = s.intrinsic("llvm.fabs", x)
    return s.b.fcmp_ordered("==" if e.name == "isinf" else "<", ax, inf)


def _int_call(s, e: E.PrimCall) -> ir.Value:
    dt = e.dtype
    if e.name in ("shift_left", "shift_right"):
        return _shift(s, e)
    args = [s.coerce(s.expr(a), a.dtype, dt) for a in e.args]
    bld = s.b
    if e.name in INT_BITWISE:
        return getattr(bld, INT_BITWISE[e.name])(*args)
    if e.name == "bitwise_not":
        return bld.not_(args[0])
    if e.name in ("abs", "fabs"):
        x = args[0]
        if not is_signed(dt):
            return x
        return bld.select(bld.icmp_signed("<", x, ir.Constant(x.type, 0)), bld.neg(x), x)
    if e.name == "popcount":
        return s.intrinsic("llvm.ctpop", args[0])
    if e.name == "pow":
        return int_pow(bld, *args, is_signed(dt))
    if e.name in ("floor", "ceil", "trunc", "round", "nearbyint"):
        return args[0]
    raise BuildError(f"T.{e.name} is not defined on integer dtype {dt}")


def int_pow(b: ir.IRBuilder, x: ir.Value, n: ir.Value, signed: bool) -> ir.Value:
    """x**n exactly as numpy's integer power: square-and-multiply in x's type, wrapping
    around (int32 50000**2 == -1794967296). The exponent's bits are unrolled into selects
    (no branch: the loop around vectorizes, LLVM folds a constant n). Cost: one step per bit
    whatever n is. 1M elements: int8..int32 take about numpy's time for small exponents,
    up to 20x less for large ones; int64 ~6x numpy's time for small exponents (63 steps of
    vector 64-bit multiplies), ~1/5 for large ones. An early-exit loop (tried) loses the
    vectorization: 2x slower for int32 x**3, 50x for x**(2**31 - 1).

    A negative n (numpy raises "Integers to negative integer powers are not allowed"; a
    kernel cannot) gives 1 / x**-n truncated toward zero: 1 for x == 1, +-1 for x == -1 by
    n's parity, 0 otherwise, 0**n included (integer division by 0 gives 0 here too)."""
    ty, one = x.type, ir.Constant(x.type, 1)
    result = _pow_unrolled(b, x, n, ty.width - 1 if signed and ty.width > 1 else ty.width)
    if not signed:
        return result
    unit = b.or_(b.icmp_signed("==", x, one), b.icmp_signed("==", x, ir.Constant(ty, -1)))
    odd = b.trunc(n, I1)
    negative = b.select(unit, b.select(odd, x, one), ir.Constant(ty, 0))
    return b.select(b.icmp_signed("<", n, ir.Constant(ty, 0)), negative, result)


def _pow_unrolled(b: ir.IRBuilder, x: ir.Value, n: ir.Value, bits: int) -> ir.Value:
    result, base = ir.Constant(x.type, 1), x
    for k in range(bits):
        bit = b.trunc(b.lshr(n, ir.Constant(x.type, k)), I1) if x.type.width > 1 else n
        result = b.select(bit, b.mul(result, base), result)
        if k + 1 < bits:
            base = b.mul(base, base)
    return result


def _shift(s, e: E.PrimCall) -> ir.Value:
    """numpy's shifts: an amount outside [0, bits) (negative included) shifts every bit out,
    giving 0, or -1 for a negative value shifted right. LLVM's shl / ashr / lshr by such an
    amount are poison, and x86 would shift by the amount mod bits."""
    a, n = e.args
    x = s.coerce(s.expr(a), a.dtype, e.dtype)
    raw = s.expr(n)
    amount = s.coerce(raw, n.dtype, e.dtype)
    # range-checked in the amount's own type (an int64 amount is not truncated first);
    # unsigned: a negative amount is huge
    bits = x.type.width
    ok = s.b.icmp_unsigned("<", raw, ir.Constant(raw.type, bits)) \
        if raw.type.width > bits else s.b.icmp_unsigned("<", amount, ir.Constant(x.type, bits))
    if e.name == "shift_right" and is_signed(e.dtype):
        return s.b.ashr(x, s.b.select(ok, amount, ir.Constant(x.type, bits - 1)))
    shifted = s.b.shl(x, amount) if e.name == "shift_left" else s.b.lshr(x, amount)
    return s.b.select(ok, shifted, ir.Constant(x.type, 0))


def _call(s, e: E.PrimCall) -> ir.Value:
    if e.name == "if_then_else":
        return _if_then_else(s, e)
    if e.name == "likely":
        return s.expr(e.args[0])
    if e.name in PREDICATES:
        return _predicate(s, e)
    if not e.args:
        raise BuildError(f"the TIR compiler cannot call T.{e.name}() without arguments")
    if is_float(e.dtype) or (e.name not in _INT_NAMES and is_float(e.args[0].dtype)):
        return _float_call(s, e)
    return _int_call(s, e)


_INT_NAMES = frozenset([*INT_BITWISE, "bitwise_not", "shift_left", "shift_right", "popcount"])

HANDLERS = {
    E.BinaryOp: _binary,
    E.Not: _not,
    E.Select: _select,
    E.Cast: _cast,
    E.PrimCall: _call,
}
