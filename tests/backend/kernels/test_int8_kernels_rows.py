"""Row kernels on bytes (kernels/int8/rows.py): the QDQ softmax (mask add, quantize round
trip, byte tail) and layer norm against numpy running the same float steps, and one and two
threads bitwise equal; byte slices and permutations (kernels/int8/layout.py)."""

from __future__ import annotations

import numpy as np
import pytest

from msc.backend.kernels.int8.layout import QPermute, QSlice
from msc.backend.kernels.int8.rows import QLayerNorm, QSoftmax, quant_params
from msc.backend.runtime.threads import num_threads
from msc.errors import ShapeError


def _q(v, s, z, lo=0, hi=255):
    return np.clip(np.round(v.astype(np.float32) / np.float32(s)) + z, lo, hi)


def _dq(q, s, z):
    return ((q.astype(np.float64) - z) * np.float64(np.float32(s))).astype(np.float32)


def _twice(kernel, *args):
    """The kernel's output on one thread; asserts two threads give the same bytes."""
    one = kernel(*args[:-1], np.empty_like(args[-1]))
    with num_threads(2):
        two = kernel(*args[:-1], np.empty_like(args[-1]))
    np.testing.assert_array_equal(one, two)
    return one


@pytest.mark.parametrize("in_dtype", ["uint8", "int8"])
def test_qsoftmax_matches_the_float_chain(in_dtype):
    rng = np.random.default_rng(0)
    shape, info = (2, 4, 32, 96), np.iinfo(in_dtype)  # 24k elements: split on two threads
    x = rng.integers(info.min, info.max + 1, shape).astype(in_dtype)
    mask = np.where(rng.random((2, 1, 1, 96)) < 0.25, -1e4, 0).astype(np.float32)
    sx, zx, s2, z2, s4 = 0.05, int(info.min) + 120, 0.06, 180, 1 / 255
    v = _dq(_q(_dq(x, sx, zx) + mask, s2, z2), s2, z2)
    e = np.exp(v - v.max(-1, keepdims=True))
    want = _q(e / e.sum(-1, keepdims=True), s4, 0).astype(np.uint8)
    params = quant_params(sx=np.float32(sx), zx=zx, q2=(np.float32(s2), z2, "uint8"),
                          q4=(np.float32(s4), 0, "uint8"))
    kernel = QSoftmax(shape, in_dtype, "uint8", params, (2, 1, 1, 96), mid=True)
    got = _twice(kernel, x, mask, np.empty(shape, np.uint8))
    diff = np.abs(got.astype(int) - want)
    assert diff.max() <= 1 and (diff > 0).mean() < 1e-3  # exp differs in the last bit only
    # an int8 output through a byte tail (a requantization): the tail applied to the codes
    tail = np.clip(np.arange(256) // 2 - 100, -128, 127).astype(np.int8)
    kernel = QSoftmax(shape, in_dtype, "int8", params, (2, 1, 1, 96), mid=True, tail=tail)
    np.testing.assert_array_equal(_twice(kernel, x, mask, np.empty(shape, np.int8)),
                                  tail[got])
    with pytest.raises(ShapeError, match="mask"):
        kernel(x, mask[:1].copy(), np.empty(shape, np.int8))
    # a tail that requantizes (BERT's where / isnan between two Q/DQ pairs): float steps
    s6 = np.float32(1 / 2000)
    tail = _q(_dq(np.arange(256), s4, 0), s6, 0).astype(np.uint8)
    params = quant_params(sx=np.float32(sx), zx=zx, q2=(np.float32(s2), z2, "uint8"),
                          q4=(np.float32(s4), 0, "uint8"), q6=(s6, 0, "uint8"))
    kernel = QSoftmax(shape, in_dtype, "uint8", params, (2, 1, 1, 96), mid=True, tail=tail)
    assert kernel.tail_mode == "r"
    np.testing.assert_array_equal(_twice(kernel, x, mask, np.empty(shape, np.uint8)),
                                  tail[got])


@pytest.mark.parametrize("scale", [0.5, 3.4e38 / 255])
def test_qsoftmax_causal_rows_far_below_the_max(scale):
    """A decoder's causal mask (finfo.min) through the mid quantize: keys 90 to 1e38 below
    the row's max, whose e**x is denormal or 0 (flushed to 0 in the kernel): the bytes of
    numpy's float chain, and rows of 12 keys (no whole vector)."""
    rng = np.random.default_rng(3)
    shape = (2, 4, 12, 12)
    x = rng.integers(0, 256, shape).astype(np.uint8)
    mask = np.triu(np.full((12, 12), np.finfo(np.float32).min, np.float32), 1)
    mask = np.ascontiguousarray(np.broadcast_to(mask, (2, 1, 12, 12)))
    sx, zx, s2, z2, s4 = 0.05, 120, np.float32(scale), 255, 1 / 255
    with np.errstate(over="ignore"):  # finfo.min / 0.5: -inf, clipped to the lowest code
        v = _dq(_q(_dq(x, sx, zx) + mask, s2, z2), s2, z2)
    assert (v.max(-1, keepdims=True) - v).max() > 88  # e**x below the normal floats
    with np.errstate(under="ignore"):
        e = np.exp(v - v.max(-1, keepdims=True))
    want = _q(e / e.sum(-1, keepdims=True), s4, 0).astype(np.uint8)
    params = quant_params(sx=np.float32(sx), zx=zx, q2=(s2, z2, "uint8"),
                          q4=(np.float32(s4), 0, "uint8"))
    kernel = QSoftmax(shape, "uint8", "uint8", params, mask.shape, mid=True)
    got = _twice(kernel, x, mask, np.empty(shape, np.uint8))
    assert np.abs(got.astype(int) - want).max() <= 1
    assert (got == want).mean() > 0.99


def test_qlayer_norm_matches_the_float_chain():
    rng = np.random.default_rng(1)
    shape = (1, 48, 384)
    x = rng.integers(0, 256, shape, dtype=np.uint8)
    gamma, beta = rng.random(384, np.float32) + 0.5, rng.standard_normal(384, np.float32)
    v = _dq(x, 0.04, 130)
    mean = v.mean(-1, keepdims=True)
    y = (v - mean) / np.sqrt(((v - mean) ** 2).mean(-1, keepdims=True) + np.float32(1e-5))
    want = _q(y * gamma + beta, 0.03, 120)
    params = quant_params(sx=np.float32(0.04), zx=130, q4=(np.float32(0.03), 120, "uint8"),
                          eps=np.float32(1e-5))
    kernel = QLayerNorm(shape, "uint8", "uint8", params, gamma, beta)
    got = _twice(kernel, x, np.empty(shape, np.uint8))
    diff = np.abs(got.astype(int) - want)
    assert diff.max() <= 1 and (diff > 0).mean() < 1e-3  # summation order: rounding ties
    with pytest.raises(ShapeError, match="uint8"):
        kernel(x.view(np.int8), np.empty(shape, np.uint8))
    # BERT's post-norm: the residual add's quantize round trip in the row, as the chain
    r = np.random.default_rng(5).integers(0, 256, shape, dtype=np.uint8)
    v = _dq(_q(_dq(x, 0.04, 130) + _dq(r, 0.05, 110), 0.07, 125), 0.07, 125)
    mean = v.mean(-1, keepdims=True)
    y = (v - mean) / np.sqrt(((v - mean) ** 2).mean(-1, keepdims=True) + np.float32(1e-5))
    want = _q(y * gamma + beta, 0.03, 120)
    params = quant_params(sx=np.float32(0.04), zx=130, sy=np.float32(0.05), zy=110,
                          q2=(np.float32(0.07), 125, "uint8"),
                          q4=(np.float32(0.03), 120, "uint8"), eps=np.float32(1e-5))
    kernel = QLayerNorm(shape, "uint8", "uint8", params, gamma, beta, residual=True)
    diff = np.abs(_twice(kernel, x, r, np.empty(shape, np.uint8)).astype(int) - want)
    assert diff.max() <= 1 and (diff > 0).mean() < 1e-3


def test_qslice_copies_or_maps_a_part():
    x = np.random.default_rng(2).integers(0, 256, (2, 5, 12), dtype=np.uint8)
    got = QSlice(2, 4, 9)(x, np.empty((2, 5, 5), np.uint8))
    np.testing.assert_array_equal(got, x[..., 4:9])
    table = (255 - np.arange(256)).astype(np.uint8)
    got = QSlice(1, 1, 3, table)(x, np.empty((2, 2, 12), np.uint8))
    np.testing.assert_array_equal(got, 255 - x[:, 1:3])
    with pytest.raises(ShapeError, match="shape"):
        QSlice(1, 1, 3)(x, np.empty((2, 3, 12), np.uint8))


@pytest.mark.parametrize("shape", [(1, 24, 6, 8), (1, 128, 12, 64)])  # native / split
def test_qpermute_moves_words_of_bytes(shape):
    x = np.random.default_rng(3).integers(-128, 128, shape).astype(np.int8)
    kernel = QPermute((0, 2, 1, 3), "int8")
    want = x.transpose(0, 2, 1, 3)
    np.testing.assert_array_equal(_twice(kernel, x, np.empty(want.shape, np.int8)), want)
    assert kernel.native_signature([(shape, "int8"), (want.shape, "int8")]) is not None or (
        x.size // 4 >= 1 << 15)  # small ones run as native chain steps
    with pytest.raises(ShapeError, match="multiple of 4"):
        kernel(x[..., :6].copy(), np.empty(want.shape, np.int8))
