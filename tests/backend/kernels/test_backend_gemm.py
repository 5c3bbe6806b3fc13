"""fp32 GEMM kernel against a float64 numpy reference, and its argument checks."""

import numpy as np
import pytest

from msc.backend import JIT, vector_lanes
from msc.backend.kernels import Gemm, GemmConfig, PackedB, pack_b
from msc.backend.kernels.gemm import KC, MC, gemm
from msc.errors import BuildError, ShapeError

# float32 accumulation over K <= 2048 of values in [-1, 1) stays well inside this.
RTOL = ATOL = 1e-4

# M x K x N. Odd shapes cross every edge: M < MR, M % MR, M > MC, K > KC (twice), N % NR.
SHAPES = [
    (1, 1, 1), (1, 2048, 1000), (7, 13, 17), (64, 64, 64), (196, 576, 64), (3136, 64, 256),
    (37, 71, 53), (5, KC + 1, 65), (MC + 8, 2 * KC + 1, 130), (13, 1, 1), (6, 5, 64),
]
EPILOGUES = [(False, False), (True, False), (False, True), (True, True)]  # (bias, relu)


@pytest.fixture(scope="module")
def jit():
    return JIT(cache=None)  # no disk cache: these tests are about the kernel, not the cache


def _data(m, k, n, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    return a, b, rng.uniform(-1, 1, n).astype(np.float32)


def _reference(a, b, bias=None, relu=False):
    out = a.astype(np.float64) @ b.astype(np.float64)
    out = out + bias if bias is not None else out
    return np.maximum(out, 0) if relu else out


@pytest.mark.parametrize("with_bias,relu", EPILOGUES)
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_gemm_matches_numpy(jit, m, k, n, with_bias, relu):
    a, b, bias = _data(m, k, n)
    bias = bias if with_bias else None
    out = Gemm(b, bias, relu, jit=jit)(a)
    assert out.shape == (m, n) and out.dtype == np.float32
    np.testing.assert_allclose(out, _reference(a, b, bias, relu), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("lanes", [8, 4])  # AVX2 and SSE kernels; they run on any x86-64 host
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 13, 17), (37, KC + 3, 53), (MC + 1, 40, 33)])
def test_narrow_vector_kernels(jit, lanes, m, k, n):
    a, b, bias = _data(m, k, n, seed=1)
    out = Gemm(b, bias, relu=True, lanes=lanes, jit=jit)(a)
    np.testing.assert_allclose(out, _reference(a, b, bias, True), rtol=RTOL, atol=ATOL)


def test_one_packing_serves_every_m(jit):
    _, b, bias = _data(1, 96, 70)
    g = Gemm(b, bias, jit=jit)
    for m in (1, 5, 6, 7, 200):
        a = _data(m, 96, 70, seed=m)[0]
        np.testing.assert_allclose(g(a), _reference(a, b, bias), rtol=RTOL, atol=ATOL)


def test_out_is_filled_in_place(jit):
    a, b, _ = _data(9, 10, 11)
    out = np.full((9, 11), np.nan, np.float32)
    assert gemm(a, b, out=out, jit=jit) is out
    np.testing.assert_allclose(out, _reference(a, b), rtol=RTOL, atol=ATOL)


def test_zero_sized_dims(jit):
    _, b, bias = _data(1, 0, 4)
    np.testing.assert_array_equal(Gemm(b, bias, relu=True, jit=jit)(np.zeros((3, 0), np.float32)),
                                  np.broadcast_to(np.maximum(bias, 0), (3, 4)))
    assert Gemm(np.ones((4, 3), np.float32), jit=jit)(np.ones((0, 4), np.float32)).shape == (0, 3)


def test_relu_keeps_nan(jit):
    a, b, _ = _data(2, 3, 4)
    a[0, 0] = np.nan
    out = Gemm(b, relu=True, jit=jit)(a)
    assert np.isnan(out[0]).all() and not np.isnan(out[1]).any()


def test_bias_is_copied(jit):
    a, b, bias = _data(3, 4, 5)
    g = Gemm(b, bias, jit=jit)
    bias[:] = 100.0
    assert np.abs(g(a)).max() < 10


@pytest.mark.parametrize("lanes", [16, 8, 4])
def test_pack_b_layout(lanes):
    b = np.arange(7 * 70, dtype=np.float32).reshape(7, 70)
    packed = pack_b(b, lanes)
    nr = GemmConfig(lanes).nr
    panels = packed.data.reshape(-1, 7, nr)
    assert packed.data.ctypes.data % 64 == 0 and panels.shape[0] == -(-70 // nr)
    restored = panels.transpose(1, 0, 2).reshape(7, -1)
    np.testing.assert_array_equal(restored[:, :70], b)
    assert not restored[:, 70:].any()


def test_host_lanes_are_a_supported_width():
    assert vector_lanes() in (4, 8, 16)


F64 = np.zeros((4, 3))
BAD_A = [
    (F64, "float32"), (np.zeros(3, np.float32), "rank 2"), (np.zeros((4, 5), np.float32), "size 5"),
    (np.zeros((4, 6), np.float32)[:, ::2], "C-contiguous"), ([[1.0, 2.0, 3.0]], "numpy array"),
    (np.zeros(49, np.uint8)[1:].view(np.float32).reshape(4, 3), "aligned"),
]


@pytest.mark.parametrize("a,words", BAD_A)
def test_bad_a_is_rejected_before_native_code(jit, a, words):
    g = Gemm(np.ones((3, 2), np.float32), jit=jit)
    with pytest.raises(ShapeError, match=words) as info:
        g(a)
    assert info.value.context["param"] == "a"


@pytest.mark.parametrize("kwargs,param", [
    ({"b": np.ones((3, 2))}, "b"),
    ({"b": np.ones(3, np.float32)}, "b"),
    ({"bias": np.ones(3, np.float32)}, "bias"),
    ({"bias": np.ones(2, np.int32)}, "bias"),
])
def test_bad_weights_are_rejected(jit, kwargs, param):
    args = {"b": np.ones((3, 2), np.float32), **kwargs}
    with pytest.raises(ShapeError) as info:
        Gemm(args.pop("b"), jit=jit, **args)
    assert info.value.context["param"] == param


@pytest.mark.parametrize("out", [
    np.zeros((4, 3), np.float32), np.zeros((4, 2), np.float64), np.zeros((2, 4), np.float32).T,
])
def test_bad_out_is_rejected(jit, out):
    with pytest.raises(ShapeError) as info:
        gemm(np.ones((4, 3), np.float32), np.ones((3, 2), np.float32), out=out, jit=jit)
    assert info.value.context["param"] == "out"


def test_out_overlapping_a_is_rejected(jit):
    buf = np.ones((4, 4), np.float32)
    with pytest.raises(ShapeError, match="overlap"):
        gemm(buf, np.ones((4, 4), np.float32), out=buf, jit=jit)


def test_tampered_packing_is_rejected():
    packed = pack_b(np.ones((3, 2), np.float32), 16)
    with pytest.raises(ShapeError, match="aligned"):
        PackedB(packed.data[1:], 3, 2, 16)


def test_unsupported_config():
    with pytest.raises(BuildError, match="lanes"):
        GemmConfig(lanes=3)
