"""reindex_cache_read / reindex_cache_write: a cache of a one-point access laid out by an index
map of the block's iter vars, placed where TVM places cache stages; values are kept, the trace
replays, and TVM's refusals hold."""

import numpy as np
import pytest

from msc import testing, tir
from msc.s_tir.schedule.reindex_cache import (
    NotSinglePointAccess,
    ReindexCacheReadWriteNotMatchError,
)
from msc.script import tir as T
from msc.tir.interp import run_prim_func


@T.prim_func(s_tir=True)
def scale_shift(A: T.Buffer((8, 6), "float32"), C: T.Buffer((8, 6), "float32")):
    B = T.sblock_alloc_buffer((8, 6))
    for i, j in T.grid(8, 6):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 3.0
    for i, j in T.grid(8, 6):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] - 1.0


@T.prim_func(s_tir=True)
def colsum(A: T.Buffer((4, 6, 5), "float32"), C: T.Buffer((6, 4), "float32")):
    for i, j, k in T.grid(4, 6, 5):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vj, vi] = T.float32(0)
            C[vj, vi] = C[vj, vi] + A[vi, vj, vk]


@T.prim_func(s_tir=True)
def window(A: T.Buffer((10,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.sblock("B"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi:vi + 3])
            T.writes(B[vi])
            B[vi] = A[vi] + A[vi + 1] + A[vi + 2]


def _run(func, *shapes):
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype("float32") for s in shapes[:-1]]
    out = np.zeros(shapes[-1], "float32")
    run_prim_func(func, *args, out)
    return args, out


def test_read_cache_is_laid_out_by_the_map_and_keeps_values():
    sch = tir.Schedule(scale_shift)
    copy = sch.reindex_cache_read("C", 0, "shared", lambda i, j: (j, i // 2, i % 2))
    text = sch.mod["main"].script()
    assert 'B_shared = T.sblock_alloc_buffer((6, 4, 2), scope="shared")' in text
    assert "C[vi, vj] = B_shared[vj, vi // 2, vi % 2] - T.float32(1.0)" in text
    assert text.index('T.sblock("B")') < text.index('T.sblock("B_shared")') < \
        text.index('T.sblock("C")')
    assert sch.get(copy).name == "B_shared"
    (a,), c = _run(sch.mod["main"], (8, 6), (8, 6))
    np.testing.assert_allclose(c, a * 3 - 1, rtol=1e-6)
    testing.verify_trace_roundtrip(sch, scale_shift)


def test_write_cache_of_a_reduction_is_copied_back_after_it():
    sch = tir.Schedule(colsum)
    sch.reindex_cache_write("C", 0, "local", lambda i, j, k: (i, j))
    text = sch.mod["main"].script()
    assert "C_local[vi, vj] = C_local[vi, vj] + A[vi, vj, vk]" in text
    assert "C[vj, vi] = C_local[vi, vj]" in text
    (a,), c = _run(sch.mod["main"], (4, 6, 5), (6, 4))
    np.testing.assert_allclose(c, a.sum(axis=2).T, rtol=1e-5)
    testing.verify_trace_roundtrip(sch, colsum)


def test_refusals_are_tvms():
    sch = tir.Schedule(scale_shift)
    with pytest.raises(ReindexCacheReadWriteNotMatchError, match="the block itervar vj "
                                                                "appears in"):
        sch.reindex_cache_read("C", 0, "shared", lambda i, j: (i * 2,))
    with pytest.raises(NotSinglePointAccess, match="is not a single point"):
        tir.Schedule(window).reindex_cache_read("B", 0, "shared", lambda i: (i,))
    assert sch.mod["main"].script() == tir.Schedule(scale_shift).mod["main"].script()
