"""Compiled kernels that must equal numpy exactly where they used to approximate or decline:
dynamic_strided_slice with constant begin / end / strides (its shape is inferred, so it runs
through TIR), and integer power (square-and-multiply with numpy's wrap-around)."""

from __future__ import annotations

import numpy as np
import pytest

from msc import relax
from msc.backend.legalize import legalize_call
from msc.backend.legalize.testing import build_call, check_op, kernel_jit
from msc.backend.lowering.compile import compile_prim_func
from msc.errors import ShapeError
from msc.relax.block_builder import BlockBuilder
from msc.relax.op.registry import make_call
from msc.relax.struct_info import TensorStructInfo
from msc.tir import expr as tir

RNG = np.random.default_rng(3)
N = tir.Var("n", "int64")


def _consts(*specs):
    return [relax.const(np.array(v, "int64")) for v in specs]


def _slice(x, begin, end, strides):
    return x[tuple(slice(*bes) for bes in zip(begin, end, strides))]


def _build(x_sinfo, specs):
    x = relax.Var("x", x_sinfo)
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(make_call("dynamic_strided_slice", x, *_consts(*specs)))
        bb.emit_func_output(out)
    ex = relax.build(bb.get(), legalize="prefer")
    return ex, relax.VirtualMachine(ex)["main"]


# ------------------------------------------------------------------------ dynamic_strided_slice

SPECS = [
    ([0, 1, 0], [4, 3, 5], [1, 1, 2]), ([-1, 0, 4], [-5, 3, -6], [-1, 2, -2]),
    ([-100, 2], [100, 3], [3, 1]), ([1], [3], [1]), ([2, 2, 2], [2, 2, 2], [1, 1, 1]),
    ([5, -1], [-9, -9], [-2, -1]), ([2**63 - 1], [-(2**63)], [-1]), ([3], [1], [1]),
]


@pytest.mark.parametrize("begin, end, strides", SPECS)
def test_dynamic_strided_slice_infers_the_numpy_shape(begin, end, strides):
    x = relax.Var("x", TensorStructInfo((4, 3, 6), "float32"))
    call = BlockBuilder().normalize(
        make_call("dynamic_strided_slice", x, *_consts(begin, end, strides)))
    want = _slice(np.empty((4, 3, 6)), begin, end, strides).shape
    assert tuple(d.value for d in call.struct_info.values) == want


@pytest.mark.parametrize("begin, end, strides", SPECS)
def test_dynamic_strided_slice_runs_compiled(begin, end, strides):
    x = RNG.standard_normal((4, 3, 6)).astype("float32")
    ex, fn = _build(TensorStructInfo(x.shape, "float32"), (begin, end, strides))
    assert ex.stats["ops"]["dynamic_strided_slice"] == {"tir": 1}
    np.testing.assert_array_equal(fn(x).numpy(), _slice(x, begin, end, strides))


@pytest.mark.parametrize("begin, end, strides", [
    ([-1], [0], [-1]), ([2, 1], [100, -5], [3, 1]), ([1], [-1], [2]), ([-3], [-1], [1]),
    ([4], [2**31 - 1], [1]), ([0], [-100], [-1]),
])
def test_dynamic_strided_slice_symbolic_dim(begin, end, strides):
    """Exact on a symbolic dim too: bounds are clamped by the dim's value at run time."""
    ex, fn = _build(TensorStructInfo((N, 3), "float32"), (begin, end, strides))
    assert ex.stats["ops"]["dynamic_strided_slice"] == {"tir": 1}
    for n in (0, 1, 2, 3, 4, 9):
        x = RNG.standard_normal((n, 3)).astype("float32")
        np.testing.assert_array_equal(fn(x).numpy(), _slice(x, begin, end, strides))


def test_dynamic_strided_slice_unknown_unless_constant():
    x = relax.Var("x", TensorStructInfo((4, 3), "float32"))
    b = relax.Var("b", TensorStructInfo((2,), "int64"))
    end, strides = _consts([4, 3], [1, 1])
    call = BlockBuilder().normalize(make_call("dynamic_strided_slice", x, b, end, strides))
    assert call.struct_info.values is None and call.struct_info.ndim == 2


@pytest.mark.parametrize("specs, param", [
    (([0], [2], [0]), "strides"), (([0, 0], [2], [1]), "begin"),
    (([0, 0, 0], [1, 1, 1], [1, 1, 1]), "begin"),
])
def test_dynamic_strided_slice_errors(specs, param):
    x = relax.Var("x", TensorStructInfo((4, 3), "float32"))
    with pytest.raises(ShapeError, match=f"dynamic_strided_slice.*{param}"):
        BlockBuilder().normalize(make_call("dynamic_strided_slice", x, *_consts(*specs)))


# -------------------------------------------------------------------------------- integer power

INT_DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]


def _pow_kernel(x, y):
    return compile_prim_func(legalize_call(build_call("power", [x, y])), jit=kernel_jit())


@pytest.mark.parametrize("x, y, dtype", [
    (50000, 2, "int32"), (5, 39, "int64"), (-3, 31, "int32"), (3, 63, "int64"),
    (12345, 10**12, "int64"), (-128, 1, "int8"), (7, 255, "uint8"), (2, 64, "uint64"),
    (3, 2**64 - 1, "uint64"), (0, 0, "int32"), (-1, 2**31 - 1, "int32"),
])
def test_integer_power_wraps_like_numpy(x, y, dtype):
    x, y = np.array([x], dtype), np.array([y], dtype)
    got = _pow_kernel(x, y)(x, y)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, np.power(x, y))


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_power_random_full_range(dtype):
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max, 2000, dtype=dtype, endpoint=True)
    y = RNG.integers(0, info.max, 2000, dtype=dtype, endpoint=True)
    y[::2] %= 20  # small exponents too
    np.testing.assert_array_equal(_pow_kernel(x, y)(x, y), np.power(x, y))


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_power_broadcast_and_interp(dtype):
    """Through check_op: kernel == numpy fact == TIR interpreter, printer round trip."""
    x = RNG.integers(-50, 50, (3, 5)).astype(dtype)
    y = RNG.integers(0, 40, (1, 5)).astype(dtype)
    got, want = check_op("power", [x, y])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_integer_power_negative_exponent_is_truncated_reciprocal(dtype):
    """numpy raises for arrays; the kernel gives 1 / x**-y truncated toward zero (0 for 0)."""
    x = np.array([1, 1, -1, -1, 2, -2, 0, 5, -7], dtype)
    y = np.array([-1, -8, -3, -4, -1, -1, -1, -2, -100], dtype)
    with pytest.raises(ValueError, match="negative integer powers"):
        np.power(x, y)
    got = _pow_kernel(x, y)(x, y)
    np.testing.assert_array_equal(got, np.array([1, 1, -1, 1, 0, 0, 0, 0, 0], dtype))


def test_bool_power():
    x, y = np.array([True, False, True, False]), np.array([True, True, False, False])
    got = _pow_kernel(x, y)(x, y)
    np.testing.assert_array_equal(got, np.power(x, y).astype(bool))
