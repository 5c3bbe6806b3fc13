"""Loop kinds mean what they say: ``parallel`` loops run on the worker pool (the body outlined
into a task per chunk), ``vectorize`` forces LLVM's vectorizer at the loop's width, thread
bindings are refused on the CPU. Results are compared with numpy at 1 and 2 threads."""

from __future__ import annotations

import numpy as np
import pytest

import msc as tvm
from msc import te, tir
from msc.backend.llvm.jit import get_jit
from msc.backend.lowering import parallel
from msc.backend.lowering.codegen import codegen, ir_text
from msc.backend.runtime import threads
from msc.errors import RuntimeCallError, ScheduleError
from msc.script import tir as T


def _matmul(n: int = 64):
    a = te.placeholder((n, n), "float32", name="A")
    b = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), "k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c])


def _tiled(n: int = 64, parallel: bool = False, vectorize: bool = False):
    """The MLC lesson's kind of schedule: tiles, i0 parallel / j1 vectorized, the reduction
    decomposed last (as TVM requires: a loop over the update block, which has a reduce axis
    and no init, is not compact dataflow and cannot be parallelized or vectorized)."""
    sch = tir.Schedule(_matmul(n))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, factors=[None, 4])
    j0, j1 = sch.split(j, factors=[None, 16])
    sch.reorder(i0, j0, k, i1, j1)
    if parallel:
        sch.parallel(i0)
    if vectorize:
        sch.vectorize(j1)
    sch.decompose_reduction(block, k)
    return sch, i0, j1


@pytest.mark.parametrize("count", [1, 2])
def test_parallel_matmul_matches_numpy_and_runs_in_chunks(count):
    sch, _, _ = _tiled(parallel=True)
    kernel = tvm.build(sch.mod)["main"]
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 64), "float32"), rng.standard_normal((64, 64), "float32")
    c = np.zeros((64, 64), "float32")
    before = dict(parallel.STATS)
    with threads.num_threads(count):
        kernel(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    assert parallel.STATS["loops"] == before["loops"] + 1
    assert parallel.STATS["chunks"] == before["chunks"] + count  # one chunk per thread


def test_parallel_body_is_outlined_into_a_task():
    sch, _, _ = _tiled(parallel=True)
    text = ir_text(codegen(sch.mod["main"], "k")[0])
    assert 'define internal void @"k.par0"(i64' in text
    assert 'declare void @"msc_tir_parallel"(i64' in text
    # the kernel's buffers stay noalias in the body, so it vectorizes as the kernel would
    assert text.count("noalias") >= 6


@T.prim_func
def _rows(A: T.Buffer((6, 5), "float32"), B: T.Buffer((6, 5), "float32")):
    for i in T.parallel(6):
        for j in T.parallel(5):  # nested: runs serially inside the task
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2) + T.float32(vi)


def test_nested_parallel_loops_from_tvmscript():
    kernel = tvm.build(_rows)["main"]
    a = np.arange(30, dtype="float32").reshape(6, 5)
    out = np.zeros_like(a)
    with threads.num_threads(2):
        kernel(a, out)
    np.testing.assert_allclose(out, a * 2 + np.arange(6, dtype="float32")[:, None])


@T.prim_func
def _gather(A: T.Buffer((8,), "float32"), I: T.Buffer((8,), "int64"),
            B: T.Buffer((8,), "float32")):
    for i in T.parallel(8):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[I[vi]]


def test_a_bad_data_index_inside_a_parallel_loop_is_an_error():
    kernel = tvm.build(_gather)["main"]
    a = np.arange(8, dtype="float32")
    out = np.zeros(8, "float32")
    with threads.num_threads(2):
        kernel(a, np.arange(8)[::-1].copy(), out)
        np.testing.assert_array_equal(out, a[::-1])
        bad = np.array([0, 1, 2, 3, 4, 5, 6, 99])
        with pytest.raises(RuntimeCallError, match="out of range"):
            kernel(a, bad, out)


def test_vectorize_forces_the_loop_vectorizer_at_the_loop_width():
    sch, _, _ = _tiled(vectorize=True)
    text = ir_text(codegen(sch.mod["main"], "k")[0])
    assert '!"llvm.loop.vectorize.enable", i1 true' in text
    assert '!"llvm.loop.vectorize.width", i32 16' in text
    optimized = get_jit().optimized_ir(text)
    assert "<16 x float>" in optimized  # the j1 lanes, not the i1 loop through gathers
    assert "gather" not in optimized and "scatter" not in optimized
    kernel = tvm.build(sch.mod)["main"]
    a = np.random.default_rng(1).standard_normal((64, 64), "float32")
    c = np.zeros((64, 64), "float32")
    kernel(a, a, c)
    np.testing.assert_allclose(c, a @ a, rtol=1e-4, atol=1e-4)


@T.prim_func
def _dyn(a: T.handle, b: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in range(n):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi]


def test_loops_that_cannot_be_vectorized_or_bound_are_schedule_errors():
    sch = tir.Schedule(_dyn)
    (i,) = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match="extent n is not a constant"):
        sch.vectorize(i)
    with pytest.raises(ScheduleError, match="thread bindings are for GPU targets"):
        sch.bind(i, "threadIdx.x")
    assert "vectorized" not in sch.mod.script()  # nothing changed
