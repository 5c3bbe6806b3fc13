"""Schedules print what TVM prints: index sums in TVM's canonical order (scale descending,
ties as written), a split's guard as TVM builds it (unsimplified), a fused extent multiplied
outer to inner, ``range(0, n)`` without ``- 0``, ``elem_offset=0`` as the default, an int
operand of a float op cast, decompose_reduction keeping the init's annotations and thread
tags, and an offset factor's ``<name>_elem_offset`` var. Each case compares the printed
result with TVMScript written as TVM's tests expect, and the values with numpy."""

import numpy as np

from msc import s_tir, testing, tir
from msc.script import tir as T
from msc.tir.interp import run_prim_func


def test_a_sum_keeps_tvm_canonical_order():
    oh, kh, n, m = (tir.Var(x, "int32") for x in ("oh", "kh", "n", "m"))
    assert tir.to_str(oh + kh) == "oh + kh"  # ties stay as written (msc sorted them by name)
    assert tir.to_str(kh + oh * 2) == "oh * 2 + kh"  # larger scale first
    assert tir.to_str(n * m + n * 3 - 5) == "n * 3 + n * m - 5"


@T.prim_func(s_tir=True)
def elementwise(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):
    for i in range(128):
        with T.sblock("B"):
            vi = T.axis.S(128, i)
            B[vi] = A[vi] * 2.0


@T.prim_func(s_tir=True)
def split_guarded(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):
    for i0, i1, i2 in T.grid(22, 2, 3):
        with T.sblock("B"):
            vi = T.axis.S(128, i0 * 6 + i1 * 3 + i2)
            T.where((i0 * 2 + i1) * 3 + i2 < 128)
            B[vi] = A[vi] * T.float32(2.0)


def test_split_guard_is_the_substitute_as_tvm_builds_it():
    sch = s_tir.Schedule(elementwise)
    (i,) = sch.get_loops("B")
    sch.split(i, [None, 2, 3])
    testing.assert_structural_equal_ignore_global_symbol(sch.mod["main"], split_guarded)
    assert "T.where((i_0 * 2 + i_1) * 3 + i_2 < 128)" in sch.mod["main"].script()
    a = np.arange(128, dtype="float32")
    out = np.zeros(128, "float32")
    run_prim_func(sch.mod["main"], a, out)
    np.testing.assert_allclose(out, a * 2.0, rtol=0, atol=0)


@T.prim_func(s_tir=True)
def symbolic(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (n, 64))
    B = T.match_buffer(b, (n, 64))
    for i, j in T.grid(n, 64):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + 1.0


@T.prim_func(s_tir=True)
def symbolic_split(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (n, 64))
    B = T.match_buffer(b, (n, 64))
    for i_0, i_1, j in T.grid(10, (n + 9) // 10, 64):
        with T.sblock("B"):
            vi = T.axis.S(n, i_0 * ((n + 9) // 10) + i_1)
            vj = T.axis.S(64, j)
            T.where(i_0 * ((n + 9) // 10) + i_1 < n)
            B[vi, vj] = A[vi, vj] + T.float32(1.0)


def test_symbolic_split_binding_and_fused_extent_follow_tvm():
    sch = s_tir.Schedule(symbolic)
    i, _ = sch.get_loops("B")
    sch.split(i, [10, None])
    testing.assert_structural_equal_ignore_global_symbol(sch.mod["main"], symbolic_split)
    _, inner, j = sch.get_loops("B")
    sch.fuse(inner, j)
    assert "T.grid(10, (n + 9) // 10 * 64)" in sch.mod["main"].script()
    sch2 = s_tir.Schedule(symbolic)
    sch2.split(sch2.get_loops("B")[0], [None, 16])
    sch2.fuse(*sch2.get_loops("B")[:2])
    # outer extent first, as TVM multiplies the fused extents
    assert "T.grid((n + 15) // 16 * 16, 64)" in sch2.mod["main"].script()


@T.prim_func(s_tir=True)
def serial_zero(A: T.Buffer((16,), "float32"), n: T.int32):
    for i in T.serial(0, n * 2):
        with T.sblock("A"):
            vi = T.axis.S(16, i)
            A[vi] = T.float32(0)


def test_range_from_zero_and_default_offset_print_as_tvm():
    assert "for i in range(n * 2):" in serial_zero.script()
    stated = tir.Buffer("A", (tir.IntImm(4, "int32"),), elem_offset=tir.IntImm(0, "int64"))
    assert stated == tir.Buffer("A", (tir.IntImm(4, "int32"),))  # elem_offset=0 is the default


@T.prim_func(s_tir=True)
def resize(x: T.Buffer((8,), "float32"), y: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.sblock("y"):
            vi = T.axis.S(4, i)
            y[vi] = x[T.Cast("int32", T.floor(vi * 2 + 0.5))]


def test_an_int_operand_of_a_float_op_is_cast():
    assert 'T.floor(T.Cast("float32", vi * 2) + T.float32(0.5))' in resize.script()
    x = np.arange(8, dtype="float32") * 10
    out = np.zeros(4, "float32")
    run_prim_func(resize, x, out)
    np.testing.assert_allclose(out, x[np.floor(np.arange(4) * 2 + 0.5).astype(int)], rtol=0)


@T.prim_func(s_tir=True)
def rowsum(A: T.Buffer((32, 16), "float32"), B: T.Buffer((32,), "float32")):
    for t in T.thread_binding(32, thread="threadIdx.x"):
        for r in range(16):
            with T.sblock("B"):
                vi, vr = T.axis.remap("SR", [t, r])
                T.sblock_attr({"note": 1})
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vr]


def test_decompose_reduction_keeps_annotations_and_thread_tags():
    sch = s_tir.Schedule(rowsum)
    t, _ = sch.get_loops("B")
    sch.decompose_reduction("B", t)
    text = sch.mod["main"].script()
    assert 'for t_init in T.thread_binding(32, thread="threadIdx.x"):' in text
    assert text.count('T.sblock_attr({"note": 1})') == 2


@T.prim_func(s_tir=True)
def tile_view(a: T.handle):
    A = T.match_buffer(a, (4,), "uint8", offset_factor=1)
    T.evaluate(A.elem_offset)


def test_an_offset_factor_gives_the_buffer_an_offset_var():
    (buf,) = tile_view.buffers
    assert isinstance(buf.elem_offset, tir.Var) and buf.elem_offset.name == "A_elem_offset"
    assert "elem_offset=A_elem_offset" in tile_view.script()
    assert "T.evaluate(A_elem_offset)" in tile_view.script()


@T.prim_func(s_tir=True)
def overcomputed(A: T.Buffer((128, 128), "float32"), C: T.Buffer((127, 127), "float32")):
    B = T.sblock_alloc_buffer((128, 128))
    for i in range(16384):
        with T.sblock("B"):
            vi = T.axis.spatial(128, i // 128)
            vj = T.axis.spatial(128, i % 128)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(127, 127):
        with T.sblock("C"):
            cvi, cvj = T.axis.remap("SS", [i, j])
            C[cvi, cvj] = B[cvi, cvj] + 1.0


def test_an_inlined_predicate_is_tightened_as_tvm_simplifies_it():
    sch = s_tir.Schedule(overcomputed)
    sch.reverse_compute_inline(sch.get_sblock("C"))
    # i // 128 < 127 is i < 16256; with i % 128 < 127 the last point is 16254
    assert "T.where(i < 16255 and i % 128 < 127)" in sch.mod["main"].script()
    a = np.arange(128 * 128, dtype="float32").reshape(128, 128)
    out = np.zeros((127, 127), "float32")
    run_prim_func(sch.mod["main"], a, out)
    np.testing.assert_allclose(out, a[:127, :127] * 2.0 + 1.0, rtol=0, atol=0)


@T.prim_func(s_tir=True)
def resize2(x: T.Buffer((16,), "float32"), y: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.sblock("y"):
            vi = T.axis.S(8, i)
            y[vi] = x[T.Cast("int32", T.floor(vi * 2 + 0.5))]


def test_compute_at_relaxes_a_float_round_trip_index_to_the_whole_dim():
    sch = s_tir.Schedule(resize2)
    cache = sch.cache_read(sch.get_sblock("y"), 0, "global")
    (i,) = sch.get_loops("y")
    io, _ = sch.split(i, [2, 4])
    sch.compute_at(cache, io)
    # TVM's relaxation of T.Cast("int32", T.floor(...)) over the loop is the buffer's extent
    assert "v0 = T.axis.spatial(16, ax0_1)" in sch.mod["main"].script()
    x = np.arange(16, dtype="float32") * 3
    out = np.zeros(8, "float32")
    run_prim_func(sch.mod["main"], x, out)
    np.testing.assert_allclose(out, x[np.floor(np.arange(8) * 2 + 0.5).astype(int)], rtol=0)
