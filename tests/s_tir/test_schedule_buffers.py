"""set_scope: the buffer a block writes moves to another storage scope (renamed as TVM
renames it), every access follows, values are kept, and TVM's refusals hold."""

import numpy as np
import pytest

from msc import tir
from msc.errors import ScheduleError
from msc.tir.interp import run_prim_func
from msc.tir.parser import parse_tir_text

TWO = '''
@T.prim_func
def two(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    B = T.alloc_buffer((4, 8), "float32")
    for i, j in T.grid(4, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(4, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
'''


def _sch():
    return tir.Schedule(parse_tir_text(TWO)["two"])


@pytest.mark.parametrize("index", [0, "B"])
def test_set_scope_moves_and_renames_the_buffer(index):
    sch = _sch()
    sch.set_scope("B", index, "shared")
    func = sch.mod["main"]
    text = func.script()
    assert 'B_shared = T.sblock_alloc_buffer((4, 8), scope="shared")' in text
    assert "C[vi, vj] = B_shared[vi, vj] + T.float32(1.0)" in text and "B[" not in text
    a = np.random.default_rng(0).standard_normal((4, 8)).astype("float32")
    out = np.zeros((4, 8), "float32")
    run_prim_func(func, a, out)
    np.testing.assert_allclose(out, 2 * a + 1, rtol=1e-6)
    again = _sch()
    sch.trace.apply_to_schedule(again)
    assert again.mod["main"].script() == text


@pytest.mark.parametrize("block, index, scope, words", [
    ("C", 0, "shared", "parameter of the function"),
    ("B", 1, "shared", "no written buffer 1"),
    ("B", "Q", "shared", "writes no buffer 'Q'"),
    ("B", 0, "test_scope", "'test_scope' is not a storage scope"),
])
def test_set_scope_refusals(block, index, scope, words):
    sch = _sch()
    before = sch.mod["main"].script()
    with pytest.raises(ScheduleError, match=words):
        sch.set_scope(block, index, scope)
    assert sch.mod["main"].script() == before


def test_cache_refusals_as_tvm():
    sch = _sch()
    with pytest.raises(ScheduleError, match="'test_scope' is not a storage scope"):
        sch.cache_read("C", 0, "test_scope")
    two_writers = TWO.replace('            C[vi, vj] = B[vi, vj] + T.float32(1)',
                              '            B[vi, vj] = T.float32(1)\n'
                              '            C[vi, vj] = B[vi, vj] + T.float32(1)')
    sch = tir.Schedule(parse_tir_text(two_writers)["two"])
    with pytest.raises(ScheduleError, match="expected to be written by single block"):
        sch.cache_write("B", 0, "global")


def test_split_and_fuse_refuse_annotated_loops():
    text = TWO.replace("    for i, j in T.grid(4, 8):\n        with T.block(\"B\"):",
                       "    for i in range(4):\n"
                       "      for j in T.serial(8, annotations={\"note\": 1}):\n"
                       "        with T.block(\"B\"):", 1)
    sch = tir.Schedule(parse_tir_text(text)["two"])
    i, j = sch.get_loops("B")
    with pytest.raises(ScheduleError, match="has annotations"):
        sch.split(j, factors=[None, 2])
    with pytest.raises(ScheduleError, match="has annotations"):
        sch.fuse(i, j)


def test_storage_align_annotates_the_writer_and_replaces_its_entry():
    sch = _sch()
    sch.storage_align("B", 0, axis=0, factor=16, offset=0)
    sch.storage_align("B", 0, axis=0, factor=16, offset=1)    # same buffer and axis: replaced
    sch.storage_align("B", 0, axis=1, factor=8, offset=2)
    func = sch.mod["main"]
    text = func.script()
    assert 'T.sblock_attr({"buffer_dim_align": [[0, 0, 16, 1], [0, 1, 8, 2]]})' in text
    a = np.random.default_rng(3).standard_normal((4, 8)).astype("float32")
    out = np.zeros((4, 8), "float32")
    run_prim_func(func, a, out)                                # values unchanged
    np.testing.assert_allclose(out, 2 * a + 1, rtol=1e-6)
    again = _sch()
    sch.trace.apply_to_schedule(again)
    assert again.mod["main"].script() == text


@pytest.mark.parametrize("block, args, words", [
    ("C", (0, 0, 16, 0), "parameter of the function"),
    ("B", (1, 0, 16, 0), "no written buffer 1"),
    ("B", (0, 2, 16, 0), "axis 2 is out of range"),
    ("B", (0, 0, 0, 0), "factor must be > 0"),
])
def test_storage_align_refusals(block, args, words):
    sch = _sch()
    with pytest.raises(ScheduleError, match=words):
        sch.storage_align(block, *args)


def test_reorder_block_iter_var_permutes_the_declared_axes():
    import msc

    sch = _sch()
    sch.reorder_block_iter_var("B", [1, 0])
    func = sch.mod["main"]
    assert 'vj, vi = T.axis.remap("SS", [j, i])' in func.script()
    again = _sch()
    sch.trace.apply_to_schedule(again)
    msc.ir.assert_structural_equal(again.mod["main"], func)
    assert not msc.ir.structural_equal(_sch().mod["main"], func)
    for bad in ([0], [0, 0], [-1, 1], [0, 2]):
        with pytest.raises(ScheduleError, match="not a permutation"):
            sch.reorder_block_iter_var("B", bad)


def test_unsafe_set_dtype_casts_at_every_access():
    sch = _sch()
    sch.unsafe_set_dtype("B", 0, "float16")
    func = sch.mod["main"]
    text = func.script()
    assert 'B = T.sblock_alloc_buffer((4, 8), "float16")' in text
    assert 'B[vi, vj] = T.Cast("float16", A[vi, vj] * T.float32(2.0))' in text
    assert 'C[vi, vj] = T.Cast("float32", B[vi, vj]) + T.float32(1.0)' in text
    a = np.random.default_rng(0).standard_normal((4, 8)).astype("float32")
    out = np.zeros((4, 8), "float32")
    run_prim_func(func, a, out)
    expected = (2 * a).astype("float16").astype("float32") + 1
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    again = _sch()
    sch.trace.apply_to_schedule(again)
    assert again.mod["main"].script() == text
    with pytest.raises(ScheduleError, match="parameter of the function"):
        sch.unsafe_set_dtype("C", 0, "float16")
