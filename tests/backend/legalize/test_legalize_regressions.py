"""Compiled TIR kernels that once gave silently wrong answers where the numpy facts were right.

- a PrimValue known only at run time (tril's ``k`` read from an ONNX input) was taken as 0:
  rules now decline such calls and the op stays on its numpy fact;
- shifts by a negative or over-width amount are 0 (or -1 for a negative value shifted right)
  as in numpy, not LLVM's poison / x86's amount mod bits;
- quantize divides in float32 like the reference: a float64 quotient rounded a .5 tie away;
- clip bounds outside an integer dtype wrapped (int8 clipped to 1000 became -24).
"""

from __future__ import annotations

import numpy as np
import pytest

from msc.backend.legalize import legalize_call
from msc.backend.legalize.testing import check_op
from msc.relax.block_builder import BlockBuilder
from msc.relax.expr import Var
from msc.relax.op.registry import make_call
from msc.relax.struct_info import TensorStructInfo
from msc.tir import expr as E
from tests.helpers import onnx_conformance as conf

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
K = E.Var("k", "int64")  # a value the VM knows only at run time


def _call(op, *args, **attrs):
    return BlockBuilder().normalize(make_call(op, *args, **attrs))


def _x(shape=(4, 5), dtype="float32"):
    return Var("x", TensorStructInfo(shape, dtype))


# ---------------------------------------------------------------------------- ONNX cases

REGRESSED = ["test_tril_neg", "test_tril_out_neg", "test_tril_out_pos", "test_tril_pos",
             "test_tril_square_neg", "test_triu_neg", "test_triu_one_row",
             "test_triu_out_neg_out", "test_triu_out_pos", "test_triu_pos",
             "test_triu_square_neg", "test_bitshift_left_int32_negative_shift",
             "test_bitshift_left_int32_shift_ge_width", "test_dynamicquantizelinear_expanded"]


@pytest.fixture(scope="module")
def onnx_cases():
    return {c.name: c for c in conf.load_cases()}


@pytest.mark.parametrize("name", REGRESSED)
def test_onnx_case_through_compiled_kernels(onnx_cases, name):
    """from_onnx -> relax.build (compiled kernels preferred) -> VM == ONNX's expected outputs."""
    result = conf.run_case(onnx_cases[name], "msc")
    assert result["status"] == "pass", result["message"]


# ------------------------------------------------------------------ runtime scalar arguments

@pytest.mark.parametrize("op, args", [
    ("tril", (_x(), K)), ("triu", (_x(), K)), ("eye_like", (_x(), K)), ("eye", (4, 5, K)),
    ("clip", (_x(), K, 3.0)), ("clip", (_x(), -3.0, K)),
    ("arange", (K, E.add(K, 5), 1)), ("arange", (0, 10, E.add(K, 1))),
])
def test_runtime_scalar_args_decline(op, args):
    """The kernel takes tensors only: a symbolic scalar must leave the op on numpy."""
    call = _call(op, *args, dtype="int64") if op == "arange" else _call(op, *args)
    assert legalize_call(call) is None


@pytest.mark.parametrize("op", ["tril", "triu"])
def test_tril_runtime_k_in_vm(op):
    """tril(x, k) with k read from a tensor: the VM result follows k (it was taken as 0)."""
    from msc import relax
    from msc.relax.struct_info import ShapeStructInfo

    k = E.Var("k", "int64")
    x = Var("x", TensorStructInfo((4, 5), "int64"))
    kt = Var("kt", TensorStructInfo((1,), "int64"))
    bb = BlockBuilder()
    with bb.function("main", [x, kt]):
        shape = bb.emit(make_call("tensor_to_shape", kt))
        bb.match_cast(shape, ShapeStructInfo([k]))
        bb.emit_func_output(bb.emit(make_call(op, x, k)))
    mod = bb.get()
    data = np.arange(20, dtype="int64").reshape(4, 5) + 1
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), relax.cpu())
    for value in (-1, 2, -5):
        got = vm["main"](data, np.array([value], "int64"))
        got = got.numpy() if hasattr(got, "numpy") else np.asarray(got)
        np.testing.assert_array_equal(got, getattr(np, op)(data, value))


# ---------------------------------------------------------------------------------- shifts

def _shift_data(dtype: str, n: int):
    bits = np.iinfo(dtype).bits
    amounts = [0, 1, bits - 1, bits, bits + 1, 2 * bits, 100]
    if dtype.startswith("int"):
        amounts += [-1, -bits, -bits - 1]
    rng = np.random.default_rng(bits)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, size=n, endpoint=True, dtype=dtype)
    x[:3] = [1, info.max, info.min]
    y = np.resize(np.array([a % (int(info.max) + 1) if a < 0 and dtype[0] == "u" else a
                            for a in amounts], dtype), n)
    return x, rng.permutation(y)


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("op", ["left_shift", "right_shift"])
@pytest.mark.parametrize("n", [3, 257])  # scalar code and vectorized loops
def test_shift_out_of_range_amounts(op, dtype, n):
    x, y = _shift_data(dtype, n)
    got, want = check_op(op, [x, y])
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------------------- rounding

def test_quantize_divides_in_float32():
    """DynamicQuantizeLinear's data: 0.5 / (5 / 255) is the tie 25.5 in float32 (rounded to
    26, + 153 = 179 as ONNX expects) but 25.4999 in float64 (178)."""
    x = np.array([0, 2, -3, -2.5, 1.34, 0.5], "float32")
    scale = np.float32(5) / np.float32(255)
    zero = np.array(153, "uint8")
    got, want = check_op("quantize", [x, np.array(scale, "float32"), zero], out_dtype="uint8")
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, [153, 255, 0, 26, 221, 179])


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_quantize_ties_round_half_to_even(dtype):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 127.5], dtype)
    got, want = check_op("quantize", [x, np.array(1, dtype), np.array(0, "int8")],
                         out_dtype="int8")
    np.testing.assert_array_equal(got, [0, 2, 2, 0, -2, -2, 4, 127])
    np.testing.assert_array_equal(got, want)


# ----------------------------------------------------------------------------------- clip

@pytest.mark.parametrize("dtype, lo, hi", [
    ("int8", -1000.0, 1000.0), ("uint8", -1.0, 300.0), ("int32", float("-inf"), float("inf")),
    ("int16", -2.5, 2.5), ("float32", 3.0, 1.0), ("int32", 4, -4),
])
def test_clip_bounds(dtype, lo, hi):
    """Bounds outside the dtype bound nothing; lo > hi gives hi everywhere (numpy's order)."""
    x = np.array([-120, -3, -1, 0, 1, 2, 3, 100, 120]).astype(dtype)
    got, want = check_op("clip", [x], lo, hi)
    np.testing.assert_array_equal(got, want)
