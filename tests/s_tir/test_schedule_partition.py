"""loop_partition: a loop cut into consecutive loops over sub-ranges, each in its own
partition block, with iter var domains narrowed to the range; values are kept, the trace
replays, TVM's factor rules and refusals hold. Also TVM's constant spellings it needs."""

import numpy as np
import pytest

from msc import te, testing, tir
from msc.errors import ScheduleError
from msc.script import tir as T
from msc.tir.interp import run_prim_func


@T.prim_func(s_tir=True)
def scale(A: T.Buffer((16, 4), "float32"), B: T.Buffer((16, 4), "float32")):
    for i, j in T.grid(16, 4):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0


def test_loop_partition_cuts_the_range_and_keeps_values():
    sch = tir.Schedule(scale)
    i, _ = sch.get_loops("B")
    parts = sch.loop_partition(i, factors=[3, None])
    text = sch.mod["main"].script()
    assert [sch.get(p).var.name for p in parts] == ["i0", "i1"]
    assert "for i1 in range(3, 16):" in text and 'T.sblock("B_i_common")' in text
    vi = sch.get(sch.get_block("B_i1")).iter_vars[0]     # the domain is the partition's
    assert (tir.as_int(vi.min), tir.as_int(vi.extent)) == (3, 13)
    a, b = np.random.rand(16, 4).astype("float32"), np.zeros((16, 4), "float32")
    run_prim_func(sch.mod["main"], a, b)
    np.testing.assert_allclose(b, 2 * a, rtol=1e-6)
    testing.verify_trace_roundtrip(sch, scale)


def test_loop_partition_adds_a_last_partition_for_the_rest():
    sch = tir.Schedule(scale)
    _, j = sch.get_loops("B")
    parts = sch.loop_partition(j, factors=[1, 2])
    assert len(parts) == 3 and "for j2 in range(3, 4):" in sch.mod["main"].script()


@pytest.mark.parametrize("factors, words", [
    ([16], "reach the extent"),
    ([None, None], "at most one factor"),
    ([0, None], "not positive"),
])
def test_loop_partition_refusals(factors, words):
    sch = tir.Schedule(scale)
    i, _ = sch.get_loops("B")
    with pytest.raises(ScheduleError, match=words):
        sch.loop_partition(i, factors=factors)
    testing.assert_structural_equal(sch.mod["main"], scale)


def test_tvm_constant_spellings():
    assert te.const(1, "int64").dtype == "int64" and tir.const(2.0).dtype == "float32"
    assert tir.IntImm("int8", 3).value == 3 and tir.IntImm("int8", 3).dtype == "int8"
