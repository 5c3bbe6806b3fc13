"""transform_block_layout / transform_layout: a block's iteration space, or a buffer's
layout, re-expressed through an index map; values are kept, the trace replays (the map is
kept as its lambda text), and maps that are not bijective are refused as TVM refuses them."""

import re

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


@T.prim_func(s_tir=True)
def two(A: T.Buffer((8, 12), "float32"), C: T.Buffer((8, 12), "float32")):
    B = T.sblock_alloc_buffer((8, 12))
    for i, j in T.grid(8, 12):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(8, 12):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + 1.0


def _run_two(func, a_shape=(8, 12), a_of=lambda a: a):
    a = np.random.default_rng(1).standard_normal((8, 12)).astype("float32")
    c = np.zeros((8, 12), "float32")
    run_prim_func(func, np.ascontiguousarray(a_of(a)).reshape(a_shape), c)
    np.testing.assert_allclose(c, 2 * a + 1, rtol=1e-6)


def test_transform_layout_of_an_intermediate_buffer():
    sch = tir.Schedule(two)
    sch.transform_layout("B", "B", lambda i, j: (j // 4, i, j % 4))
    text = sch.mod["main"].script()
    assert "B = T.sblock_alloc_buffer((3, 8, 4))" in text
    assert "C[vi, vj] = B[vj // 4, vi, vj % 4] + T.float32(1.0)" in text
    _run_two(sch.mod["main"])
    testing.verify_trace_roundtrip(sch, two)


def test_transform_layout_of_a_parameter_changes_the_signature():
    sch = tir.Schedule(two)
    sch.transform_layout("B", ("read", 0), lambda i, j: (j, i))
    func = sch.mod["main"]
    assert func.params[0].shape == (12, 8) and "A[vj, vi]" in func.script()
    _run_two(func, (12, 8), lambda a: a.T)


@pytest.mark.parametrize("kwargs, words", [
    ({"index_map": lambda i, j: (i, j // 5, j % 5)}, "introduces padding"),
    ({"index_map": lambda i, j: (j, i), "pad_value": 0}, "dtype int32"),
    ({"index_map": lambda i, j: (i + j,)}, "not injective"),
])
def test_transform_layout_refusals(kwargs, words):
    sch = tir.Schedule(two)
    with pytest.raises(ScheduleError, match=words):
        sch.transform_layout("B", "B", **kwargs)
    testing.assert_structural_equal(sch.mod["main"], two)


def test_padded_layout_of_an_output_writes_the_pad_value():
    sch = tir.Schedule(two)
    sch.transform_layout("C", "C", lambda i, j: (i, j // 5, j % 5), pad_value=-1.0)
    text = sch.mod["main"].script()
    assert "C: T.Buffer((8, 3, 5), \"float32\")" in text
    assert re.search(r"T.if_then_else\((vj\w*) == 2 and 2 <= (vk\w*), T.float32\(-1.0\), "
                     r"B\[vi\w*, \1 \* 5 \+ \2\] \+ T.float32\(1.0\)\)", text)
    a = np.random.default_rng(2).standard_normal((8, 12)).astype("float32")
    c = np.zeros((8, 3, 5), "float32")
    run_prim_func(sch.mod["main"], a, c)
    flat = c.reshape(8, 15)
    np.testing.assert_allclose(flat[:, :12], 2 * a + 1, rtol=1e-6)
    assert (flat[:, 12:] == -1).all()
    testing.verify_trace_roundtrip(sch, two)


def test_padded_layout_after_a_block_with_other_stores_gets_a_padding_block():
    @T.prim_func(s_tir=True)
    def both(A: T.Buffer((14,), "float32"), C: T.Buffer((14,), "float32"),
             D: T.Buffer((14,), "float32")):
        for i in range(14):
            with T.sblock("B"):
                vi = T.axis.remap("S", [i])
                C[vi] = A[vi] + 1.0
                D[vi] = A[vi] * 2.0

    sch = tir.Schedule(both)
    sch.transform_layout("B", "C", lambda i: (i // 4, i % 4), pad_value=0.5)
    text = sch.mod["main"].script()
    assert 'T.sblock("B_pad_C")' in text
    assert re.search(r"T.where\((i\w*) == 3 and 2 <= (j\w*)\)", text)
    a = np.random.default_rng(3).standard_normal(14).astype("float32")
    c, d = np.zeros((4, 4), "float32"), np.zeros(14, "float32")
    run_prim_func(sch.mod["main"], a, c, d)
    np.testing.assert_allclose(c.reshape(16)[:14], a + 1, rtol=1e-6)
    np.testing.assert_allclose(c.reshape(16)[14:], 0.5)
    np.testing.assert_allclose(d, 2 * a, rtol=1e-6)


def test_padding_an_input_buffer_is_refused_by_name():
    sch = tir.Schedule(two)
    with pytest.raises(ScheduleError, match="padding the input buffer 'A'"):
        sch.transform_layout("B", ("read", 0), lambda i, j: (i, j // 5, j % 5), pad_value=0.0)
    testing.assert_structural_equal(sch.mod["main"], two)


def test_transform_layout_assume_injective_leaves_the_pad_unwritten():
    sch = tir.Schedule(two)
    sch.transform_layout("B", "B", lambda i, j: (i, j // 5, j % 5),
                         assume_injective_transform=True)
    assert "B = T.sblock_alloc_buffer((8, 3, 5))" in sch.mod["main"].script()
    _run_two(sch.mod["main"])
