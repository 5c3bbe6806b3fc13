"""int8 GEMM / conv / dense kernels, bitwise against numpy int32 (integers are exact), on the
VNNI path (when the host has it) and the portable one, with odd sizes and zero points."""

from __future__ import annotations

import numpy as np
import pytest

from msc.backend.kernels.int8.conv import QConv2d, QDense
from msc.backend.kernels.int8.gemm import host_vnni, qmatmul
from msc.errors import ShapeError

PATHS = [pytest.param(True, id="vnni"), pytest.param(False, id="portable")]


def _u8(rng, shape):
    return rng.integers(0, 256, shape, dtype=np.uint8)


def _s8(rng, shape):
    return rng.integers(-128, 128, shape, dtype=np.int8)


@pytest.mark.parametrize("vnni", PATHS)
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 13, 70), (13, 64, 130), (6, 4, 64),
                                   (19, 259, 5)])
def test_qmatmul_exact(vnni, m, k, n):
    rng = np.random.default_rng(m * 1000 + k + n)
    a, b, zero = _u8(rng, (m, k)), _s8(rng, (k, n)), 37
    want = (a.astype(np.int64) - zero) @ b.astype(np.int64)
    np.testing.assert_array_equal(qmatmul(a, b, zero, vnni=vnni), want)
    w, x = _s8(rng, (m, k)), _u8(rng, (k, n))
    want = w.astype(np.int64) @ (x.astype(np.int64) - zero)
    np.testing.assert_array_equal(qmatmul(w, x, zero, channel="row", vnni=vnni), want)


def test_qmatmul_epilogues(vnni=None):
    """float: acc * scale + bias, relu; u8: ONNX QuantizeLinear of that (round half even).
    The host's path only: the epilogue IR is the same on both (only the dot product differs,
    tested above), and each variant costs a compile on a cold cache."""
    rng = np.random.default_rng(1)
    a, b = _u8(rng, (9, 40)), _s8(rng, (40, 70))
    scale = rng.uniform(0.001, 0.01, 70).astype(np.float32)
    bias = rng.standard_normal(70).astype(np.float32)
    acc = ((a.astype(np.int64) - 3) @ b.astype(np.int64)).astype(np.float32)
    y = np.maximum(acc * scale + bias, 0)
    got = qmatmul(a, b, 3, out="f32", scale=scale, bias=bias, relu=True, vnni=vnni)
    np.testing.assert_array_equal(got, y)
    q = qmatmul(a, b, 3, out="u8", scale=scale, bias=bias, relu=True, out_scale=0.05,
                out_zero=10, vnni=vnni)
    np.testing.assert_array_equal(q, np.clip(np.rint(y / np.float32(0.05)) + 10, 0, 255))
    q = qmatmul(a, b, 3, out="s8", scale=scale, bias=bias, out_scale=0.02, vnni=vnni)
    np.testing.assert_array_equal(q, np.clip(np.rint((acc * scale + bias) / np.float32(0.02)),
                                              -128, 127))


def _conv_ref(x, w, zero, strides, pads, dilation):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = strides, dilation, pads
    xp = np.full((n, c, h + pt + pb, wd + pl + pr), zero, np.int64)
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh,
                       j * dw: j * dw + sw * (ow - 1) + 1: sw] - zero
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j].astype(np.int64))
    return out


CONVS = [  # (n, c, h, w, o, k, strides, pads, dilation, activation dtype)
    (1, 3, 12, 12, 8, 3, (1, 1), (1, 1, 1, 1), (1, 1), "uint8"),
    (2, 8, 9, 7, 70, 1, (1, 1), (0, 0, 0, 0), (1, 1), "uint8"),
    (1, 5, 11, 10, 9, 3, (2, 2), (1, 0, 2, 1), (1, 1), "int8"),
    (1, 4, 13, 70, 7, 3, (1, 2), (2, 2, 2, 2), (2, 2), "uint8"),
    (1, 16, 8, 8, 130, 1, (2, 2), (0, 0, 0, 0), (1, 1), "int8"),
    # rows of more than 64 pixels (the unfold's general runs); rows of at most 32 at
    # stride 2 and at most 64 at stride 1 (one vector per row); blocks cutting rows
    (2, 4, 6, 80, 8, 3, (1, 1), (1, 1, 1, 1), (1, 1), "uint8"),
    (3, 6, 17, 30, 12, 3, (2, 2), (1, 1, 1, 1), (1, 1), "uint8"),
    (1, 8, 60, 60, 40, 3, (1, 1), (1, 1, 1, 1), (1, 1), "uint8"),
]


@pytest.mark.parametrize("vnni", PATHS)
@pytest.mark.parametrize("case", CONVS, ids=lambda c: "x".join(map(str, c[:6])) + c[-1])
def test_qconv2d_exact(vnni, case):
    n, c, h, w, o, k, strides, pads, dilation, dtype = case
    rng = np.random.default_rng(o)
    x = _u8(rng, (n, c, h, w)) if dtype == "uint8" else _s8(rng, (n, c, h, w))
    zero = 17 if dtype == "uint8" else -5
    wq = rng.integers(-127, 128, (o, c, k, k), dtype=np.int8)
    attrs = {"strides": strides, "padding": pads, "dilation": dilation}
    want = _conv_ref(x.astype(np.int64), wq, zero, strides, pads, dilation)
    kernel = QConv2d(wq, attrs, dtype, zero, 1.0, None, "s32", vnni=vnni)
    got = np.empty(want.shape, np.int32)
    np.testing.assert_array_equal(kernel(x, got), want)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_qdense_exact(dtype):
    rng = np.random.default_rng(2)
    x = _u8(rng, (2, 5, 30)) if dtype == "uint8" else _s8(rng, (2, 5, 30))
    wq = _s8(rng, (30, 66))
    got = QDense(wq, dtype, 3, 1.0, None, "s32")(x, np.empty((2, 5, 66), np.int32))
    np.testing.assert_array_equal(got, (x.astype(np.int64) - 3) @ wq.astype(np.int64))


def test_kernels_check_arrays_before_native_code():
    conv = QConv2d(np.ones((4, 3, 3, 3), np.int8), {"strides": (1, 1), "padding": (0,) * 4,
                                                    "dilation": (1, 1)}, "uint8", 0, 1.0, None,
                   "f32")
    x = np.zeros((1, 3, 5, 5), np.uint8)
    with pytest.raises(ShapeError, match="data"):
        conv(x.astype(np.float32), np.empty((1, 4, 3, 3), np.float32))
    with pytest.raises(ShapeError, match="channels|expects"):
        conv(np.zeros((1, 2, 5, 5), np.uint8), np.empty((1, 4, 3, 3), np.float32))
    with pytest.raises(ShapeError, match="out"):
        conv(x, np.empty((1, 4, 3, 4), np.float32))
    dense = QDense(np.ones((8, 4), np.int8), "uint8", 0, 1.0, None, "u8")
    with pytest.raises(ShapeError, match="out"):
        dense(np.zeros((2, 8), np.uint8), np.empty((2, 4), np.float32))
    with pytest.raises(ShapeError, match="data"):
        dense(np.zeros((2, 7), np.uint8), np.empty((2, 4), np.uint8))


def test_host_features_pick_the_path():
    from msc.backend.llvm.jit import host_target

    assert host_vnni() == (host_target().has("avx512vnni") and host_target().has("avx512bw"))


@pytest.mark.parametrize("out", ["u8", "s8", "f32"])
def test_qadd_matches_dequantize_add_quantize(out):
    from msc.backend.kernels.int8.eltwise import QAdd

    rng = np.random.default_rng(4)
    a, b = _u8(rng, (3, 70)), _s8(rng, (3, 70))
    (sa, za), (sb, zb), (sy, zy) = (0.02, 120), (0.05, -3), (0.04, 7 if out != "s8" else -2)
    kernel = QAdd("uint8", "int8", (sa, za), (sb, zb), (out, sy, zy), relu=True)
    got = kernel(a, b, np.empty(a.shape, {"u8": np.uint8, "s8": np.int8, "f32": np.float32}[out]))
    y = ((a.astype(np.float32) - za) * np.float32(sa)
         + (b.astype(np.float32) - zb) * np.float32(sb))
    y = np.maximum(y, 0)
    if out != "f32":
        lo, hi = (0, 255) if out == "u8" else (-128, 127)
        y = np.clip(np.rint(y / np.float32(sy)) + zy, lo, hi)
    np.testing.assert_array_equal(got, y)
    with pytest.raises(ShapeError, match="rhs"):
        kernel(a, a, np.empty(a.shape, got.dtype))


def test_qconv2d_two_threads_bitwise_equal_one():
    from msc.backend.runtime.threads import num_threads

    rng = np.random.default_rng(6)
    x, wq = _u8(rng, (1, 32, 40, 40)), rng.integers(-127, 128, (70, 32, 3, 3), dtype=np.int8)
    attrs = {"strides": (1, 1), "padding": (1, 1, 1, 1), "dilation": (1, 1)}
    kernel = QConv2d(wq, attrs, "uint8", 9, 0.01, None, ("u8", 0.5, 3))
    one = kernel(x, np.empty((1, 70, 40, 40), np.uint8))
    with num_threads(2):
        two = kernel(x, np.empty((1, 70, 40, 40), np.uint8))
    np.testing.assert_array_equal(one, two)
    acc = _conv_ref(x.astype(np.int64), wq, 9, (1, 1), (1, 1, 1, 1), (1, 1)).astype(np.float32)
    want = np.clip(np.rint(acc * np.float32(0.01) / np.float32(0.5)) + 3, 0, 255)
    np.testing.assert_array_equal(one, want)
