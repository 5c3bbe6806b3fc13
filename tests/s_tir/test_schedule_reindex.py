"""reindex: a block's access to one buffer goes through a buffer indexed by the block's
iter vars, with a copy stage before (read) or after (write) the block's nest; values are
kept, constant index parts fold away, the trace replays, and TVM's refusals hold."""

import numpy as np
import pytest

from msc import testing, tir
from msc.errors import ScheduleError
from msc.script import tir as T
from msc.tir.interp import run_prim_func


@T.prim_func(s_tir=True)
def transposed(A: T.Buffer((4, 8), "float32"), B: T.Buffer((8, 4), "float32")):
    for i, j in T.grid(8, 4):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vj, vi] * 2.0


@T.prim_func(s_tir=True)
def rowsum(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 8):
        with T.sblock("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk // 8 * 2 + vk]


@T.prim_func(s_tir=True)
def twice(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
    for i, j in T.grid(4, 4):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vj, vi] + A[vi, vj]


def test_reindex_read_copies_in_the_block_axes():
    sch = tir.Schedule(transposed)
    copy = sch.reindex("B", ("read", 0))
    text = sch.mod["main"].script()
    assert "A_reindex = T.sblock_alloc_buffer((8, 4))" in text
    assert "B[vi, vj] = A_reindex[vi, vj] * T.float32(2.0)" in text
    assert sch.get(copy).name == "A_reindex"
    a, b = np.random.rand(4, 8).astype("float32"), np.zeros((8, 4), "float32")
    run_prim_func(sch.mod["main"], a, b)
    np.testing.assert_allclose(b, 2 * a.T, rtol=1e-6)
    testing.verify_trace_roundtrip(sch, transposed)
    assert 'sch.reindex(block=b0, buffer=("read", 0))' in str(sch.trace)


def test_reindex_write_by_name_folds_constant_index_parts():
    sch = tir.Schedule(rowsum)
    sch.reindex("C", "C")                 # read and written: the write, as in TVM
    text = sch.mod["main"].script()
    assert "C_reindex[vi] = C_reindex[vi] + A[vi, vk // 8 * 2 + vk]" in text
    assert text.index('T.sblock("C_reindex")') > text.index('T.sblock("C")')
    a, c = np.random.rand(4, 8).astype("float32"), np.zeros(4, "float32")
    run_prim_func(sch.mod["main"], a, c)
    np.testing.assert_allclose(c, a.sum(axis=1), rtol=1e-5)
    sch2 = tir.Schedule(rowsum)
    sch2.reindex("C", ("read", 0))        # A: vk // 8 is 0 over vk < 8, so A_reindex[vi, vk]
    assert "A_reindex = T.sblock_alloc_buffer((4, 8))" in sch2.mod["main"].script()


@pytest.mark.parametrize("func, block, buffer, words", [
    (twice, "B", "A", "accessed at different indices"),
    (transposed, "B", ("read", 3), "no read buffer 3"),
    (transposed, "B", "Q", "accesses no buffer 'Q'"),
    (transposed, "B", 7, "a name or"),
])
def test_reindex_refusals(func, block, buffer, words):
    sch = tir.Schedule(func)
    before = sch.mod["main"].script()
    with pytest.raises(ScheduleError, match=words):
        sch.reindex(block, buffer)
    assert sch.mod["main"].script() == before
