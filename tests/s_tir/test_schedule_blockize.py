"""blockize: the subtree under a loop becomes an outer block over the outer parts of the
bindings; values are kept (a reduction's init moves out), the trace replays, and bindings
that do not divide are refused."""

import numpy as np
import pytest

from msc import testing, tir
from msc.errors import ScheduleError
from msc.script import tir as T
from msc.tir.interp import run_prim_func


@T.prim_func(s_tir=True)
def tiled(A: T.Buffer((8, 12), "float32"), B: T.Buffer((8, 12), "float32")):
    for i0, j0, i1, j1 in T.grid(2, 3, 4, 4):
        with T.sblock("B"):
            vi = T.axis.spatial(8, i0 * 4 + i1)
            vj = T.axis.spatial(12, j0 * 4 + j1)
            B[vi, vj] = A[vi, vj] * 2.0


@T.prim_func(s_tir=True)
def rowsum(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4,), "float32")):
    for k, i in T.grid(8, 4):
        with T.sblock("C"):
            vk, vi = T.axis.remap("RS", [k, i])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk]


@T.prim_func(s_tir=True)
def skewed(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i0, i1 in T.grid(2, 4):
        with T.sblock("B"):
            vi = T.axis.spatial(8, i0 + i1 * 2)
            B[vi] = A[vi]


def test_blockize_tiles_into_outer_and_inner_blocks():
    sch = tir.Schedule(tiled)
    outer = sch.blockize(sch.get_loops("B")[2])
    text = sch.mod["main"].script()
    assert sch.get(outer).name == "B_o"
    assert 'vi_o, vj_o = T.axis.remap("SS", [i0, j0])' in text
    assert "B[vi_o * 4 + vi_i, vj_o * 4 + vj_i] = A[vi_o * 4 + vi_i, vj_o * 4 + vj_i]" in text
    a, b = np.random.rand(8, 12).astype("float32"), np.zeros((8, 12), "float32")
    run_prim_func(sch.mod["main"], a, b)
    np.testing.assert_allclose(b, 2 * a, rtol=1e-6)
    testing.verify_trace_roundtrip(sch, tiled)


def test_blockize_moves_the_init_to_the_outer_block():
    sch = tir.Schedule(rowsum)
    sch.blockize(sch.get_loops("C")[0])
    text = sch.mod["main"].script()
    assert 'T.sblock("C_init")' in text and "vk_o = T.axis.reduce(1, 0)" in text
    a, c = np.random.rand(4, 8).astype("float32"), np.zeros(4, "float32")
    run_prim_func(sch.mod["main"], a, c)
    np.testing.assert_allclose(c, a.sum(axis=1), rtol=1e-5)


def test_blockize_refuses_a_binding_that_does_not_divide():
    sch = tir.Schedule(skewed)
    with pytest.raises(ScheduleError, match="cannot be divided"):
        sch.blockize(sch.get_loops("B")[1])
    testing.assert_structural_equal(sch.mod["main"], skewed)
