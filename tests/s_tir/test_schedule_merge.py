"""merge: sibling loop nests of equal extents become one nest running both bodies in turn;
values are kept, the trace replays, and TVM's refusals hold."""

import numpy as np
import pytest

from msc import testing, tir
from msc.errors import ScheduleError
from msc.script import tir as T
from msc.tir.interp import run_prim_func


@T.prim_func(s_tir=True)
def two(A: T.Buffer((8, 6), "float32"), C: T.Buffer((8, 6), "float32"),
        D: T.Buffer((8, 3), "float32")):
    for i, j in T.grid(8, 6):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(8, 3):
        with T.sblock("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = A[vi, vj * 2] + 1.0


def test_merge_runs_both_bodies_under_one_loop():
    sch = tir.Schedule(two)
    merged = sch.merge(sch.get_loops("C")[0], sch.get_loops("D")[0])
    func = sch.mod["main"]
    assert sch.get(merged).var.name == "i_m"
    assert func.script().count("for i_m in range(8):") == 1
    a = np.random.default_rng(0).standard_normal((8, 6)).astype("float32")
    c, d = np.zeros((8, 6), "float32"), np.zeros((8, 3), "float32")
    run_prim_func(func, a, c, d)
    np.testing.assert_allclose(c, 2 * a, rtol=1e-6)
    np.testing.assert_allclose(d, a[:, ::2] + 1, rtol=1e-6)
    testing.verify_trace_roundtrip(sch, two)


@pytest.mark.parametrize("pick, words", [
    (lambda sch: (sch.get_loops("C")[1], sch.get_loops("D")[1]), "different extents"),
    (lambda sch: (sch.get_loops("C")[0], sch.get_loops("D")[1]), "same nesting depth"),
])
def test_merge_refusals(pick, words):
    sch = tir.Schedule(two)
    with pytest.raises(ScheduleError, match=words):
        sch.merge(*pick(sch))
    testing.assert_structural_equal(sch.mod["main"], two)


def test_add_unit_loop_above_a_block_and_a_loop():
    sch = tir.Schedule(two)
    u = sch.add_unit_loop("C")
    v = sch.add_unit_loop(sch.get_loops("D")[0])
    assert sch.get(u).var.name == "u" and tir.as_int(sch.get(v).extent) == 1
    assert [sch.get(lp).var.name for lp in sch.get_loops("C")] == ["i", "j", "u"]
    a = np.random.default_rng(1).standard_normal((8, 6)).astype("float32")
    c, d = np.zeros((8, 6), "float32"), np.zeros((8, 3), "float32")
    run_prim_func(sch.mod["main"], a, c, d)
    np.testing.assert_allclose(c, 2 * a, rtol=1e-6)
    testing.verify_trace_roundtrip(sch, two)


def test_split_takes_tvm_constant_factors():
    sch = tir.Schedule(two)
    i, _ = sch.get_loops("C")
    _, inner = sch.split(i, factors=[tir.const(2, "int64"), None])
    assert tir.as_int(sch.get(inner).extent) == 4
