"""compute_inline / reverse_compute_inline and rfactor: values kept (msc's TIR interpreter against numpy),
the text TVM gives for the same schedule, the trace replays, and TVM's refusals."""

import numpy as np
import pytest

from msc import tir
from msc.errors import ScheduleError
from msc.s_tir import TensorIntrin
from msc.tir.interp import run_prim_func
from msc.tir.parser import parse_tir_text

CHAIN = '''
@T.prim_func
def chain(A: T.Buffer((8, 16), "float32"), D: T.Buffer((2, 4, 16), "float32")):
    B = T.alloc_buffer((8, 16), "float32")
    C = T.alloc_buffer((8, 16), "float32")
    for i, j in T.grid(8, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(8, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.exp(B[vi, vj]) + B[vi, vj]
    for i, j, k in T.grid(2, 4, 16):
        with T.block("D"):
            vi, vj, vk = T.axis.remap("SSS", [i, j, k])
            D[vi, vj, vk] = C[vi * 4 + vj, vk] + T.float32(1)
'''

A = np.random.default_rng(0).standard_normal((8, 16)).astype("float32")
EXPECTED = (np.exp(2 * A) + 2 * A + 1).reshape(2, 4, 16)


def _run(func) -> np.ndarray:
    out = np.zeros((2, 4, 16), "float32")
    run_prim_func(func, A, out)
    return out


def _sch():
    return tir.Schedule(parse_tir_text(CHAIN)["chain"])


def test_compute_inline_substitutes_the_producer_into_each_load():
    sch = _sch()
    sch.compute_inline("B")
    func = sch.mod["main"]
    np.testing.assert_allclose(_run(func), EXPECTED, rtol=1e-5)
    text = func.script()
    assert 'T.sblock("B")' not in text and "B = T." not in text  # block and buffer gone
    assert "C[vi, vj] = T.exp(A[vi, vj] * T.float32(2.0)) + A[vi, vj] * T.float32(2.0)" in text
    assert parse_tir_text(text)[func.name].script() == text


def test_reverse_compute_inline_reads_a_mixed_radix_index_back():
    sch = _sch()
    sch.reverse_compute_inline("D")  # D reads C[vi * 4 + vj, vk]: C's axes give vi, vj back
    func = sch.mod["main"]
    np.testing.assert_allclose(_run(func), EXPECTED, rtol=1e-5)
    text = func.script()
    assert "D[vi // 4, vi % 4, vj] = T.exp(B[vi, vj]) + B[vi, vj] + T.float32(1.0)" in text
    assert 'T.sblock("D")' not in text


def test_both_inlines_leave_one_block_and_the_trace_replays():
    sch = _sch()
    sch.compute_inline(sch.get_block("B"))
    sch.reverse_compute_inline(sch.get_block("D"))
    func = sch.mod["main"]
    np.testing.assert_allclose(_run(func), EXPECTED, rtol=1e-5)
    blocks = [ln for ln in func.script().splitlines() if ln.strip().startswith("with T.sblock(")]
    assert len(blocks) == 1
    again = _sch()
    sch.trace.apply_to_schedule(again)
    assert again.mod["main"].script() == func.script()
    assert [i.kind for i in sch.trace.insts if "Inline" in i.kind] == \
        ["ComputeInline", "ReverseComputeInline"]


def test_over_computed_producer_gets_a_predicate():
    text = CHAIN.replace('D: T.Buffer((2, 4, 16), "float32")', 'D: T.Buffer((6, 16), "float32")')
    text = text[:text.index("    for i, j, k in T.grid(2, 4, 16)")] + '''    for i, j in T.grid(6, 16):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = C[vi, vj] + T.float32(1)
'''
    sch = tir.Schedule(parse_tir_text(text)["chain"])
    sch.reverse_compute_inline("D")
    func = sch.mod["main"]
    assert "T.where(i < 6)" in func.script()
    out = np.full((6, 16), -7.0, "float32")
    run_prim_func(func, A, out)
    np.testing.assert_allclose(out, EXPECTED.reshape(8, 16)[:6], rtol=1e-5)


@pytest.mark.parametrize("primitive, block, words", [
    ("compute_inline", "D", "output block"),             # D writes a parameter
    ("reverse_compute_inline", "B", "reads ['A']"),      # B reads no produced buffer
    ("compute_inline", "nope", "no block 'nope'"),
])
def test_refusals_name_the_block(primitive, block, words):
    sch = _sch()
    with pytest.raises(ScheduleError, match=".*") as err:
        getattr(sch, primitive)(block)
    assert words in str(err.value) or "exactly one buffer" in str(err.value)
    np.testing.assert_allclose(_run(sch.mod["main"]), EXPECTED, rtol=1e-5)  # unchanged


def test_a_reduction_block_is_not_inlined():
    reduce = '''
@T.prim_func
def red(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4,), "float32")):
    S = T.alloc_buffer((4,), "float32")
    for i, k in T.grid(4, 8):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S[vi] = T.float32(0)
            S[vi] = S[vi] + A[vi, vk]
    for i in range(4):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = S[vi] * T.float32(2)
'''
    sch = tir.Schedule(parse_tir_text(reduce)["red"])
    with pytest.raises(ScheduleError, match="reduction block"):
        sch.compute_inline("S")
    with pytest.raises(ScheduleError, match="reduction block"):
        sch.reverse_compute_inline("C")


def test_opaque_access_is_refused():
    text = CHAIN.replace('            C[vi, vj] = T.exp(B[vi, vj]) + B[vi, vj]',
                         '            T.evaluate(B.access_ptr("r", extent=16))\n'
                         '            C[vi, vj] = T.exp(B[vi, vj]) + B[vi, vj]')
    sch = tir.Schedule(parse_tir_text(text)["chain"])
    with pytest.raises(ScheduleError, match="accessed opaquely"):
        sch.compute_inline("B")


def test_tensor_intrin_registry():
    desc = parse_tir_text(CHAIN)["chain"]
    TensorIntrin.register("msc_test_chain", desc, desc)
    assert TensorIntrin.get("msc_test_chain").impl is desc
    with pytest.raises(ScheduleError, match="already registered"):
        TensorIntrin.register("msc_test_chain", desc, desc)
    TensorIntrin.register("msc_test_chain", desc, desc, override=True)
    assert TensorIntrin.get("msc_no_such", allow_missing=True) is None
    with pytest.raises(ScheduleError, match="no TensorIntrin 'msc_no_such'"):
        TensorIntrin.get("msc_no_such")


MM = '''
@T.prim_func
def mm(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
       C: T.Buffer((16, 16), "float32")):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("update"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
'''


@pytest.mark.parametrize("factor_axis", [0, 2, -1])
def test_rfactor_partial_sums_then_write_back(factor_axis):
    sch = tir.Schedule(parse_tir_text(MM)["mm"])
    _, _, k = sch.get_loops("update")
    _, ki = sch.split(k, factors=[None, 4])
    rf = sch.rfactor(ki, factor_axis)
    func = sch.mod["main"]
    text = func.script()
    shape = [16, 16]
    shape.insert(factor_axis % 3, 4)
    assert f"C_rf = T.sblock_alloc_buffer(({', '.join(map(str, shape))}))" in text
    assert sch.get(rf).name == "update_rf" and 'T.sblock("update")' in text
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((16, 16)).astype("float32"), rng.standard_normal((16, 16))
    c = np.zeros((16, 16), "float32")
    run_prim_func(func, a, b.astype("float32"), c)
    np.testing.assert_allclose(c, a @ b.T.astype("float32"), rtol=1e-4, atol=1e-5)
    again = tir.Schedule(parse_tir_text(MM)["mm"])
    sch.trace.apply_to_schedule(again)
    assert again.mod["main"].script() == text


@pytest.mark.parametrize("edit, words", [
    (("T.float32(0)", "T.float32(1)"), "not the identity"),
    (("C[vi, vj] + A[vi, vk] * B[vj, vk]", "A[vi, vk] * B[vj, vk]"), "commutative reduction"),
])
def test_rfactor_refusals(edit, words):
    sch = tir.Schedule(parse_tir_text(MM.replace(*edit))["mm"])
    _, _, k = sch.get_loops("update")
    with pytest.raises(ScheduleError, match=words):
        sch.rfactor(k, 0)


def test_rfactor_of_a_spatial_loop_is_refused():
    sch = tir.Schedule(parse_tir_text(MM)["mm"])
    i, _, _ = sch.get_loops("update")
    with pytest.raises(ScheduleError, match="binds a spatial axis"):
        sch.rfactor(i, 0)


@pytest.mark.parametrize("name, axis, keepdims", [("sum", 1, False), ("max", 0, True),
                                                  ("min", None, False)])
def test_topi_reductions_build_tensorir(name, axis, keepdims):
    from msc import te, topi

    A = te.placeholder((4, 8), "float32", name="A")
    func = te.create_prim_func([A, getattr(topi, name)(A, axis=axis, keepdims=keepdims)])
    a = np.random.default_rng(2).standard_normal((4, 8)).astype("float32")
    want = getattr(np, name)(a, axis=axis, keepdims=keepdims)
    out = np.zeros(np.shape(want), "float32")
    run_prim_func(func, a, out)
    np.testing.assert_allclose(out, want, rtol=1e-6)
    with pytest.raises(Exception, match="out of range"):
        getattr(topi, name)(A, axis=2)
