"""power / T.pow in compiled TIR: float32 is inline code (no powf call), checked against
float64 np.power in ulps, against numpy's float32 np.power on IEEE pow's special cases, for
constant exponents (immediates and scalar buffers), 16-bit floats, float64 and integers."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from msc.backend.legalize import legalize_call
from msc.backend.legalize.testing import build_call, check_op, kernel_jit
from msc.backend.lowering import math as tir_math
from msc.backend.lowering.codegen import codegen, ir_text
from msc.backend.lowering.compile import compile_prim_func
from msc.tir.parser import parse_tir_text

F32_MAX = float(np.finfo(np.float32).max)
RNG = np.random.default_rng(7)
# x and y of the special-case table: every pair is checked.
SPECIALS = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 0.75, np.inf, -np.inf,
            np.nan, 1e-45, -1e-45, 1e-40, 3e38, -3e38, 1e30, 1.0000001, 0.99999994, 16777217.0]


def _power_kernel(x: np.ndarray, y: np.ndarray):
    """The legalized relax power of arrays shaped like ``x`` and ``y``, compiled."""
    func = legalize_call(build_call("power", [x, y]))
    return compile_prim_func(func, jit=kernel_jit())


def _const_kernel(y: float, n: int, dtype: str = "float32"):
    """x**y with y a TIR immediate (what a legalization that inlines a scalar constant emits)."""
    text = f"""
@T.prim_func
def pow_const(x: T.Buffer((T.int64({n}),), "{dtype}"), out: T.Buffer((T.int64({n}),), "{dtype}")):
    for i in range(T.int64({n})):
        out[i] = T.pow(x[i], T.{dtype}({y!r}))
"""
    func = next(iter(parse_tir_text(text).values()))
    return func, compile_prim_func(func, jit=kernel_jit())


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in float32 ulps of want (want in float64); equal specials count 0, an
    inf or NaN mismatch counts inf. Results beyond float32's range must be inf."""
    got = got.astype(np.float64)
    want = np.where(np.abs(want) > F32_MAX, np.copysign(np.inf, want), want)
    finite = np.isfinite(want) & np.isfinite(got)
    spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    with np.errstate(invalid="ignore"):
        out = np.where(finite, np.abs(got - want) / np.where(finite, spacing, 1.0), np.inf)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    return np.where(same, 0.0, out)


def _wide(n: int, lo: float = -30, hi: float = 30) -> np.ndarray:
    """Magnitudes 10**lo .. 10**hi, random signs."""
    mag = 10.0 ** RNG.uniform(lo, hi, n)  # hi <= 38: no overflow to inf
    return (mag * RNG.choice([-1.0, 1.0], n)).astype(np.float32)


def _same_as_numpy(got: np.ndarray, x: np.ndarray, y) -> None:
    """got == numpy's float32 np.power: NaN where it is NaN, equal infinities and zeros with
    their sign, other values within 1 ulp (numpy's powf rounds within 1 ulp itself).
    y is a full array here: for a scalar (or stride-0) 0.5 numpy 2.4 takes sqrt (-0 at -0, NaN at -inf),
    not C pow's +0 and +inf, which the kernels follow."""
    with np.errstate(all="ignore"):
        want = np.power(x, np.full(x.shape, y, np.float32))  # a real array: no fast path
        ref = np.power(x.astype(np.float64), np.asarray(y, np.float32).astype(np.float64))
    for i in np.ndindex(got.shape):
        g, w = got[i], want[i]
        where = f"pow({x[i]!r}, {np.asarray(y)[i] if not np.isscalar(y) else y!r})"
        assert np.isnan(g) == np.isnan(w), f"{where}: {g} != numpy's {w}"
        if np.isnan(w):
            continue
        if np.isinf(w) or w == 0:
            assert g == w and np.signbit(g) == np.signbit(w), f"{where}: {g!r} != numpy's {w!r}"
        else:
            assert _ulps(np.asarray(g), np.asarray(ref[i])) <= 1.0, f"{where}: {g!r} vs {w!r}"


# --------------------------------------------------------------------- general exponents

def test_float32_power_is_inline_code():
    """No call to powf: the loop can vectorize."""
    x = np.zeros(8, np.float32)
    module, _ = codegen(legalize_call(build_call("power", [x, x])), "k")
    text = ir_text(module)
    assert "@powf" not in text and "@pow(" not in text


def test_power_within_one_ulp_of_float64_on_wide_ranges():
    """Random x over 1e-30 .. 1e30 (positive) and y in [-8, 8] with |y log2 x| up to ~800
    (overflow and underflow included): <= 0.53 ulp measured, 1 asserted."""
    x = np.abs(_wide(200_000, -30, 38))
    y = RNG.uniform(-8, 8, x.size).astype(np.float32)
    got = _power_kernel(x, y)(x, y)
    ref = np.power(x.astype(np.float64), y.astype(np.float64))
    assert _ulps(got, ref).max() <= 1.0


def test_power_near_the_overflow_threshold():
    """|y log2 x| close to 128 and -149 (the result's exponent range): 1 ulp."""
    x = RNG.uniform(1.5, 3.0, 100_000).astype(np.float32)
    t = RNG.uniform(-150, 128, x.size)
    y = (t / np.log2(x.astype(np.float64))).astype(np.float32)
    got = _power_kernel(x, y)(x, y)
    ref = np.power(x.astype(np.float64), y.astype(np.float64))
    assert _ulps(got, ref).max() <= 1.0


def test_negative_base_with_integer_exponents_has_a_sign():
    x = -np.abs(_wide(50_000, -4, 4))
    y = RNG.integers(-9, 10, x.size).astype(np.float32)
    got = _power_kernel(x, y)(x, y)
    ref = np.power(x.astype(np.float64), y.astype(np.float64))
    assert _ulps(got, ref).max() <= 1.0
    assert (np.signbit(got) == (y % 2 == 1)).all()


def test_negative_base_with_fractional_exponent_is_nan():
    x = -np.abs(_wide(1000, -4, 4))
    y = (RNG.integers(-9, 10, x.size) + 0.5).astype(np.float32)
    assert np.isnan(_power_kernel(x, y)(x, y)).all()


def test_special_value_table_matches_numpy():
    """Every (x, y) pair of SPECIALS, both tensors: numpy's float32 np.power exactly on
    NaN, infinities and signed zeros (pow(x, 0) = 1 even for NaN, pow(1, nan) = 1,
    pow(-0, -3) = -inf, pow(-inf, 0.5) = inf, pow(-1, inf) = 1, ...)."""
    pairs = list(itertools.product(SPECIALS, SPECIALS))
    x = np.array([p[0] for p in pairs], np.float32)
    y = np.array([p[1] for p in pairs], np.float32)
    _same_as_numpy(_power_kernel(x, y)(x, y), x, y)


# -------------------------------------------------------------------- constant exponents

CONSTANTS = [*tir_math.FAST_EXPONENTS, 1.5, -2.5, 0.3333, 7.0, -7.0, 1e-3, 40.0]


@pytest.mark.parametrize("y", CONSTANTS)
def test_immediate_exponent(y):
    """T.pow(x, T.float32(c)): the fast routes (powers by multiplication in double, roots
    by sqrt) and the general path with a constant y, on random x and the special values."""
    x = np.concatenate([_wide(20_000, -12, 12), np.array(SPECIALS, np.float32)])
    _, kernel = _const_kernel(y, x.size)
    got = kernel(x)
    with np.errstate(all="ignore"):
        ref = np.power(x.astype(np.float64), float(np.float32(y)))
    limit = 0.51 if y in tir_math.FAST_EXPONENTS else 0.6
    finite = np.isfinite(ref) & (np.abs(ref) <= F32_MAX)
    assert _ulps(got[finite], ref[finite]).max() <= limit
    _same_as_numpy(got[-len(SPECIALS):], x[-len(SPECIALS):], y)


@pytest.mark.parametrize("y", [2.0, 0.75, 0.5, 3.0, -1.0, 1.3])
def test_scalar_buffer_exponent(y):
    """relax power(x, const(c)): c is a 0-d buffer, read once per element; its fast routes
    are branches on c (unswitched out of the loop by LLVM). Also checks the general path."""
    x = np.concatenate([_wide(20_000, -12, 12), np.array(SPECIALS, np.float32)])
    yv = np.asarray(y, np.float32)
    got = _power_kernel(x, yv)(x, yv)
    with np.errstate(all="ignore"):
        ref = np.power(x.astype(np.float64), float(yv))
    finite = np.isfinite(ref) & (np.abs(ref) <= F32_MAX)
    assert _ulps(got[finite], ref[finite]).max() <= 0.6
    _same_as_numpy(got[-len(SPECIALS):], x[-len(SPECIALS):], y)


# ---------------------------------------------------------------------------- other dtypes

def test_float16_computes_in_float32():
    """float16 power: float32 pow rounded once to half, so equal to numpy's result in
    float32 rounded to half (within one half ulp: numpy's powf may round differently)."""
    x = RNG.uniform(0.05, 8, 5000).astype(np.float16)
    y = RNG.uniform(-3, 3, x.size).astype(np.float16)
    got = _power_kernel(x, y)(x, y).astype(np.float64)
    want = np.power(x.astype(np.float64), y.astype(np.float64)).astype(np.float16)
    spacing = np.spacing(np.abs(want)).astype(np.float64)
    assert (np.abs(got - want.astype(np.float64)) <= spacing).all()


def test_bfloat16_power():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = ml_dtypes.bfloat16
    x = RNG.uniform(0.05, 8, 2000).astype(bf16)
    y = RNG.uniform(-3, 3, x.size).astype(bf16)
    got = _power_kernel(x, y)(x, y).astype(np.float64)
    want = np.power(x.astype(np.float64), y.astype(np.float64))
    assert (np.abs(got - want) <= np.abs(want) * 2.0 ** -8).all()  # half a bfloat16 ulp


def test_float64_power_keeps_libm():
    x = 10.0 ** RNG.uniform(-100, 100, 10_000)
    y = RNG.uniform(-3, 3, x.size)
    got = _power_kernel(x, y)(x, y)
    want = np.power(x, y)
    assert np.all(np.abs(got - want) <= 2 * np.spacing(np.abs(want)))


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
def test_integer_power_small_values(dtype):
    """Integers are square-and-multiply in their own type (tests/backend/legalize/test_legalize_exact.py has
    the wrap-around and negative exponents)."""
    x = RNG.integers(0, 6, (4, 5)).astype(dtype)
    y = RNG.integers(0, 4, (4, 5)).astype(dtype)
    got, want = check_op("power", [x, y])
    assert got.dtype == want.dtype and (got == want).all()
