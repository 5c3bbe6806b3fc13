"""transform_block_layout / transform_layout: a block's iteration space, or a buffer's
layout, re-expressed through an index map; values are kept, the trace replays (the map is
kept as its lambda text), and maps that are not bijective are refused as TVM refuses them."""

import numpy as np
import pytest

from msc import testing, tir
from msc.errors import ScheduleError
from msc.s_tir.schedule.layout import map_exprs
from msc.script import tir as T
from msc.tir.interp import run_prim_func


@T.prim_func(s_tir=True)
def rowsum(A: T.Buffer((4, 6, 8), "float32"), C: T.Buffer((4, 6), "float32")):
    for i, j, k in T.grid(4, 6, 8):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vj, vk]


def _run(func):
    a = np.random.default_rng(0).standard_normal((4, 6, 8)).astype("float32")
    c = np.zeros((4, 6), "float32")
    run_prim_func(func, a, c)
    np.testing.assert_allclose(c, a.sum(axis=2), rtol=1e-5)


def test_transform_block_layout_fuses_spatial_axes():
    sch = tir.Schedule(rowsum)
    sch.transform_block_layout("C", lambda i, j, k: (i * 6 + j, k))
    text = sch.mod["main"].script()
    assert "for ax0, ax1 in T.grid(24, 8):" in text
    assert 'T.axis.remap("SR", [ax0, ax1])' in text
    assert "C[v0 // 6, v0 % 6] = C[v0 // 6, v0 % 6] + A[v0 // 6, v0 % 6, v1]" in text
    _run(sch.mod["main"])
    testing.verify_trace_roundtrip(sch, rowsum)
    assert "index_map=\"lambda i, j, k: (i * 6 + j, k,)\"" in str(sch.trace)


def test_transform_block_layout_three_digit_and_permutation():
    sch = tir.Schedule(rowsum)
    sch.transform_block_layout("C", lambda i, j, k: (k, i * 6 + j))
    _run(sch.mod["main"])
    assert 'T.axis.remap("RS", [ax0, ax1])' in sch.mod["main"].script()


@pytest.mark.parametrize("index_map, words", [
    (lambda i, j, k: (i + j, k), "not bijective affine"),
    (lambda i, j, k: (i * 6 + j + k * 24,), "more than one type of original iter vars"),
    (lambda i, j: (i, j), "takes 2 indices"),
    (lambda i, j, k: (i, k), "drops an index"),
])
def test_transform_block_layout_refusals(index_map, words):
    sch = tir.Schedule(rowsum)
    with pytest.raises(ScheduleError, match=words):
        sch.transform_block_layout("C", index_map)
    testing.assert_structural_equal(sch.mod["main"], rowsum)


def test_index_map_text_reads_back_without_eval():
    variables, outputs = map_exprs("lambda i, j: (j // 4, i * 2 + j % 4)", 2,
                                   ["int32", "int32"], "t")
    assert [v.name for v in variables] == ["i", "j"] and len(outputs) == 2
    with pytest.raises(ScheduleError, match="cannot read index map"):
        map_exprs("lambda i: (__import__('os'),)", 1, ["int32"], "t")
