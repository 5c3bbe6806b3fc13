"""pad_einsum: an Einsum block's domain rounded up to multiples of the padding, over
zero-filled copies of the buffers the grown iter vars index; values match numpy, the trace
replays, TVM's refusals hold."""

import numpy as np
import pytest

from msc import testing, tir
from msc.s_tir.schedule.pad_einsum import InvalidPaddingError, NonEinsumError
from msc.script import tir as T
from msc.tir.interp import run_prim_func


@T.prim_func(s_tir=True)
def matmul(A: T.Buffer((10, 7), "float32"), B: T.Buffer((7, 6), "float32"),
           C: T.Buffer((10, 6), "float32")):
    for i, j, k in T.grid(10, 6, 7):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.prim_func(s_tir=True)
def shifted(A: T.Buffer((9,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.sblock("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi + 1]


def test_padded_matmul_keeps_the_product():
    sch = tir.Schedule(matmul)
    sch.pad_einsum("C", [4, 4, 4])
    text = sch.mod["main"].script()
    assert "for i, j, k in T.grid(12, 8, 8):" in text
    assert "T.if_then_else(v0 < 10 and v1 < 7, A[v0, v1], T.float32(0.0))" in text
    assert "C_pad[vi, vj] = C_pad[vi, vj] + A_pad[vi, vk] * B_pad[vk, vj]" in text
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((10, 7), "float32"), rng.standard_normal((7, 6), "float32")
    c = np.zeros((10, 6), "float32")
    run_prim_func(sch.mod["main"], a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    testing.verify_trace_roundtrip(sch, matmul)


def test_refusals_are_tvms():
    with pytest.raises(InvalidPaddingError, match="list of 3 positive integers"):
        tir.Schedule(matmul).pad_einsum("C", [4, 4])
    with pytest.raises(NonEinsumError, match="not a computation of Einsum pattern"):
        tir.Schedule(shifted).pad_einsum("B", [16])
