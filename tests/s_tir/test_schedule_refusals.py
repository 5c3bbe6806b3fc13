"""TVM's refusals that msc now makes too: loop kinds over blocks that are not compact dataflow,
reorder of non-affine bindings, rfactor outside a stage pipeline. Each refusal leaves the
schedule as it was; what is allowed still computes what numpy does."""

import numpy as np
import pytest

from msc import tir
from msc.s_tir.schedule.refusals import (
    NotAffineBindingError,
    NotCompactDataFlowError,
    NotStagePipelineError,
)
from msc.script import tir as T
from msc.tir.interp import run_prim_func


@T.prim_func(s_tir=True)
def matmul(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32"),
           C: T.Buffer((8, 8), "float32")):
    for i, j, k in T.grid(8, 8, 8):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.prim_func(s_tir=True)
def prefix(A: T.Buffer((9,), "float32")):
    for i in range(8):
        with T.sblock("scan"):
            A[i + 1] = A[i + 1] + A[i]


@T.prim_func(s_tir=True)
def strided(A: T.Buffer((64, 8), "float32"), B: T.Buffer((64, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.sblock("B"):
            vi = T.axis.spatial(64, i * 8)
            vj = T.axis.spatial(8, j)
            B[vi, vj] = A[vi, vj] + 1.0


@T.prim_func(s_tir=True)
def half_written(A: T.Buffer((8, 8), "float32"), D: T.Buffer((8, 8), "float32")):
    C = T.sblock_alloc_buffer((8, 8))
    for i, j, k in T.grid(4, 8, 8):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk]
    for i, j in T.grid(8, 8):
        with T.sblock("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = C[vi, vj]


def test_parallel_of_a_block_reading_what_it_writes_is_refused():
    sch = tir.Schedule(prefix)
    (i,) = sch.get_loops("scan")
    before = sch.mod["main"].script()
    with pytest.raises(NotCompactDataFlowError, match="neither a local complete block nor a "
                                                      "local reduction block"):
        sch.parallel(i)
    assert sch.mod["main"].script() == before


def test_loop_kinds_go_before_decompose_reduction():
    sch = tir.Schedule(matmul)
    i, j, k = sch.get_loops("C")
    sch.reorder(i, k, j)
    sch.parallel(i)
    sch.vectorize(j)
    sch.decompose_reduction("C", k)
    a, b = np.random.rand(8, 8).astype("float32"), np.random.rand(8, 8).astype("float32")
    c = np.zeros((8, 8), "float32")
    run_prim_func(sch.mod["main"], a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    after = tir.Schedule(matmul)
    i, _, k = after.get_loops("C")
    after.decompose_reduction("C", k)
    with pytest.raises(NotCompactDataFlowError, match="violates condition #1"):
        after.parallel(i)  # the update block has a reduce axis and no init


def test_reorder_of_a_strided_binding_is_refused_and_affine_ones_reorder():
    sch = tir.Schedule(strided)
    i, j = sch.get_loops("B")
    with pytest.raises(NotAffineBindingError, match="required to have an affine binding"):
        sch.reorder(j, i)
    ok = tir.Schedule(matmul)
    i, j, k = ok.get_loops("C")
    ok.reorder(k, j, i)
    a, b = np.random.rand(8, 8).astype("float32"), np.random.rand(8, 8).astype("float32")
    c = np.zeros((8, 8), "float32")
    run_prim_func(ok.mod["main"], a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


@T.prim_func(s_tir=True)
def first_fifty(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.where(i * 8 + j < 50)
            B[vi, vj] = A[vi, vj] * 2.0


def test_reorder_under_a_predicate_that_fuses_loops_no_binding_fuses_is_refused():
    sch = tir.Schedule(first_fifty)
    i, j = sch.get_loops("B")
    with pytest.raises(NotAffineBindingError):
        sch.reorder(j, i)
    ok = tir.Schedule(matmul)
    i, j, _ = ok.get_loops("C")
    _, ji = ok.split(j, [None, 3])       # vj = j0 * 3 + j1 under T.where(j0 * 3 + j1 < 8)
    ok.reorder(ji, i)                     # the binding fuses the predicate's loops: allowed
    a, b = np.random.rand(8, 8).astype("float32"), np.random.rand(8, 8).astype("float32")
    c = np.zeros((8, 8), "float32")
    run_prim_func(ok.mod["main"], a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_rfactor_outside_a_stage_pipeline_is_refused():
    sch = tir.Schedule(half_written)
    _, _, k = sch.get_loops("C")
    with pytest.raises(NotStagePipelineError, match="is not a stage pipeline"):
        sch.rfactor(k, 0)
