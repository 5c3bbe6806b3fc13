"""compute_at / reverse_compute_at with TVM's semantics, and rolling_buffer: each result
computes what numpy computes (msc's TIR interpreter), prints as TVMScript that parses back to
the same text, replays from its JSON trace, and each refusal names what TVM names."""

import json

import numpy as np
import pytest

from msc import tir
from msc.errors import ScheduleError
from msc.tir.interp import run_prim_func
from msc.tir.parser import parse_tir_text

RNG = np.random.default_rng(1)

MM_RELU = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16, 12), "float32"), B: T.Buffer((12, 8), "float32"),
         C: T.Buffer((16, 8), "float32")):
    Y = T.sblock_alloc_buffer((16, 8))
    for i, j, k in T.grid(16, 8, 12):
        with T.sblock("Y"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                Y[vi, vj] = T.float32(0)
            Y[vi, vj] = Y[vi, vj] + A[vi, vk] * B[vk, vj]
    for i, j in T.grid(16, 8):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(Y[vi, vj], T.float32(0))
'''

# B and D share one loop nest; E reads both, C reads B with a halo of one element.
STENCIL = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((16,), "float32"), C: T.Buffer((15,), "float32"),
         E: T.Buffer((16,), "float32")):
    B = T.sblock_alloc_buffer((16,))
    D = T.sblock_alloc_buffer((16,))
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi] * T.float32(2)
        with T.sblock("D"):
            vi = T.axis.spatial(16, i)
            D[vi] = A[vi] + T.float32(1)
    for i in range(15):
        with T.sblock("C"):
            vi = T.axis.spatial(15, i)
            C[vi] = B[vi] + B[vi + 1]
    for i in range(16):
        with T.sblock("E"):
            vi = T.axis.spatial(16, i)
            E[vi] = D[vi] * T.float32(3)
'''

POOL = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((20,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.sblock_alloc_buffer((18,))
    for i, k in T.grid(18, 3):
        with T.sblock("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(-1e30)
            B[vi] = T.max(B[vi], A[vi + vk])
    for i, k in T.grid(16, 3):
        with T.sblock("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(-1e30)
            C[vi] = T.max(C[vi], B[vi + vk])
'''


def _sch(text):
    return tir.Schedule(parse_tir_text(text)["main"], debug_mask="all")


def _round_trip(sch, text):
    """Print -> parse -> print is a fixed point, and the JSON trace replays to the same
    function on a fresh schedule."""
    script = sch.mod["main"].script()
    assert parse_tir_text(script)["main"].script() == script
    fresh = _sch(text)
    tir.Trace.from_json(json.dumps(sch.trace.as_json())).apply_to_schedule(fresh)
    assert fresh.mod["main"].script() == script
    return script


def _mm_relu(sch):
    a = RNG.standard_normal((16, 12)).astype("float32")
    b = RNG.standard_normal((12, 8)).astype("float32")
    out = np.zeros((16, 8), "float32")
    run_prim_func(sch.mod["main"], a, b, out)
    np.testing.assert_allclose(out, np.maximum(a @ b, 0), rtol=1e-5, atol=1e-5)


def _stencil(sch):
    a = RNG.standard_normal(16).astype("float32")
    c, e = np.zeros(15, "float32"), np.zeros(16, "float32")
    run_prim_func(sch.mod["main"], a, c, e)
    np.testing.assert_allclose(c, 2 * a[:-1] + 2 * a[1:], rtol=1e-6)
    np.testing.assert_allclose(e, (a + 1) * 3, rtol=1e-6)


def test_compute_at_moves_a_reduction_block_under_its_consumer_loop():
    sch = _sch(MM_RELU)
    i, _ = sch.get_loops("C")
    sch.compute_at(sch.get_sblock("Y"), i)
    text = _round_trip(sch, MM_RELU)
    nest = text[text.index("for i in range(16)"):]
    assert nest.index('T.sblock("Y")') < nest.index('T.sblock("C")')
    assert "for ax0, ax1 in T.grid(8, 12):" in text     # one row of Y: j and the reduce axis
    assert 'vi, vj, vk = T.axis.remap("SSR", [i, ax0, ax1])' in text
    _mm_relu(sch)


def test_reverse_compute_at_takes_the_tile_its_producer_writes():
    sch = _sch(MM_RELU)
    _, j, _ = sch.get_loops("Y")
    j0, _ = sch.split(j, [None, 4])
    sch.reverse_compute_at("C", j0)
    text = _round_trip(sch, MM_RELU)
    assert "vj = T.axis.spatial(8, j_0 * 4 + ax0)" in text
    _mm_relu(sch)


def test_compute_at_of_a_block_sharing_its_nest_covers_the_halo_with_a_predicate():
    sch = _sch(STENCIL)
    i0, _ = sch.split(sch.get_loops("C")[0], [None, 4])
    sch.compute_at("B", i0)
    text = _round_trip(sch, STENCIL)
    assert "for ax0 in range(5):" in text                 # 4 outputs read 5 inputs
    assert "T.where(i_0 * 4 + ax0 < 16)" in text          # the last tile stops at the buffer
    assert text.count('T.sblock("D")') == 1 and 'T.sblock("B")' in text
    _stencil(sch)


SLOTS = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.sblock_alloc_buffer((8,))
    Q = T.sblock_alloc_buffer((8,))
    for i in range(8):
        with T.sblock("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] * T.float32(2)
    for i in range(8):
        with T.sblock("P"):
            vi = T.axis.spatial(8, i)
            Q[vi] = A[vi] + T.float32(1)
        with T.sblock("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = B[vi] + Q[vi]
'''


@pytest.mark.parametrize("index, order", [(-1, "PBC"), (-2, "BPC"), (0, "BPC"), (1, "PBC")])
def test_compute_at_index_picks_the_slot_among_the_loop_body(index, order):
    sch = _sch(SLOTS)
    sch.compute_at("B", sch.get_loops("C")[0], index=index)
    text = _round_trip(sch, SLOTS)
    assert "".join(sorted("BPC", key=lambda n: text.index(f'T.sblock("{n}")'))) == order
    a = RNG.standard_normal(8).astype("float32")
    out = np.zeros(8, "float32")
    run_prim_func(sch.mod["main"], a, out)
    np.testing.assert_allclose(out, 3 * a + 1, rtol=1e-6, atol=1e-6)


def test_an_index_past_the_first_consumer_is_refused():
    sch = _sch(SLOTS)
    with pytest.raises(ScheduleError, match=r"Valid index:\(-1, -2, \[0, 1\]\), current index=2"):
        sch.compute_at("B", sch.get_loops("C")[0], index=2)


def test_preserve_unit_loops_keeps_loops_of_extent_one():
    plain, kept = _sch(STENCIL), _sch(STENCIL)
    for sch, preserve in ((plain, False), (kept, True)):
        sch.compute_at("B", sch.get_loops("C")[0], preserve_unit_loops=preserve)
        _stencil(sch)
    assert "for ax0 in range(2)" in plain.mod["main"].script()
    sch = _sch(STENCIL)
    sch.compute_at("D", sch.get_loops("E")[0], preserve_unit_loops=True)
    assert "for ax0 in range(1):" in sch.mod["main"].script()
    other = _sch(STENCIL)
    other.compute_at("D", other.get_loops("E")[0])
    assert "for ax0 in range(1):" not in other.mod["main"].script()
    _stencil(sch)
    _stencil(other)


def test_reverse_compute_at_inverts_a_floordiv_read():
    text = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((8,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.sblock_alloc_buffer((8,))
    for i in range(8):
        with T.sblock("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] + T.float32(1)
    for i in range(16):
        with T.sblock("C"):
            vi = T.axis.spatial(16, i)
            C[vi] = B[vi // 2]
'''
    sch = _sch(text)
    sch.reverse_compute_at("C", sch.get_loops("B")[0])
    script = _round_trip(sch, text)
    assert "for ax0 in range(2):" in script and "vi = T.axis.spatial(16, i * 2 + ax0)" in script
    a = RNG.standard_normal(8).astype("float32")
    out = np.zeros(16, "float32")
    run_prim_func(sch.mod["main"], a, out)
    np.testing.assert_allclose(out, np.repeat(a + 1, 2), rtol=1e-6)


@pytest.mark.parametrize("apply, match", [
    (lambda s: s.compute_at("C", s.get_loops("E")[0]), "is an output block"),
    (lambda s: s.compute_at("B", s.get_loops("B")[0]), "loop not to be the ancestor of block"),
    (lambda s: s.compute_at("D", s.get_loops("C")[0]), "requires all the consumer"),
    (lambda s: s.reverse_compute_at("C", s.get_loops("E")[0]), "requires all the producer"),
])
def test_refusals_are_tvms_and_change_nothing(apply, match):
    sch = _sch(STENCIL)
    before = sch.mod["main"].script()
    with pytest.raises(ScheduleError, match=match):
        apply(sch)
    assert sch.mod["main"].script() == before


def test_a_block_that_is_neither_complete_nor_a_reduction_is_refused():
    text = STENCIL.replace("D[vi] = A[vi] + T.float32(1)", "B[vi] = A[vi] + T.float32(1)")
    sch = _sch(text)
    with pytest.raises(ScheduleError, match="not a complete block - it violates condition #2"):
        sch.compute_at("B", sch.get_loops("C")[0])


def test_rolling_buffer_keeps_a_window_and_the_values():
    sch = _sch(POOL)
    i0, _ = sch.split(sch.get_loops("C")[0], [None, 4])
    sch.compute_at("B", i0)
    sch.rolling_buffer("B", 0)
    text = _round_trip(sch, POOL)
    assert "B = T.sblock_alloc_buffer((6,))" in text       # 4 outputs of a 3-wide pool
    assert "B[vi % 6]" in text and "T.axis.opaque(18" in text
    assert "T.where(i_0 < 1 or 2 <= ax0)" in text           # rows of the previous tile reused
    a = RNG.standard_normal(20).astype("float32")
    out = np.zeros(16, "float32")
    run_prim_func(sch.mod["main"], a, out)
    expected = np.max(np.stack([a[k:k + 16] for k in range(5)]), axis=0)
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_rolling_buffer_refuses_a_producer_outside_the_tile_loop():
    sch = _sch(POOL)
    sch.split(sch.get_loops("C")[0], [None, 4])
    with pytest.raises(ScheduleError, match="lca of the access location"):
        sch.rolling_buffer("B", 0)


PAD = '''
@T.prim_func(s_tir=True)
def main(x: T.Buffer((10,), "float32"), y: T.Buffer((14,), "float32")):
    for i in range(14):
        with T.sblock("pad"):
            vi = T.axis.spatial(14, i)
            y[vi] = T.if_then_else(2 <= vi and vi < 12, x[vi - 2], T.float32(-1))
'''


def test_decompose_padding_fills_then_writes_the_in_bound_range():
    sch = _sch(PAD)
    fill = sch.decompose_padding("pad", sch.get_loops("pad")[0])
    assert sch.get(fill).name == "pad_pad_const"
    text = _round_trip(sch, PAD)
    assert text.index('T.sblock("pad_pad_const")') < text.index('T.sblock("pad")')
    assert "for i in range(10):" in text and "y[vi + 2] = x[vi]" in text
    x = RNG.standard_normal(10).astype("float32")
    y = np.zeros(14, "float32")
    run_prim_func(sch.mod["main"], x, y)
    np.testing.assert_allclose(y, np.pad(x, 2, constant_values=-1))


@pytest.mark.parametrize("body, match", [
    ("y[vi] = x[vi - 2] * T.float32(2)", "constrained by a padding predicate"),
    ("y[vi] = T.if_then_else(0 <= vi and vi < 14, x[vi % 10], T.float32(-1))",
     "in-bound predicate is trivial"),
    ("y[vi] = T.if_then_else(2 <= vi and vi < 12, x[vi - 2], x[0])", "Pad value should be"),
])
def test_decompose_padding_refuses_what_is_not_padding(body, match):
    sch = _sch(PAD.replace(
        "y[vi] = T.if_then_else(2 <= vi and vi < 12, x[vi - 2], T.float32(-1))", body))
    with pytest.raises(ScheduleError, match=match):
        sch.decompose_padding("pad", sch.get_loops("pad")[0])
    assert not sch.can_decompose_padding("pad", sch.get_loops("pad")[0])


def test_reverse_compute_at_inverts_a_fused_layout_read():
    text = '''
@T.prim_func(s_tir=True)
def main(A: T.Buffer((3, 16), "float32"), C: T.Buffer((6, 8), "float32")):
    B = T.sblock_alloc_buffer((3, 16))
    for i, j in T.grid(3, 16):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)
    for i, j in T.grid(6, 8):
        with T.sblock("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[(vi * 8 + vj) // 16, (vi * 8 + vj) % 16]
'''
    sch = _sch(text)
    sch.reverse_compute_at("C", sch.get_loops("B")[0])
    script = _round_trip(sch, text)
    assert "for ax0, ax1 in T.grid(2, 8):" in script       # one row of B is two rows of C
    assert "vi = T.axis.spatial(6, i * 2 + ax0)" in script
    a = RNG.standard_normal((3, 16)).astype("float32")
    out = np.zeros((6, 8), "float32")
    run_prim_func(sch.mod["main"], a, out)
    np.testing.assert_allclose(out, (a + 1).reshape(6, 8), rtol=1e-6)
