"""cache_read / cache_write where TVM puts the copy: inside the loop that holds the writer and
its first reader, over the region the writer produces there; a compact cache when a block
holds every reader. Values match numpy, the trace replays (consumer blocks too)."""

import numpy as np

from msc import testing, tir
from msc.script import tir as T
from msc.tir.interp import run_prim_func


@T.prim_func(s_tir=True)
def tiles(A: T.Buffer((32,), "float32"), B: T.Buffer((32,), "float32"),
          C: T.Buffer((32,), "float32")):
    T_ = T.sblock_alloc_buffer((32,))
    for i in range(4):
        for j in range(8):
            with T.sblock("T"):
                vi = T.axis.spatial(32, i * 8 + j)
                T_[vi] = A[vi] * 2.0
        for j in range(8):
            with T.sblock("B"):
                vi = T.axis.spatial(32, i * 8 + j)
                B[vi] = T_[vi] + 1.0
    for i in range(32):
        with T.sblock("C"):
            vi = T.axis.spatial(32, i)
            C[vi] = T_[vi] * 3.0


@T.prim_func(s_tir=True)
def scoped(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32")):
    for i0, j0 in T.grid(2, 2):
        with T.sblock("scope"):
            i, j = T.axis.remap("SS", [i0, j0])
            T_ = T.sblock_alloc_buffer((16, 16))
            for x, y in T.grid(8, 8):
                with T.sblock("T"):
                    vi = T.axis.spatial(16, i * 8 + x)
                    vj = T.axis.spatial(16, j * 8 + y)
                    T_[vi, vj] = A[vi, vj] + 1.0
            for x, y in T.grid(8, 8):
                with T.sblock("B"):
                    vi = T.axis.spatial(16, i * 8 + x)
                    vj = T.axis.spatial(16, j * 8 + y)
                    B[vi, vj] = T_[vi, vj] * 2.0


def _tiles(func):
    a = np.random.default_rng(0).standard_normal(32).astype("float32")
    b, c = np.zeros(32, "float32"), np.zeros(32, "float32")
    run_prim_func(func, a, b, c)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(c, a * 6, rtol=1e-6)


def test_cache_read_goes_inside_the_loop_of_the_writer_and_first_reader():
    sch = tir.Schedule(tiles)
    sch.cache_read("B", 0, "global")
    text = sch.mod["main"].script()
    assert "v0 = T.axis.spatial(32, i * 8 + ax0)" in text          # the tile of this i
    assert text.index('T.sblock("T__global")') < text.index('T.sblock("B")')
    assert "C[vi] = T__global[vi] * T.float32(3.0)" in text          # C reads the cache too
    _tiles(sch.mod["main"])
    testing.verify_trace_roundtrip(sch, tiles)


def test_cache_write_copies_back_before_the_first_reader_and_consumer_blocks_read_it():
    sch = tir.Schedule(tiles)
    sch.cache_write("T", 0, "local", consumer_blocks=["C"])
    text = sch.mod["main"].script()
    assert "C[vi] = T__local[vi] * T.float32(3.0)" in text
    assert "B[vi] = T_[vi] + T.float32(1.0)" in text
    _tiles(sch.mod["main"])
    testing.verify_trace_roundtrip(sch, tiles)


def test_a_block_holding_every_reader_gets_a_compact_cache():
    sch = tir.Schedule(scoped)
    sch.cache_read("B", 0, "local")
    text = sch.mod["main"].script()
    assert 'T__local = T.sblock_alloc_buffer((8, 8), scope="local")' in text
    assert "T__local[v0, v1] = T_[i * 8 + v0, j * 8 + v1]" in text
    assert "B[vi, vj] = T__local[vi - i * 8, vj - j * 8] * T.float32(2.0)" in text
    a, b = np.random.rand(16, 16).astype("float32"), np.zeros((16, 16), "float32")
    run_prim_func(sch.mod["main"], a, b)
    np.testing.assert_allclose(b, (a + 1) * 2, rtol=1e-6)
    testing.verify_trace_roundtrip(sch, scoped)


@T.prim_func(s_tir=True)
def tiled_copy(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(2, 2):
        with T.sblock("tile"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi * 4:vi * 4 + 4, vj * 4:vj * 4 + 4])
            T.writes(B[vi * 4:vi * 4 + 4, vj * 4:vj * 4 + 4])
            A0 = T.match_buffer(A[vi * 4:vi * 4 + 4, vj * 4:vj * 4 + 4], (4, 4))
            for x, y in T.grid(4, 4):
                B[vi * 4 + x, vj * 4 + y] = A0[x, y] + 1.0


def test_a_block_reading_through_match_buffer_reads_the_cache():
    sch = tir.Schedule(tiled_copy)
    sch.cache_read("tile", 0, "global")
    text = sch.mod["main"].script()
    assert "T.match_buffer(A_global[vi * 4:vi * 4 + 4, vj * 4:vj * 4 + 4], (4, 4))" in text
    assert "T.reads(A_global[vi * 4:vi * 4 + 4, vj * 4:vj * 4 + 4])" in text
    testing.verify_trace_roundtrip(sch, tiled_copy)  # (the interpreter runs no match_buffer)
