"""tir.Schedule primitives on msc prim funcs: each one keeps the computed values (checked with
msc's TIR interpreter against numpy), prints as TVMScript that parses back to the same text,
and refuses what it cannot do with a ScheduleError naming the block or loop."""

import numpy as np
import pytest

from msc import tir
from msc.errors import ScheduleError
from msc.tir.interp import run_prim_func
from msc.tir.parser import parse_tir_text

MM_RELU = '''
@T.prim_func
def mm_relu(A: T.Buffer((16, 12), "float32"), B: T.Buffer((12, 8), "float32"),
            C: T.Buffer((16, 8), "float32")):
    T.func_attr({"global_symbol": "mm_relu", "tir.noalias": True})
    Y = T.alloc_buffer((16, 8), dtype="float32")
    for i, j, k in T.grid(16, 8, 12):
        with T.block("Y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(16, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))
'''

RNG = np.random.default_rng(0)
A = RNG.standard_normal((16, 12)).astype("float32")
B = RNG.standard_normal((12, 8)).astype("float32")
EXPECTED = np.maximum(A @ B, 0)


def _sch():
    return tir.Schedule(parse_tir_text(MM_RELU)["mm_relu"])


def _check(sch):
    """Same values as numpy, and print -> parse -> print is a fixed point."""
    func = sch.mod["main"]
    out = np.zeros((16, 8), "float32")
    run_prim_func(func, A, B, out)
    np.testing.assert_allclose(out, EXPECTED, rtol=1e-5, atol=1e-5)
    text = func.script()
    assert parse_tir_text(text)[func.name].script() == text
    return text


def test_split_reorder_reverse_compute_at_decompose_as_in_the_lesson():
    sch = _sch()
    block_y = sch.get_block("Y")
    _, j, k = sch.get_loops(block_y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    init = sch.decompose_reduction(block_y, k)
    text = _check(sch)
    assert 'T.sblock("Y_init")' in text and 'T.sblock("Y_update")' in text
    assert "for k, j_1 in T.grid(12, 4)" in text
    assert sch.get(init).name == "Y_init" and sch.get(block_y).name == "Y_update"
    assert [lp.var.name for lp in map(sch.get, sch.get_loops(block_y))] == ["i", "j_0", "k",
                                                                          "j_1"]


def test_non_dividing_split_guards_the_block():
    sch = _sch()
    i, _, _ = sch.get_loops(sch.get_block("Y"))
    sch.split(i, factors=[None, 5])            # 16 = 4 * 5 - 4: a T.where guards the tail
    assert "T.where(i_0 * 5 + i_1 < 16)" in _check(sch)


def test_fuse_and_loop_kinds():
    sch = _sch()
    i, j = sch.get_loops(sch.get_block("C"))
    fused = sch.fuse(i, j)
    outer, inner = sch.split(fused, factors=[None, 16])
    sch.parallel(outer)
    sch.vectorize(inner)
    text = _check(sch)
    assert "for i_j_fused_0 in T.parallel(8):" in text
    assert "for i_j_fused_1 in T.vectorized(16):" in text
    k = sch.get_loops(sch.get_block("Y"))[2]
    sch.unroll(k)
    assert "T.unroll(12)" in _check(sch)


def test_cache_read_compute_at_and_cache_write_reverse_compute_at():
    sch = _sch()
    block_y = sch.get_block("Y")
    a_local = sch.cache_read(block_y, 0, "local")      # reads: A, B (Y is the output)
    y_local = sch.cache_write(block_y, 0, "local")
    i, j, k = sch.get_loops(block_y)
    i0, i1 = sch.split(i, factors=[4, 4])
    sch.reorder(i0, j, i1, k)
    sch.compute_at(a_local, i0)
    sch.reverse_compute_at(y_local, j)
    text = _check(sch)
    assert sch.get(a_local).name == "A_local" and sch.get(y_local).name == "Y_local"
    assert "A_local = T.sblock_alloc_buffer((16, 12), scope=\"local\")" in text
    nest = text[text.index("for i_0"):]
    assert nest.index('T.sblock("A_local")') < nest.index('T.sblock("Y")') < \
        nest.index('T.sblock("Y_local")')


def test_trace_json_replay_gives_the_same_function():
    sch = _sch()
    block_y = sch.get_block("Y")
    i, j, k = sch.get_loops(block_y)
    tiles = sch.sample_perfect_tile(i, n=2, max_innermost_factor=4)
    i0, i1 = sch.split(i, factors=tiles)
    sch.reorder(i0, j, k, i1)
    sch.decompose_reduction(block_y, j)
    text = str(sch.trace)
    assert "sch.sample_perfect_tile(loop=l1, n=2, max_innermost_factor=4, decision=" in text
    saved = sch.trace.as_json()
    replayed = _sch()
    tir.Trace.from_json(__import__("json").dumps(saved)).apply_to_schedule(replayed)
    assert replayed.mod["main"].script() == sch.mod["main"].script()
    assert replayed.trace.as_json() == saved
    other = _sch()  # another decision for the sampled tile: another, still correct, function
    sch.trace.apply_to_schedule(other, decisions={2: [2, 8]})
    assert "for i_0 in range(2)" in _check(other)


@pytest.mark.parametrize("apply, match", [
    (lambda s: s.get_block("Z"), "no block 'Z'"),
    (lambda s: s.parallel(s.get_loops(s.get_block("Y"))[2]), "reduce axis 'vk'"),
    (lambda s: s.vectorize(s.get_loops(s.get_block("Y"))[0]), "has loops inside"),
    (lambda s: s.split(s.get_loops(s.get_block("Y"))[0], [None, None]), "at most one None"),
    (lambda s: s.fuse(*s.get_loops(s.get_block("Y"))[::2]), "perfectly nested"),
    (lambda s: s.decompose_reduction(s.get_block("C"), s.get_loops(s.get_block("C"))[0]),
     "has no T.init"),
    (lambda s: s.compute_at(s.get_block("C"), s.get_loops(s.get_block("Y"))[0]),
     "is an output block"),
    (lambda s: s.reverse_compute_at(s.get_block("C"), s.get_loops(s.get_block("C"))[0]),
     "ancestor of block"),
    (lambda s: s.cache_read(s.get_block("Y"), 5, "local"), "no read buffer 5"),
])
def test_invalid_primitives_raise_schedule_errors_and_change_nothing(apply, match):
    sch = _sch()
    before = sch.mod["main"].script()
    with pytest.raises(ScheduleError, match=match):
        apply(sch)
    assert sch.mod["main"].script() == before


def test_stale_loop_after_split_is_named():
    sch = _sch()
    i = sch.get_loops(sch.get_block("Y"))[0]
    sch.split(i, [4, 4])
    with pytest.raises(ScheduleError, match="loop 'i' is not in function"):
        sch.split(i, [2, 8])
