"""fuse_reduction_epilogue: a bias add (or ReLU) moves into the reduction block, which then
writes the epilogue's output; the result is the unfused one for a bias add, the trace
replays, and TVM's pattern refusals hold."""

import numpy as np
import pytest

from msc import testing, tir
from msc.errors import ScheduleError
from msc.script import tir as T
from msc.tir.interp import run_prim_func


@T.prim_func(s_tir=True)
def mm_bias(A: T.Buffer((4, 8), "float32"), B: T.Buffer((6, 8), "float32"),
            C: T.Buffer((4, 6), "float32"), D: T.Buffer((4, 6), "float32")):
    temp = T.sblock_alloc_buffer((4, 6))
    for i, j, k in T.grid(4, 6, 8):
        with T.sblock("mm"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                temp[vi, vj] = T.float32(0)
            temp[vi, vj] = temp[vi, vj] + A[vi, vk] * B[vj, vk]
    for i, j in T.grid(4, 6):
        with T.sblock("bias"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = temp[vi, vj] + C[vi, vj]


@T.prim_func(s_tir=True)
def mm_scaled(A: T.Buffer((4, 8), "float32"), B: T.Buffer((6, 8), "float32"),
              D: T.Buffer((4, 6), "float32")):
    temp = T.sblock_alloc_buffer((4, 6))
    for i, j, k in T.grid(4, 6, 8):
        with T.sblock("mm"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                temp[vi, vj] = T.float32(0)
            temp[vi, vj] = temp[vi, vj] + A[vi, vk] * B[vj, vk]
    for i, j in T.grid(4, 6):
        with T.sblock("scale"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = temp[vi, vj] * T.float32(2)


def test_fuse_bias_into_the_reduction():
    sch = tir.Schedule(mm_bias)
    sch.fuse_reduction_epilogue("mm", "bias")
    text = sch.mod["main"].script()
    assert "D[vi, vj] = C[vi, vj]" in text                       # the init is the bias
    assert "D[vi, vj] = D[vi, vj] + A[vi, vk] * B[vj, vk]" in text
    assert 'T.sblock("bias")' not in text
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 8), "float32"), rng.standard_normal((6, 8), "float32")
    c, d = rng.standard_normal((4, 6), "float32"), np.zeros((4, 6), "float32")
    run_prim_func(sch.mod["main"], a, b, c, d)
    np.testing.assert_allclose(d, a @ b.T + c, rtol=1e-5)
    testing.verify_trace_roundtrip(sch, mm_bias)
    assert "reduction_block=b0, epilogue_block=b1" in str(sch.trace)


@pytest.mark.parametrize("func, blocks, words", [
    (mm_scaled, ("mm", "scale"), "scales .temp."),
    (mm_bias, ("bias", "mm"), "is not a reduction block"),
])
def test_fuse_reduction_epilogue_refusals(func, blocks, words):
    sch = tir.Schedule(func)
    with pytest.raises(ScheduleError, match=words):
        sch.fuse_reduction_epilogue(*blocks)
    testing.assert_structural_equal(sch.mod["main"], func)


def test_tvm_compile_runs_the_entry_function_on_runtime_tensors():
    import msc as tvm

    sch = tir.Schedule(mm_bias)
    sch.fuse_reduction_epilogue("mm", "bias")
    lib = tvm.compile(sch.mod["main"], target="llvm")
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(s, "float32") for s in ((4, 8), (6, 8), (4, 6))]
    out = tvm.runtime.tensor(np.zeros((4, 6), "float32"))
    lib(*[tvm.runtime.tensor(x) for x in arrays], out)
    a, b, c = arrays
    np.testing.assert_allclose(out.numpy(), a @ b.T + c, rtol=1e-5)
    with pytest.raises(tvm.errors.ValidationError, match="PrimFunc or an IRModule"):
        tvm.compile("main")
