"""tensorize with msc's x86 int8 dot product (``dot_16x4_vnni``): the tiled uint8 x int8
matmul gets the intrinsic, the trace replays, the compiled kernel computes numpy's values
with ``vpdpbusd`` on a VNNI host and with scalar code without VNNI, and what does not match
the description is refused by name."""

import os
import subprocess
import sys

import numpy as np
import pytest

from msc import s_tir, te, testing
from msc.backend.lowering import tensor_calls
from msc.backend.lowering.codegen import codegen, ir_text
from msc.backend.lowering.compile import compile_prim_func
from msc.errors import BuildError, ScheduleError
from msc.s_tir.tensor_intrin import TensorIntrin
from msc.s_tir.tensor_intrin.arm_cpu import ARM_DOT_4x4_i8_SDOT_INTRIN
from msc.s_tir.tensor_intrin.x86 import VNNI_DOT_16x4_INTRIN

M = N = K = 32


def _matmul(lhs="uint8"):
    X = te.placeholder((M, K), name="X", dtype=lhs)
    W = te.placeholder((N, K), name="W", dtype="int8")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(
        X[i, k].astype("int32") * W[j, k].astype("int32"), axis=k), name="compute")
    return te.create_prim_func([X, W, C])


def _schedule(func, pack=True, tile=16):
    sch = s_tir.Schedule(func)
    block = sch.get_sblock("compute")
    if pack:
        sch.transform_layout(block, "W", lambda i, j: [i // 16, j // 4, i % 16, j % 4])
    _, j, k = sch.get_loops(block)
    _, ji = sch.split(j, factors=[None, tile])
    ko, ki = sch.split(k, factors=[None, 4])
    sch.reorder(ko, ji, ki)
    sch.decompose_reduction(block, ko)
    return sch, ji


def _data():
    rng = np.random.default_rng(7)
    x = rng.integers(0, 256, (M, K)).astype("uint8")
    w = rng.integers(-128, 128, (N, K)).astype("int8")
    packed = np.ascontiguousarray(w.reshape(N // 16, 16, K // 4, 4).transpose(0, 2, 1, 3))
    return x, w, packed


def test_the_tile_becomes_the_intrinsic():
    sch, ji = _schedule(_matmul())
    sch.tensorize(ji, VNNI_DOT_16x4_INTRIN)
    text = sch.mod["main"].script()
    assert "msc.x86.dot_16x4_u8i8i32" in text and "T.match_buffer(W[" in text
    assert 'sch.tensorize(block_or_loop=l5, tensor_intrin="dot_16x4_vnni"' in str(sch.trace)
    testing.verify_trace_roundtrip(sch, _matmul())


def test_compiled_kernel_matches_numpy():
    sch, ji = _schedule(_matmul())
    sch.tensorize(ji, VNNI_DOT_16x4_INTRIN)
    x, w, packed = _data()
    out = np.zeros((M, N), "int32")
    compile_prim_func(sch.mod["main"])(x, packed, out)
    np.testing.assert_array_equal(out, x.astype("int32") @ w.astype("int32").T)


@pytest.mark.skipif(not tensor_calls.host_vnni(), reason="the host has no AVX-512 VNNI")
def test_vnni_host_gets_vpdpbusd():
    sch, ji = _schedule(_matmul())
    sch.tensorize(ji, VNNI_DOT_16x4_INTRIN)
    assert "llvm.x86.avx512.vpdpbusd.512" in ir_text(codegen(sch.mod["main"], "k")[0])


def test_without_vnni_the_same_values_from_scalar_code(monkeypatch):
    sch, ji = _schedule(_matmul())
    sch.tensorize(ji, VNNI_DOT_16x4_INTRIN)
    monkeypatch.setattr(tensor_calls, "host_vnni", lambda: False)
    assert "vpdpbusd" not in ir_text(codegen(sch.mod["main"], "k")[0])


def test_an_avx2_only_build_runs_the_scalar_path():
    """The whole compile in a child capped to AVX2 (no AVX-512): numpy's values."""
    code = ("import numpy as np, sys; sys.path.insert(0, 'tests/s_tir');"
            "import test_schedule_tensorize as t;"
            "from msc.backend.lowering import tensor_calls as c; assert not c.host_vnni();"
            "t.test_compiled_kernel_matches_numpy(); print('ok')")
    env = {**os.environ, "MSC_CPU_ISA": "avx2", "MSC_KERNEL_CACHE": "0"}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=root,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.stdout.strip().endswith("ok"), done.stderr[-2000:]


def test_a_signed_lhs_is_refused():
    sch, ji = _schedule(_matmul("int8"))
    with pytest.raises(ScheduleError, match="takes A as uint8, the block's"):
        sch.tensorize(ji, VNNI_DOT_16x4_INTRIN)


def test_a_tile_of_other_extents_is_refused():
    sch, ji = _schedule(_matmul(), tile=8)
    with pytest.raises(ScheduleError, match=r"extents \[16, 4\], the target has \[8, 4\]"):
        sch.tensorize(ji, VNNI_DOT_16x4_INTRIN)


def test_an_unpacked_weight_tile_does_not_compile():
    sch, ji = _schedule(_matmul(), pack=False)
    sch.tensorize(ji, VNNI_DOT_16x4_INTRIN)  # the values match; the memory is not compact
    with pytest.raises(BuildError, match="needs \\[4, 1\\]"):
        codegen(sch.mod["main"], "k")


def test_other_targets_intrinsics_are_refused_as_value_errors():
    with pytest.raises(ValueError, match="Arm"):
        TensorIntrin.get(ARM_DOT_4x4_i8_SDOT_INTRIN)
    assert TensorIntrin.get("no_such_intrin", allow_missing=True) is None


def test_tile_with_tensor_intrin_puts_the_tile_innermost():
    from msc.s_tir.schedule.transform import tile_with_tensor_intrin

    sch = s_tir.Schedule(_matmul())
    block = sch.get_sblock("compute")
    sch.transform_layout(block, "W", lambda i, j: [i // 16, j // 4, i % 16, j % 4])
    loop = tile_with_tensor_intrin(sch, block, VNNI_DOT_16x4_INTRIN)
    assert [sch.get(lp).extent.value for lp in sch.get_loops(block)] == [M, N // 16, K // 4,
                                                                         16, 4]
    assert sch.get(loop) is sch.get(sch.get_loops(block)[3])
    sch.decompose_reduction(block, sch.get_loops(block)[2])
    sch.tensorize(loop, VNNI_DOT_16x4_INTRIN)
    x, w, packed = _data()
    out = np.zeros((M, N), "int32")
    compile_prim_func(sch.mod["main"])(x, packed, out)
    np.testing.assert_array_equal(out, x.astype("int32") @ w.astype("int32").T)


def test_tile_with_tensor_intrin_without_a_mapping_is_none():
    from msc.s_tir.schedule.transform import tile_with_tensor_intrin

    func = _matmul("int8")  # no uint8 operand: nothing plays the description's A
    sch = s_tir.Schedule(func)
    assert tile_with_tensor_intrin(sch, sch.get_sblock("compute"), VNNI_DOT_16x4_INTRIN) is None


def _parity_intrin():
    from msc.script import tir as T

    @T.prim_func(s_tir=True)
    def desc(A: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
        with T.sblock("root"):
            for i in range(4):
                with T.sblock("update"):
                    vi = T.axis.remap("S", [i])
                    C[vi] = A[vi] + T.Cast("float32", vi % 2)

    @T.prim_func(s_tir=True)
    def impl(A: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
        with T.sblock("root"):
            T.evaluate(T.call_extern("int32", "parity_add4", C.data, A.data))

    TensorIntrin.register("test_parity_add4", desc, impl, override=True)


def _index_func(modulus):
    from msc.script import tir as T

    @T.prim_func(s_tir=True)
    def f(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.sblock("C"):
                vi = T.axis.remap("S", [i])
                C[vi] = A[vi] + T.Cast("float32", vi % modulus)

    return f


@pytest.mark.parametrize("modulus, fits", [(2, True), (8, False)])
def test_index_values_are_compared_on_the_tile(modulus, fits):
    """``vi % 2`` of the intrinsic is ``(v_o * 4 + v_i) % 2`` of the tile; ``% 8`` is not."""
    _parity_intrin()
    sch = s_tir.Schedule(_index_func(modulus))
    (loop,) = sch.get_loops(sch.get_sblock("C"))
    _, inner = sch.split(loop, [None, 4])
    if fits:
        sch.tensorize(inner, "test_parity_add4")
        assert "parity_add4" in sch.mod["main"].script()
    else:
        with pytest.raises(ScheduleError, match="computes"):
            sch.tensorize(inner, "test_parity_add4")
