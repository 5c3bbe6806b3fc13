"""cache_index: the index arithmetic of a block precomputed into int buffers before it (TVM's
common-subexpression rule with cse_thresh); values match numpy and the trace replays."""

import numpy as np

from msc import testing, tir
from msc.script import tir as T
from msc.tir.interp import run_prim_func


@T.prim_func(s_tir=True)
def gather(A: T.Buffer((6, 6), "float32"), B: T.Buffer((12, 12), "float32")):
    for i, j in T.grid(12, 12):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi // 4 + vj // 4, vj // 2] + A[vi // 4 + vj // 4, 0]


def _expected(a):
    i, j = np.meshgrid(np.arange(12), np.arange(12), indexing="ij")
    return a[i // 4 + j // 4, j // 2] + a[i // 4 + j // 4, 0]


def test_each_index_expression_gets_a_buffer_and_values_are_kept():
    sch = tir.Schedule(gather)
    blocks = sch.cache_index("B", "global")
    text = sch.mod["main"].script()
    assert [sch.get(b).name for b in blocks] == ["index_0", "index_1"]
    assert "index_var_0[v0, v1] = v0 // 4 + v1 // 4" in text
    assert "B[vi, vj] = A[index_var_0[vi, vj], index_var_1[vj]] + A[index_var_0[vi, vj], 0]" \
        in text
    a, b = np.random.rand(6, 6).astype("float32"), np.zeros((12, 12), "float32")
    run_prim_func(sch.mod["main"], a, b)
    np.testing.assert_allclose(b, _expected(a), rtol=1e-6)
    testing.verify_trace_roundtrip(sch, gather)


def test_a_threshold_keeps_only_repeated_expressions():
    sch = tir.Schedule(gather)
    sch.cache_index("B", "global", cse_thresh=2)   # vj // 2 occurs once: not cached
    text = sch.mod["main"].script()
    assert "index_var_1" not in text
    assert "A[index_var_0[vi, vj], vj // 2]" in text
    a, b = np.random.rand(6, 6).astype("float32"), np.zeros((12, 12), "float32")
    run_prim_func(sch.mod["main"], a, b)
    np.testing.assert_allclose(b, _expected(a), rtol=1e-6)
