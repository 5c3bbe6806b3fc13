"""TVM's object model over msc's IR: stable srefs that follow the primitives, the cached
flags (affine_binding, region_cover, stage_pipeline) recomputed from the current function,
block-scope dependencies, and the schedule's RV bookkeeping (remove_rv, copies, work_on)."""

from dataclasses import replace

import numpy as np
import pytest

from msc import s_tir, tir
from msc.errors import ScheduleError
from msc.s_tir.schedule import CachedFlags, DepKind, ScheduleState
from msc.script import tir as T
from msc.tir.interp import run_prim_func
from msc.tir.stmt_functor import post_order_visit


@T.prim_func(s_tir=True)
def two_stages(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.sblock_alloc_buffer((16,), "float32")
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.S(16, i)
            B[vi] = A[vi] + 1.0
    for i in range(16):
        with T.sblock("C"):
            vi = T.axis.S(16, i)
            C[vi] = B[vi] * 3.0


@T.prim_func(s_tir=True)
def half_produced(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.sblock_alloc_buffer((16,), "float32")
    for i in range(8):
        with T.sblock("B"):
            vi = T.axis.S(8, i)
            B[vi] = A[vi]
    for i in range(16):
        with T.sblock("C"):
            vi = T.axis.S(16, i)
            C[vi] = B[vi]


@T.prim_func(s_tir=True)
def read_then_overwrite(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.sblock("C"):
            vi = T.axis.S(16, i)
            C[vi] = A[vi]
    for i in range(16):
        with T.sblock("A"):
            vi = T.axis.S(16, i)
            A[vi] = 0.0


@T.prim_func(s_tir=True)
def product_binding(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for i, j in T.grid(4, 4):
        with T.sblock("C"):
            vi = T.axis.S(16, i * j)
            C[vi] = A[vi]


def _block(state, name):
    found = []
    post_order_visit(state.mod["main"].body,
                     lambda n: found.append(n) if getattr(n, "name", None) == name else None)
    return state.get_sref(found[0])


def test_flags_of_a_plain_pipeline_are_all_true():
    s = ScheduleState(two_stages)
    for name in ("root", "B", "C"):
        assert s._get_cached_flags(_block(s, name)) == CachedFlags(True, True, True)


def test_a_half_written_buffer_is_not_covered():
    s = ScheduleState(half_produced)
    assert s._get_cached_flags(_block(s, "C")) == CachedFlags(True, False, True)
    assert s._get_cached_flags(_block(s, "root")).stage_pipeline is False


def test_write_after_read_breaks_the_stage_pipeline():
    s = ScheduleState(read_then_overwrite)
    root = _block(s, "root")
    assert s._get_cached_flags(root).stage_pipeline is False
    (dep,) = s.get_sblock_scope(root).get_deps_by_dst(_block(s, "A"))
    assert dep.kind == DepKind.WAR and dep.src.same_as(_block(s, "C"))


def test_a_product_of_loop_vars_is_not_an_affine_binding():
    s = ScheduleState(product_binding)
    assert s._get_cached_flags(_block(s, "C")).affine_binding is False


def test_raw_dependency_links_the_stage_srefs():
    s = ScheduleState(two_stages)
    b, c = _block(s, "B"), _block(s, "C")
    (dep,) = s.get_sblock_scope(_block(s, "root")).get_deps_by_src(b)
    assert dep.kind == DepKind.RAW and dep.dst.same_as(c)


def test_srefs_are_stable_and_follow_the_primitives():
    sch = s_tir.Schedule(two_stages)
    block = sch.get_sblock("C")
    (loop,) = sch.get_loops(block)
    sref = sch.get_sref(block)
    assert sch.get_sref(block).same_as(sref)
    assert sch.state.get_sref(sch.get(block)).same_as(sref)
    outer, _ = sch.split(loop, [None, 4])
    assert sch.get_sref(outer).stmt.extent == 4
    assert sref.stmt is sch.get(block)  # the handle sees the split function's block
    assert sch.get_sref(outer).same_as(sref.parent.parent)
    sch.compute_inline(sch.get_sblock("B"))
    a = np.arange(16, dtype="float32")
    c = np.zeros(16, "float32")
    run_prim_func(sch.mod["main"], a, c)
    np.testing.assert_allclose(c, (a + 1.0) * 3.0, rtol=1e-6)


def test_a_removed_block_has_no_statement():
    sch = s_tir.Schedule(two_stages)
    sref = sch.get_sref(sch.get_sblock("B"))
    sch.compute_inline(sch.get_sblock("B"))
    assert sref.stmt is None


def test_child_blocks_remove_rv_and_copies():
    sch = s_tir.Schedule(two_stages)
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    assert [sch.get(b).name for b in blocks] == ["B", "C"]
    assert "get_child_blocks(block_or_loop=b0)" in str(sch.trace)
    other = sch.copy()
    (loop,) = sch.get_loops(blocks[1])
    with pytest.raises(IndexError):
        other.get_sref(loop)
    sch.remove_rv(blocks[0])
    with pytest.raises(IndexError):
        sch.get(blocks[0])
    assert other.get(blocks[0]).name == "B"


def test_work_on_is_needed_with_several_functions():
    from msc.relax.module import IRModule

    sch = s_tir.Schedule(IRModule({"f": two_stages, "g": half_produced}))
    with pytest.raises(ValueError, match="does not know which function"):
        sch.get_sblock("B")
    sch.work_on("g")
    assert sch.get(sch.get_sblock("C")).name == "C"


def test_replace_rebuilds_the_function_and_leaves_a_held_one_alone():
    s = ScheduleState(two_stages)
    held = s.mod["main"]
    loop_b = held.body.body[0]
    # the second nest, renumbered: C[vi] = B[vi] * 3 over the loop of the first nest
    target = tir.SBlock(iter_vars=[], reads=[], writes=[], name_hint="target",
                        body=held.body.body[1], init=None, alloc_buffers=None,
                        match_buffers=None, annotations=None)
    sref = s.get_sref(loop_b)
    s.replace(sref, tir.SBlockRealize(iter_values=[], predicate=True, block=target))
    assert s.mod["main"] is not held and s.mod["main"].body.body[0] == target
    assert held.body.body[0] is loop_b  # the caller's function is unchanged
    assert sref.stmt is None  # the replaced loop is gone
    assert s.mod is s.mod and hash(s.mod["main"]) != hash(held)


def test_replace_moves_a_reused_block_sref():
    s = ScheduleState(two_stages)
    sref = _block(s, "B")
    renamed = replace(sref.stmt, name="B2")
    s.replace(sref, renamed, {sref.stmt: renamed})
    assert sref.stmt is renamed and s.get_sref(renamed) is sref
    out = np.zeros(16, "float32")
    run_prim_func(s.mod["main"], np.arange(16, dtype="float32"), out)
    np.testing.assert_allclose(out, (np.arange(16) + 1.0) * 3.0, rtol=0, atol=0)


def test_replace_refuses_a_statement_that_is_not_a_block_or_loop():
    s = ScheduleState(two_stages)
    with pytest.raises(ScheduleError, match="replace: the target is a SeqStmt"):
        s.replace(_block(s, "B"), s.mod["main"].body.body)


@pytest.mark.parametrize("level, text", [("detail", "Cannot find a block with the name: X"),
                                         ("fast", "Cannot find a block with the specified"),
                                         ("none", "(not rendered)")])
def test_a_missing_block_is_reported_at_the_render_level(level, text):
    sch = s_tir.Schedule(two_stages, error_render_level=level)
    with pytest.raises(ScheduleError) as info:
        sch.get_sblock("X")
    assert text in str(info.value)
    assert ("hint" in str(info.value)) == (level == "detail")  # detail lists the blocks
