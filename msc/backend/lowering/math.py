"""Inline float32 math for generated kernels: straight-line IR that LLVM vectorizes.

A call to ``expf`` in a loop stops the loop vectorizer (there is no vector libm here), so exp,
exp2, log, tanh, erf and sigmoid are emitted as polynomial code on the spot: range reduction,
a Horner polynomial (``contract`` lets LLVM use FMAs) and exponent bit tricks. Accuracy against
float64, tested: exp/exp2/log/tanh ~1 ulp, erf <= 1.2 ulp; inf, NaN, zeros and denormals as
in libm. Every function takes and returns a scalar ``float`` value (exp / exp2 a vector of
floats too: a kernel's explicit vector loop, with its masked tail)::

    y = exp_f32(builder, x)

pow (``pow_f32``) is 2**(y log2|x|) with log2 and exp2 evaluated in double (float32's 24
bits would cost up to 126 * 2**-24 relative error at |y log2 x| = 126), then C99 pow's special
cases as selects: <= 0.53 ulp against float64, IEEE results on zeros, infinities and NaN.

Also here: float16 / bfloat16 <-> float32 by bit manipulation (round to nearest even), for
hosts whose LLVM cannot convert halves natively.
"""

from __future__ import annotations

import math

from llvmlite import ir

F32 = ir.FloatType()
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F64 = ir.DoubleType()
# Inside the approximations the evaluation order matters (Cody-Waite reduction): no reassoc.
_FM = ("contract",)

# Cephes expf / logf / tanhf polynomials; erf fitted here (Lawson minimax, relative error).
_EXP_P = (5.0000001201e-1, 1.6666665459e-1, 4.1665795894e-2, 8.3334519073e-3,
          1.3981999507e-3, 1.9875691500e-4)
_LN2_HI, _LN2_LO = 0.693359375, -2.12194440e-4
_LOG_P = (3.3333331174e-1, -2.4999993993e-1, 2.0000714765e-1, -1.6668057665e-1,
          1.4249322787e-1, -1.2420140846e-1, 1.1676998740e-1, -1.1514610310e-1,
          7.0376836292e-2)
_TANH_P = (-3.33332819422e-1, 1.33314422036e-1, -5.37397155531e-2, 2.06390887954e-2,
           -5.70498872745e-3)
# erf(x) = x + x * P(x^2) for |x| <= 1.
_ERF_SMALL = (0.12837916612625122, -0.3761262595653534, 0.1128358542919159,
              -0.026853812858462334, 0.005188327748328447, -0.0008010196033865213,
              7.853867282392457e-05)
# erf(x) = 1 - exp(-x^2) * Q(1/x) for 1 < x < 3.92 (Q ~ erfcx); erf rounds to 1 beyond.
_ERFC_Q = (0.00012927906936965883, 0.561625063419342, 0.0216111671179533,
           -0.38045158982276917, 0.24264107644557953, 0.21711306273937225,
           -0.5130419731140137, 0.4213338792324066, -0.17289328575134277,
           0.029516873881220818)
_ERF_ONE = 3.92


def fconst(value: float) -> ir.Constant:
    return ir.Constant(F32, value)


def like(x: ir.Value, value, scalar=F32) -> ir.Constant:
    """``value`` as a constant of ``scalar`` type, or its splat when ``x`` is a vector (exp
    and its helpers take a float or a vector of floats)."""
    if isinstance(x.type, ir.VectorType):
        return ir.Constant(ir.VectorType(scalar, x.type.count), [value] * x.type.count)
    return ir.Constant(scalar, value)


def _int_type(x: ir.Value) -> ir.Type:
    return ir.VectorType(I32, x.type.count) if isinstance(x.type, ir.VectorType) else I32


def declare(b: ir.IRBuilder, name: str, args) -> ir.Function:
    """An overloaded LLVM intrinsic on the type of ``args[0]`` taking ``len(args)`` args."""
    ty = args[0].type
    fnty = ir.FunctionType(ty, [a.type for a in args])
    if not isinstance(ty, ir.VectorType):
        return b.module.declare_intrinsic(name, [ty], fnty)
    full = f"{name}.v{ty.count}{ty.element.intrinsic_name}"  # llvmlite names scalars only
    return b.module.globals.get(full) or ir.Function(b.module, fnty, name=full)


def _intrinsic(b: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
    return b.call(declare(b, name, args), args, fastmath=_FM)


def _fmul(b, x, y):
    return b.fmul(x, y, flags=_FM)


def _fadd(b, x, y):
    return b.fadd(x, y, flags=_FM)


def _fsub(b, x, y):
    return b.fsub(x, y, flags=_FM)


def horner(b: ir.IRBuilder, x: ir.Value, coeffs) -> ir.Value:
    """coeffs[0] + coeffs[1] x + ... evaluated from the highest term."""
    acc = like(x, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = _fadd(b, _fmul(b, acc, x), like(x, c))
    return acc


def _pow2(b: ir.IRBuilder, n: ir.Value) -> ir.Value:
    """2**n for an i32 n in the normal exponent range."""
    bits = b.shl(b.add(n, like(n, 127, I32)), like(n, 23, I32))
    return b.bitcast(bits, ir.VectorType(F32, n.type.count)
                     if isinstance(n.type, ir.VectorType) else F32)


def _scale(b: ir.IRBuilder, y: ir.Value, n_float: ir.Value) -> ir.Value:
    """y * 2**n in two halves, so results in the denormal and top range stay exact."""
    n = b.fptosi(n_float, _int_type(n_float))
    n1 = b.ashr(n, like(n, 1, I32))
    n2 = b.sub(n, n1)
    return _fmul(b, _fmul(b, y, _pow2(b, n1)), _pow2(b, n2))


_SCALEF = "llvm.x86.avx512.mask.scalef.ps.512"


def _has(feature: str) -> bool:
    """Whether the (capped) host target has ``feature``: instructions are picked at build."""
    from ..llvm.jit import host_target  # lowering is imported by the JIT's own users

    return host_target().has(feature)


def _scalef(b: ir.IRBuilder, y: ir.Value, n_float: ir.Value) -> ir.Value | None:
    """y * 2**n by AVX-512's scalef (one rounding, denormal results and overflow included;
    NaN stays NaN) for 16-lane vectors on a host that has it, else None: one instruction
    where _scale and the NaN select take eleven, a third of an exp's (exp 1.4x, sigmoid and
    silu 1.25x, gelu 1.1x faster)."""
    if not (isinstance(y.type, ir.VectorType) and y.type.count == 16 and _has("avx512f")):
        return None
    fn = b.module.globals.get(_SCALEF) or ir.Function(b.module, ir.FunctionType(
        y.type, [y.type] * 3 + [I16, I32]), name=_SCALEF)
    return b.call(fn, [y, n_float, like(y, 0.0), ir.Constant(I16, -1),
                       ir.Constant(I32, 4)])  # 4: the current rounding mode


def _exp_poly(b: ir.IRBuilder, r: ir.Value) -> ir.Value:
    """e**r for |r| <= ln2/2."""
    r2 = _fmul(b, r, r)
    p = horner(b, r, _EXP_P)
    return _fadd(b, _fadd(b, _fmul(b, p, r2), r), like(r, 1.0))


def _clamp(b: ir.IRBuilder, x: ir.Value, lo: float, hi: float) -> ir.Value:
    x = b.select(b.fcmp_ordered("<", x, like(x, lo)), like(x, lo), x)
    return b.select(b.fcmp_ordered(">", x, like(x, hi)), like(x, hi), x)


def _keep_nan(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.fcmp_unordered("uno", x, x), x, y)


def exp_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """e**x: n = round(x / ln2), r = x - n ln2 (two-part ln2), e**r by polynomial, times 2**n.
    x is clamped to [-104, 89]: beyond it the result is 0 or overflows to inf anyway."""
    xc = _clamp(b, x, -104.0, 89.0)
    n = _intrinsic(b, "llvm.roundeven", _fmul(b, xc, like(x, 1 / math.log(2))))
    r = _fsub(b, _fsub(b, xc, _fmul(b, n, like(x, _LN2_HI))), _fmul(b, n, like(x, _LN2_LO)))
    poly = _exp_poly(b, r)
    fast = _scalef(b, poly, n)
    return fast if fast is not None else _keep_nan(b, x, _scale(b, poly, n))


def exp2_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    xc = _clamp(b, x, -151.0, 129.0)
    n = _intrinsic(b, "llvm.roundeven", xc)
    r = _fmul(b, _fsub(b, xc, n), like(x, math.log(2)))
    poly = _exp_poly(b, r)
    fast = _scalef(b, poly, n)
    return fast if fast is not None else _keep_nan(b, x, _scale(b, poly, n))


def log_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """ln x = e ln2 + ln m with m in [sqrt(1/2), sqrt(2)) from the float's bits."""
    denormal = b.fcmp_ordered("<", x, fconst(1.1754943508222875e-38))
    xs = b.select(denormal, _fmul(b, x, fconst(2.0 ** 23)), x)
    bits = b.bitcast(xs, I32)
    exp = b.sub(b.lshr(bits, ir.Constant(I32, 23)), ir.Constant(I32, 126))
    exp = b.sub(exp, b.select(denormal, ir.Constant(I32, 23), ir.Constant(I32, 0)))
    mant = b.bitcast(b.or_(b.and_(bits, ir.Constant(I32, 0x007FFFFF)),
                           ir.Constant(I32, 0x3F000000)), F32)  # [0.5, 1)
    e = b.sitofp(exp, F32)
    small = b.fcmp_ordered("<", mant, fconst(0.707106781186547524))
    e = b.select(small, _fsub(b, e, fconst(1.0)), e)
    m = b.select(small, _fsub(b, _fadd(b, mant, mant), fconst(1.0)), _fsub(b, mant, fconst(1.0)))
    z = _fmul(b, m, m)
    y = _fmul(b, _fmul(b, horner(b, m, _LOG_P), m), z)
    y = _fadd(b, y, _fmul(b, e, fconst(_LN2_LO)))
    y = _fsub(b, y, _fmul(b, z, fconst(0.5)))
    r = _fadd(b, _fadd(b, m, y), _fmul(b, e, fconst(_LN2_HI)))
    r = b.select(b.fcmp_ordered("==", x, fconst(math.inf)), x, r)
    r = b.select(b.fcmp_ordered("<", x, fconst(0.0)), fconst(math.nan), r)
    r = b.select(b.fcmp_ordered("==", x, fconst(0.0)), fconst(-math.inf), r)
    return _keep_nan(b, x, r)


def fabs(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return _intrinsic(b, "llvm.fabs", x)


def copysign(b: ir.IRBuilder, mag: ir.Value, sign: ir.Value) -> ir.Value:
    return b.call(declare(b, "llvm.copysign", [mag, sign]), [mag, sign])


def tanh_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Odd polynomial for |x| < 0.625, else 1 - 2 / (e**2|x| + 1) with x's sign."""
    ax = fabs(b, x)
    e = exp_f32(b, _fmul(b, ax, like(x, 2.0)))
    big = _fsub(b, like(x, 1.0), b.fdiv(like(x, 2.0), _fadd(b, e, like(x, 1.0)), flags=_FM))
    z = _fmul(b, x, x)
    small = _fadd(b, _fmul(b, _fmul(b, x, z), horner(b, z, _TANH_P)), x)
    return b.select(b.fcmp_ordered("<", ax, like(x, 0.625)), small, copysign(b, big, x))


def erf_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    ax = fabs(b, x)
    z = _fmul(b, x, x)
    small = _fadd(b, _fmul(b, x, horner(b, z, _ERF_SMALL)), x)
    q = horner(b, b.fdiv(like(x, 1.0), ax, flags=_FM), _ERFC_Q)
    tail = _fsub(b, like(x, 1.0), _fmul(b, exp_f32(b, _fsub(b, like(x, 0.0), z)), q))
    tail = b.select(b.fcmp_ordered(">=", ax, like(x, _ERF_ONE)), like(x, 1.0), tail)
    return b.select(b.fcmp_ordered("<=", ax, like(x, 1.0)), small, copysign(b, tail, x))


def sigmoid_f32(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """1 / (1 + e**-x) for x >= 0, e**x / (1 + e**x) below: no overflow, and the tail keeps
    its relative accuracy (down to denormals)."""
    e = exp_f32(b, _fsub(b, like(x, 0.0), fabs(b, x)))
    num = b.select(b.fcmp_ordered("<", x, like(x, 0.0)), e, like(x, 1.0))
    return b.fdiv(num, _fadd(b, like(x, 1.0), e), flags=_FM)


# -------------------------------------------------------------------------------- pow

# Near-minimax fits (Lawson, relative error), for pow's float64 core:
# log2(m) = s * R(s*s), s = (m - 1) / (m + 1), m in [sqrt(1/2), sqrt(2)): 4.3e-12;
# 2**r for |r| <= 1/2: 1.9e-9 (0.03 float32 ulp).
_LOG2_R = (2.8853900817902534, 0.9617966731194317, 0.5770836285804156, 0.4116700344777943,
           0.3407810074481082)
_EXP2_P = (1.0000000005308785, 0.6931472058201575, 0.24022647063761837, 0.05550328643291654,
           0.009618470187291188, 0.0013399974155533546, 0.0001535086582042236)


def _dconst(value: float) -> ir.Constant:
    return ir.Constant(F64, value)


def _dhorner(b: ir.IRBuilder, x: ir.Value, coeffs) -> ir.Value:
    acc = _dconst(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = _fadd(b, _fmul(b, acc, x), _dconst(c))
    return acc


def _log2_f64(b: ir.IRBuilder, ax: ir.Value) -> ir.Value:
    """log2 of a positive finite float32 ``ax`` widened to double (float32 denormals are
    normal doubles): exponent from the bits, then an atanh series of the mantissa."""
    bits = b.bitcast(ax, I64)
    e = b.sub(b.lshr(bits, ir.Constant(I64, 52)), ir.Constant(I64, 1023))
    m = b.bitcast(b.or_(b.and_(bits, ir.Constant(I64, (1 << 52) - 1)),
                        ir.Constant(I64, 0x3FF0000000000000)), F64)  # [1, 2)
    big = b.fcmp_ordered(">", m, _dconst(math.sqrt(2.0)))
    m = b.select(big, _fmul(b, m, _dconst(0.5)), m)
    e = b.add(e, b.zext(big, I64))
    s = b.fdiv(_fsub(b, m, _dconst(1.0)), _fadd(b, m, _dconst(1.0)), flags=_FM)
    return _fadd(b, b.sitofp(e, F64), _fmul(b, s, _dhorner(b, _fmul(b, s, s), _LOG2_R)))


def _exp2_to_f32(b: ir.IRBuilder, t: ir.Value) -> ir.Value:
    """2**t for a double t, rounded once to float32 (inf above, denormals and 0 below)."""
    t = b.select(b.fcmp_ordered("<", t, _dconst(-200.0)), _dconst(-200.0), t)
    t = b.select(b.fcmp_ordered(">", t, _dconst(200.0)), _dconst(200.0), t)
    n = _intrinsic(b, "llvm.roundeven", t)
    p = _dhorner(b, _fsub(b, t, n), _EXP2_P)
    scale = b.bitcast(b.shl(b.add(b.fptosi(n, I64), ir.Constant(I64, 1023)),
                            ir.Constant(I64, 52)), F64)
    return b.fptrunc(_fmul(b, p, scale), F32)


def _is_int(b: ir.IRBuilder, y: ir.Value) -> ir.Value:
    """y is an integer (infinities count: they are even)."""
    return b.fcmp_ordered("==", _intrinsic(b, "llvm.trunc", y), y)


def pow_f32(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """x**y as C's powf, inline: 2**(y log2|x|) in double (<= 0.55 ulp), then the IEEE
    special cases. A constant y takes a cheaper route (:func:`pow_const_f32`)."""
    if isinstance(y, ir.Constant) and (fast := pow_const_f32(b, x, float(y.constant))):
        return fast
    ax = fabs(b, x)
    lg = _log2_f64(b, b.fpext(ax, F64))
    lg = b.select(b.fcmp_ordered("==", ax, fconst(0.0)), _dconst(-math.inf), lg)
    lg = b.select(b.fcmp_ordered("==", ax, fconst(math.inf)), _dconst(math.inf), lg)
    r = _exp2_to_f32(b, _fmul(b, b.fpext(y, F64), lg))
    half = _fmul(b, y, fconst(0.5))
    odd = b.and_(_is_int(b, y), b.fcmp_unordered("!=", _intrinsic(b, "llvm.trunc", half), half))
    neg = b.icmp_signed("<", b.bitcast(x, I32), ir.Constant(I32, 0))  # -0.0 included
    r = b.select(b.and_(neg, odd), b.fneg(r), r)
    finite_neg = b.and_(b.fcmp_ordered("<", x, fconst(0.0)),
                        b.fcmp_ordered(">", x, fconst(-math.inf)))
    r = b.select(b.and_(finite_neg, b.not_(_is_int(b, y))), fconst(math.nan), r)
    r = b.select(b.fcmp_unordered("uno", x, y), fconst(math.nan), r)
    unit = b.and_(b.fcmp_ordered("==", ax, fconst(1.0)),
                  b.fcmp_ordered("==", fabs(b, y), fconst(math.inf)))
    one = b.or_(b.or_(unit, b.fcmp_ordered("==", x, fconst(1.0))),
                b.fcmp_ordered("==", y, fconst(0.0)))
    return b.select(one, fconst(1.0), r)


def _powi(b: ir.IRBuilder, x: ir.Value, n: int) -> ir.Value:
    """x**n for 1 <= |n| <= 4 by multiplication: x*x in float32 (exact rounding already),
    the rest in double, where x**4 and 1/x**4 of any float32 neither overflow nor lose bits,
    so one final rounding gives <= 0.5 ulp and IEEE pow's zeros, infinities and signs."""
    if n == 1:
        return x
    if n == 2:
        return _fmul(b, x, x)
    xd = b.fpext(x, F64)
    acc = xd
    for _ in range(abs(n) - 1):
        acc = _fmul(b, acc, xd)
    if n < 0:
        acc = b.fdiv(_dconst(1.0), acc, flags=_FM)
    return b.fptrunc(acc, F32)


def _root_pow(b: ir.IRBuilder, x: ir.Value, quarters: int) -> ir.Value:
    """x**(q/4) for q in (1, 2, 3, -2) from square roots, with pow's +0 at -0 and +inf at
    -inf (where sqrt gives -0 and NaN). Only x**0.5 is one float32 rounding; the others take
    two or three (up to 3.5 ulp) and run in double instead: one final rounding."""
    xd = x if quarters == 2 else b.fpext(x, F64)
    r2 = _intrinsic(b, "llvm.sqrt", xd)
    r = r2 if abs(quarters) == 2 else _intrinsic(b, "llvm.sqrt", r2)
    if quarters == 3:
        r = _fmul(b, r, r2)
    if quarters < 0:
        r = b.fdiv(ir.Constant(r.type, 1.0), r, flags=_FM)
    r = fabs(b, r if r.type == F32 else b.fptrunc(r, F32))
    at_neg_inf = fconst(0.0 if quarters < 0 else math.inf)
    return b.select(b.fcmp_ordered("==", x, fconst(-math.inf)), at_neg_inf, r)


# The constant exponents :func:`pow_const_f32` computes without log / exp (<= 1 ulp).
FAST_EXPONENTS = (0.0, 1.0, 2.0, 3.0, 4.0, -1.0, -2.0, -3.0, -4.0, 0.5, -0.5, 0.25, 0.75)
# The ones a uniform runtime exponent branches to: LLVM unswitches two or three such branches
# out of a loop; with four it gave up and the loop stayed scalar (LLVM 22).
UNIFORM_EXPONENTS = (2.0, 0.75, 0.5)


def pow_const_f32(b: ir.IRBuilder, x: ir.Value, y: float) -> ir.Value | None:
    """x**y for the exponents of :data:`FAST_EXPONENTS`, else None."""
    if y == 0.0:
        return fconst(1.0)  # even for NaN
    if y in (0.25, 0.5, 0.75, -0.5):
        return _root_pow(b, x, int(y * 4))
    if y.is_integer() and abs(y) <= 4:
        return _powi(b, x, int(y))
    return None


def pow_uniform_f32(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """x**y for a y that is the same on every iteration (a scalar buffer): branches on y's
    value, which LLVM's loop unswitching hoists out of the loop, leaving one vectorized loop
    per :data:`UNIFORM_EXPONENTS` entry and the general one."""
    return _pow_branches(b, x, y, UNIFORM_EXPONENTS)


def _pow_branches(b: ir.IRBuilder, x: ir.Value, y: ir.Value, cases) -> ir.Value:
    if not cases:
        return pow_f32(b, x, y)
    with b.if_else(b.fcmp_ordered("==", y, fconst(cases[0]))) as (then, other):
        with then:
            fast, fast_block = pow_const_f32(b, x, cases[0]), b.block
        with other:
            rest, rest_block = _pow_branches(b, x, y, cases[1:]), b.block
    out = b.phi(F32)
    out.add_incoming(fast, fast_block)
    out.add_incoming(rest, rest_block)
    return out


# ------------------------------------------------------------------- 16-bit float storage

def bf16_to_f32(b: ir.IRBuilder, bits16: ir.Value) -> ir.Value:
    wide = b.shl(b.zext(bits16, I32), ir.Constant(I32, 16))
    return b.bitcast(wide, F32)


def f32_to_bf16(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Round to nearest even; NaN stays a (quiet) NaN."""
    bits = b.bitcast(x, I32)
    lsb = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
    rounded = b.add(bits, b.add(lsb, ir.Constant(I32, 0x7FFF)))
    nan = b.or_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 0x40))
    out = b.select(b.fcmp_unordered("uno", x, x), nan, b.lshr(rounded, ir.Constant(I32, 16)))
    return b.trunc(out, I16)


def f16_to_f32(b: ir.IRBuilder, bits16: ir.Value) -> ir.Value:
    """IEEE half bits -> float, denormals and inf/NaN included (no F16C needed)."""
    h = b.zext(bits16, I32)
    sign = b.shl(b.and_(h, ir.Constant(I32, 0x8000)), ir.Constant(I32, 16))
    mag = b.and_(h, ir.Constant(I32, 0x7FFF))
    # Normal and denormal: shift into place and rescale by 2**112 (exponent bias difference).
    scaled = _fmul(b, b.bitcast(b.shl(mag, ir.Constant(I32, 13)), F32), fconst(2.0 ** 112))
    special = b.or_(b.shl(mag, ir.Constant(I32, 13)), ir.Constant(I32, 0x7F800000))
    is_special = b.icmp_unsigned(">=", mag, ir.Constant(I32, 0x7C00))
    out = b.select(is_special, special, b.bitcast(scaled, I32))
    return b.bitcast(b.or_(out, sign), F32)


def f32_to_f16(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """float -> IEEE half bits, round to nearest even, overflow to inf, NaN kept."""
    bits = b.bitcast(x, I32)
    sign = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 0x8000))
    ax = fabs(b, x)
    # Scaling by 2**-112 moves half's exponent range onto float's; rounding then happens in
    # the float add below (the magic constant makes the 10 kept mantissa bits land in place).
    small = b.fcmp_ordered("<", ax, fconst(2.0 ** -14))
    den = b.bitcast(_fadd(b, ax, fconst(0.5)), I32)
    den = b.sub(den, ir.Constant(I32, 0x3F000000))
    norm = b.bitcast(_fmul(b, ax, fconst(2.0 ** -112)), I32)
    odd = b.and_(b.lshr(norm, ir.Constant(I32, 13)), ir.Constant(I32, 1))
    norm = b.lshr(b.add(norm, b.add(odd, ir.Constant(I32, 0xFFF))), ir.Constant(I32, 13))
    norm = b.select(b.icmp_unsigned(">", norm, ir.Constant(I32, 0x7C00)),
                    ir.Constant(I32, 0x7C00), norm)
    out = b.select(small, den, norm)
    out = b.select(b.fcmp_unordered("uno", x, x), ir.Constant(I32, 0x7E00), out)
    return b.trunc(b.or_(out, sign), I16)
