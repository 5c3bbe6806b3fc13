"""TVM's test conventions on msc schedules: primitives take a block by name (recorded as a
get_sblock in the trace), and ``msc.testing.verify_trace_roundtrip`` replays a trace (Python
and JSON) to the same function, failing when the replay differs."""

from __future__ import annotations

import pytest

from msc import testing, tir
from msc.errors import ScheduleError
from msc.script import tir as T
from msc.tir.parser import parse_tir_text

from .test_schedule_primitives import MM_RELU


def _sch():
    return tir.Schedule(parse_tir_text(MM_RELU)["mm_relu"])


def test_block_by_name_is_the_same_as_by_rv():
    by_name, by_rv = _sch(), _sch()
    by_name.reverse_compute_at("C", by_name.get_loops("Y")[0])
    by_rv.reverse_compute_at(by_rv.get_block("C"), by_rv.get_loops(by_rv.get_block("Y"))[0])
    testing.assert_structural_equal(by_name.mod, by_rv.mod)
    assert 'get_sblock(name="C"' in str(by_name.trace)


def test_verify_trace_roundtrip_replays_the_schedule():
    sch = _sch()
    _, j, k = sch.get_loops("Y")
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.decompose_reduction("Y", k)
    func = parse_tir_text(MM_RELU)["mm_relu"]
    replayed = testing.verify_trace_roundtrip(sch, func)
    testing.assert_structural_equal(replayed.mod, sch.mod)


def test_verify_trace_roundtrip_fails_when_the_trace_misses_a_step():
    sch = _sch()
    sch.split(sch.get_loops("Y")[1], factors=[None, 4])
    sch.trace.insts.pop()  # the split is no longer in the trace
    with pytest.raises(ValueError, match="StructuralEqual"):
        testing.verify_trace_roundtrip(sch, parse_tir_text(MM_RELU)["mm_relu"])


def test_split_disable_predication_drops_the_guard():
    guarded, free = _sch(), _sch()
    guarded.split(guarded.get_loops("Y")[1], factors=[None, 3])
    free.split(free.get_loops("Y")[1], factors=[None, 3], disable_predication=True)
    assert "T.where" in guarded.mod["main"].script()
    assert "T.where" not in free.mod["main"].script()
    assert "disable_predication=True" in str(free.trace)
    testing.verify_trace_roundtrip(free, parse_tir_text(MM_RELU)["mm_relu"])


def test_fuse_binds_as_tvm_simplifies():
    sch = _sch()
    sch.fuse(*sch.get_loops("Y"))
    text = sch.mod["main"].script()
    assert "i_j_k_fused // 96" in text
    assert "i_j_k_fused % 96 // 12" in text
    assert "i_j_k_fused % 12" in text


def test_tvm_attribute_names_of_loops_and_blocks():
    sch = _sch()
    block = sch.get_block("Y")
    assert sch.get(block).name_hint == "Y"
    assert [sch.get(lp).loop_var.name for lp in sch.get_loops(block)] == ["i", "j", "k"]


@pytest.mark.parametrize("preserve", [False, True])
def test_reverse_compute_at_preserve_unit_loops(preserve):
    sch = _sch()
    i, _, _ = sch.get_loops("Y")
    sch.reverse_compute_at("C", i, preserve_unit_loops=preserve)
    text = sch.mod["main"].script()
    assert ("for ax0, ax1 in T.grid(1, 8):" in text) == preserve
    assert ("vi = T.axis.spatial(16, i + ax0)" in text) == preserve
    assert "preserve_unit_loops=" + str(preserve) in str(sch.trace)
    testing.verify_trace_roundtrip(sch, parse_tir_text(MM_RELU)["mm_relu"])
    from .test_schedule_primitives import _check

    _check(sch)


@pytest.mark.parametrize("apply, match", [
    (lambda s: s.compute_at("Y", s.get_loops("Y")[0]),
     "block 'Y' and loop 'i' to be under the same block scope"),
    (lambda s: s.reverse_compute_at("C", s.get_loops("C")[1]), "ancestor of block"),
    (lambda s: s.compute_at("C", s.get_loops("Y")[0]), "block 'C' is an output block"),
])
def test_compute_at_refusals_use_tvm_words(apply, match):
    sch = _sch()
    before = sch.mod["main"].script()
    with pytest.raises(ScheduleError, match=match):
        apply(sch)
    assert sch.mod["main"].script() == before


def test_structural_equality_binds_names_rather_than_comparing_them():
    @T.prim_func(s_tir=True)
    def reused(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        C = T.sblock_alloc_buffer((4,))
        for i in range(4):
            with T.sblock("C"):
                vi = T.axis.remap("S", [i])
                C[vi] = A[vi]
        for i in range(4):
            with T.sblock("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = C[vi]

    @T.prim_func(s_tir=True)
    def distinct(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        C = T.sblock_alloc_buffer((4,))
        for ax0 in range(4):
            with T.sblock("C"):
                v0 = T.axis.remap("S", [ax0])
                C[v0] = A[v0]
        for i in range(4):
            with T.sblock("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = C[vi]

    @T.prim_func(s_tir=True)
    def swapped(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        C = T.sblock_alloc_buffer((4,))
        for i in range(4):
            with T.sblock("C"):
                vi = T.axis.remap("S", [i])
                C[vi] = A[vi]
        for i in range(4):
            with T.sblock("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi]

    testing.assert_structural_equal_ignore_global_symbol(reused, distinct)
    with pytest.raises(ValueError):
        testing.assert_structural_equal_ignore_global_symbol(reused, swapped)
