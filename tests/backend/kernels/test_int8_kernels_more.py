"""int8 depthwise / grouped convs, the batched matmul of two activations, table lookups and
concat: exact against numpy integer references, on the VNNI and the portable paths."""

from __future__ import annotations

import numpy as np
import pytest

from msc.backend.kernels.int8.bmm import QBatchMatmul
from msc.backend.kernels.int8.conv import QConv2d
from msc.backend.kernels.int8.dwconv import QDepthwise
from msc.backend.kernels.int8.lut import QConcat, QLut
from msc.backend.kernels.int8.pool import QAvgPool, QMaxPool
from msc.backend.runtime.threads import num_threads
from msc.errors import ShapeError

PATHS = [pytest.param(True, id="vnni"), pytest.param(False, id="portable")]
_NP = {"uint8": np.uint8, "int8": np.int8}


def _draw(rng, dtype, shape):
    info = np.iinfo(_NP[dtype])
    return rng.integers(info.min, info.max + 1, shape).astype(_NP[dtype])


def _grouped_ref(x, w, zero, groups, stride, pad):
    """int64 NCHW grouped conv of (x - zero) with zero-point padding."""
    n, _, h, wd = x.shape
    o, cg, k, _ = w.shape
    xp = np.pad(x.astype(np.int64) - zero, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - k) // stride + 1, (wd + 2 * pad - k) // stride + 1
    out = np.zeros((n, o, oh, ow), np.int64)
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(k):
            for j in range(k):
                patch = xp[:, g * cg:(g + 1) * cg, i:i + stride * oh:stride, j:j + stride * ow:stride]
                out[:, oc] += np.einsum("nchw,c->nhw", patch, w[oc, :, i, j].astype(np.int64))
    return out


@pytest.mark.parametrize("case", [(12, 9, 11, 3, 1, 1, "uint8"), (5, 14, 14, 3, 2, 1, "uint8"),
                                  (7, 6, 40, 3, 1, 0, "int8"), (3, 5, 5, 5, 2, 2, "int8")],
                         ids=lambda c: "x".join(map(str, c[:6])) + c[-1])
def test_qdepthwise_exact(case):
    c, h, w, k, stride, pad, dtype = case
    rng = np.random.default_rng(c)
    x, wq = _draw(rng, dtype, (2, c, h, w)), rng.integers(-127, 128, (c, 1, k, k), dtype=np.int8)
    zero = 19 if dtype == "uint8" else -7
    attrs = {"strides": (stride, stride), "padding": (pad,) * 4, "dilation": (1, 1)}
    want = _grouped_ref(x, wq, zero, c, stride, pad)
    kernel = QDepthwise(wq, attrs, dtype, zero, 1.0, None, "s32")
    np.testing.assert_array_equal(kernel(x, np.empty(want.shape, np.int32)), want)
    # requantized epilogue: relu(acc * s + b) -> uint8, as QuantizeLinear rounds
    scale, bias = np.float32(0.01), rng.standard_normal(c).astype(np.float32)
    kernel = QDepthwise(wq, attrs, dtype, zero, scale, bias, ("u8", 0.5, 3), relu=True)
    got = kernel(x, np.empty(want.shape, np.uint8))
    y = np.maximum(want.astype(np.float32) * scale + bias[:, None, None], 0)
    np.testing.assert_array_equal(got, np.clip(np.rint(y / np.float32(0.5)) + 3, 0, 255))


@pytest.mark.parametrize("vnni", PATHS)
def test_grouped_qconv2d_exact(vnni):
    rng = np.random.default_rng(4)
    x, wq = _draw(rng, "uint8", (1, 12, 9, 9)), rng.integers(-127, 128, (8, 3, 3, 3), np.int8)
    attrs = {"strides": (2, 2), "padding": (1,) * 4, "dilation": (1, 1), "groups": 4}
    kernel = QConv2d(wq, attrs, "uint8", 30, 1.0, None, "s32", vnni=vnni)
    want = _grouped_ref(x, wq, 30, 4, 2, 1)
    np.testing.assert_array_equal(kernel(x, np.empty(want.shape, np.int32)), want)


@pytest.mark.parametrize("vnni", PATHS)
@pytest.mark.parametrize("dtypes", [("uint8", "uint8"), ("int8", "uint8"), ("uint8", "int8")])
def test_qbatch_matmul_exact(vnni, dtypes):
    rng = np.random.default_rng(5)
    a, b = _draw(rng, dtypes[0], (1, 3, 17, 24)), _draw(rng, dtypes[1], (1, 3, 24, 70))
    za, zb = (131 if d == "uint8" else -9 for d in dtypes)
    kernel = QBatchMatmul((dtypes[0], za), (dtypes[1], zb), 1.0, None, "s32", vnni=vnni)
    want = (a.astype(np.int64) - za) @ (b.astype(np.int64) - zb)
    np.testing.assert_array_equal(kernel(a, b, np.empty(want.shape, np.int32)), want)
    scaled = QBatchMatmul((dtypes[0], za), (dtypes[1], zb), np.float32(1e-3), None,
                          ("u8", 0.25, 100), vnni=vnni)
    got = scaled(a, b, np.empty(want.shape, np.uint8))
    y = want.astype(np.float32) * np.float32(1e-3)
    np.testing.assert_array_equal(got, np.clip(np.rint(y / np.float32(0.25)) + 100, 0, 255))
    with pytest.raises(ShapeError, match="K a multiple of 4"):
        kernel(a[..., :22].copy(), b[..., :22, :].copy(), np.empty(want.shape, np.int32))


@pytest.mark.parametrize("vnni", PATHS)
@pytest.mark.parametrize("n", [5, 17, 32, 40, 81])
def test_qbatch_matmul_head_tiles_match_the_gemm_driver(vnni, n):
    """The head GEMM's 1-, 2- and 4-vector tiles (a head's 17-32 keys in two vectors): the
    bytes of int8/gemm.py's driver, a requantize and a scale-and-requantize chain after it
    (ViT's QK^T times 1/sqrt(d)) included."""
    from msc.backend.kernels.int8.gemm import qgemm_driver

    rng = np.random.default_rng(n)
    a, b = _draw(rng, "uint8", (2, 3, 17, 8)), _draw(rng, "uint8", (2, 3, 8, n))
    post = ("u8", np.float32(0.3), 120, np.float32(0.35), None, False)
    for out, mid in ((("u8", np.float32(0.25), 100), None), (("u8", np.float32(0.02), 5), post)):
        kernel = QBatchMatmul(("uint8", 131), ("uint8", 127), np.float32(4e-3), None, out,
                              vnni=vnni, post=mid)
        got = kernel(a, b, np.empty((2, 3, 17, n), np.uint8))
        assert len(np.unique(got)) > min(20, n)  # codes, not a clipped constant
        kernel.driver, kernel.plans = qgemm_driver(kernel.cfg), {}
        np.testing.assert_array_equal(got, kernel(a, b, np.empty((2, 3, 17, n), np.uint8)))


def test_heads_and_groups_on_two_threads_bitwise_equal_one():
    rng = np.random.default_rng(6)
    a, b = _draw(rng, "uint8", (1, 12, 64, 64)), _draw(rng, "uint8", (1, 12, 64, 96))
    kernel = QBatchMatmul(("uint8", 120), ("uint8", 128), np.float32(2e-3), None,
                          ("u8", 0.1, 7))
    one = kernel(a, b, np.empty((1, 12, 64, 96), np.uint8))
    with num_threads(2):
        two = kernel(a, b, np.empty((1, 12, 64, 96), np.uint8))
    np.testing.assert_array_equal(one, two)
    x, wq = _draw(rng, "uint8", (1, 64, 30, 30)), rng.integers(-127, 128, (64, 1, 3, 3), np.int8)
    attrs = {"strides": (1, 1), "padding": (1,) * 4, "dilation": (1, 1)}
    dw = QDepthwise(wq, attrs, "uint8", 3, np.float32(0.02), None, ("u8", 0.5, 0))
    one = dw(x, np.empty((1, 64, 30, 30), np.uint8))
    with num_threads(2):
        np.testing.assert_array_equal(dw(x, np.empty((1, 64, 30, 30), np.uint8)), one)
    wg = rng.integers(-127, 128, (64, 16, 1, 1), np.int8)
    attrs = dict(attrs, padding=(0,) * 4, groups=4)
    grouped = QConv2d(wg, attrs, "uint8", 3, np.float32(0.02), None, ("u8", 0.5, 0))
    one = grouped(x, np.empty((1, 64, 30, 30), np.uint8))
    with num_threads(2):
        np.testing.assert_array_equal(grouped(x, np.empty((1, 64, 30, 30), np.uint8)), one)
    acc = _grouped_ref(x, wg, 3, 4, 1, 0).astype(np.float32)
    np.testing.assert_array_equal(one, np.clip(np.rint(acc * np.float32(0.02) / np.float32(0.5)),
                                               0, 255))


@pytest.mark.parametrize("vbmi", [pytest.param(None, id="host"), pytest.param(False,
                                                                             id="scalar")])
def test_qlut_and_qconcat(vbmi):
    rng = np.random.default_rng(7)
    x = _draw(rng, "int8", (2, 5, 3, 30))  # rows of 90: one whole and one partial vector
    table = rng.integers(0, 256, (5, 256)).astype(np.uint8)
    got = QLut(table, 1, vbmi=vbmi)(x, np.empty(x.shape, np.uint8))
    np.testing.assert_array_equal(got, table[np.arange(5)[None, :, None, None],
                                             x.view(np.uint8)])
    flat = rng.standard_normal(256).astype(np.float32)
    np.testing.assert_array_equal(QLut(flat, None)(x, np.empty(x.shape, np.float32)),
                                  flat[x.view(np.uint8)])
    a, b = _draw(rng, "uint8", (1, 3, 4, 4)), _draw(rng, "uint8", (1, 2, 4, 4))
    req = (255 - np.arange(256)).astype(np.uint8)
    got = QConcat([None, req], 1, np.uint8)(a, b, np.empty((1, 5, 4, 4), np.uint8))
    np.testing.assert_array_equal(got, np.concatenate([a, 255 - b], axis=1))
    a2, b2 = np.concatenate([a, a]), np.concatenate([b, b])  # batch 2: strided slices
    got = QConcat([req, None], 1, np.uint8)(a2, b2, np.empty((2, 5, 4, 4), np.uint8))
    np.testing.assert_array_equal(got, np.concatenate([255 - a2, b2], axis=1))
    with pytest.raises(ShapeError, match="channels"):
        QLut(table, 1)(x[:, :4].copy(), np.empty((2, 4, 3, 30), np.uint8))


def test_qlut_splits_by_its_path_cost():
    """A chain step splits over threads (from Python) only where the work pays the handoff:
    MobileBERT's NoNorm at batch 16 (12k rows of one byte, ~3 us) stays in the chain; 16 MB
    of planes split."""
    table = np.zeros((64, 256), np.uint8)
    small = QLut(table, 2).native_signature([((16, 12, 64), "uint8"), ((16, 12, 64), "uint8")])
    large = QLut(table, 1).native_signature([((64, 64, 4096), "uint8"),
                                             ((64, 64, 4096), "uint8")])
    # the signature ends (splits, split form)
    assert small[-2] is False and large[-2] is True


@pytest.mark.parametrize("batch", [1, 2, 200])
def test_qconcat_with_a_constant_part(batch):
    """A constant part (a ViT's class token, quantized when the plan is made) between the
    inputs: batch 1 (flat runs), 2 (a run per image) and 200 (600 runs: strided calls)."""
    rng = np.random.default_rng(batch)
    cls = rng.integers(0, 256, (batch, 1, 8)).astype(np.uint8)
    x, y = _draw(rng, "uint8", (batch, 5, 8)), _draw(rng, "uint8", (batch, 2, 8))
    req = (255 - np.arange(256)).astype(np.uint8)
    kernel = QConcat([None, req, None], 1, np.uint8, consts={2: cls})
    assert kernel.inputs == (0, 1)
    got = kernel(x, y, np.empty((batch, 8, 8), np.uint8))
    np.testing.assert_array_equal(got, np.concatenate([x, 255 - y, cls], axis=1))
    with pytest.raises(ShapeError, match="expected 2 inputs"):
        kernel(x, y, cls.copy(), np.empty((batch, 9, 8), np.uint8))


@pytest.mark.parametrize("vbmi", [pytest.param(None, id="host"), pytest.param(False,
                                                                             id="scalar")])
@pytest.mark.parametrize("shape", [(3, 7, 40), (5, 12, 9, 2), (2, 4, 48, 33)])
def test_qlut_channel_last_rows(monkeypatch, vbmi, shape):
    """Per-channel tables on the last axis (MobileBERT's NoNorm, RMSNorm's weight, LeViT's
    batch norm: rows of 1-33 bytes): each channel its own table, also when two threads'
    row ranges start inside a run of channels."""
    from msc.backend.kernels.int8 import lut as int8_lut

    monkeypatch.setattr(int8_lut, "_PARALLEL", 0)
    rng = np.random.default_rng(len(shape))
    x = _draw(rng, "uint8", shape)
    axis = len(shape) - 1 if shape[-1] != 2 else len(shape) - 2
    table = rng.integers(0, 256, (shape[axis], 256)).astype(np.uint8)
    index = np.arange(shape[axis]).reshape((-1,) + (1,) * (len(shape) - 1 - axis))
    want = table[index, x]
    np.testing.assert_array_equal(QLut(table, axis, vbmi=vbmi)(x, np.empty(shape, np.uint8)),
                                  want)
    with num_threads(2):
        np.testing.assert_array_equal(QLut(table, axis, vbmi=vbmi)(
            x, np.empty(shape, np.uint8)), want)


@pytest.mark.parametrize("include_pad", [False, True])
def test_qavgpool_matches_float_pool_of_dequantized(include_pad):
    rng = np.random.default_rng(8)
    x = _draw(rng, "uint8", (1, 3, 9, 10))
    sx, zx = 0.05, 100
    xf = np.pad((x.astype(np.float64) - zx) * sx, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ones = np.pad(np.ones(x.shape), ((0, 0), (0, 0), (1, 1), (1, 1)))
    sums = sum(xf[:, :, i:i + 9:2, j:j + 10:2] for i in range(3) for j in range(3))
    counts = 9 if include_pad else sum(ones[:, :, i:i + 9:2, j:j + 10:2]
                                       for i in range(3) for j in range(3))
    want = sums / counts
    pool = QAvgPool("uint8", (sx, zx), (3, 3), (2, 2), (1, 1, 1, 1), include_pad, "f32")
    got = pool(x, np.empty(want.shape, np.float32))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    q = QAvgPool("uint8", (sx, zx), None, None, None, False, ("s8", 0.01, -3))
    got = q(x, np.empty((1, 3, 1, 1), np.int8))
    mean = ((x.astype(np.float64) - zx) * sx).mean(axis=(2, 3), keepdims=True)
    assert np.abs(got - np.clip(np.rint(mean / 0.01) - 3, -128, 127)).max() <= 1  # a tie


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_qmaxpool_matches_numpy(dtype):
    rng = np.random.default_rng(9)
    x = _draw(rng, dtype, (2, 3, 11, 12))
    low = np.iinfo(_NP[dtype]).min
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=low)
    want = np.max([xp[:, :, i:i + 11:2, j:j + 12:2] for i in range(3) for j in range(3)],
                  axis=0)
    pool = QMaxPool(dtype, (3, 3), (2, 2), (1, 1, 1, 1))
    np.testing.assert_array_equal(pool(x, np.empty(want.shape, x.dtype)), want)


def test_native_task_splits_on_two_threads_bitwise_equal_one(monkeypatch):
    """Every int8 CNN kernel split into native tasks (thresholds at 0): the same bytes on two
    threads as on one, and the pixel / channel blocks of a conv as one whole image."""
    from msc.backend.kernels.int8 import conv_tasks as int8_conv_tasks
    from msc.backend.kernels.int8 import dwconv as int8_dwconv
    from msc.backend.kernels.int8 import eltwise as int8_eltwise
    from msc.backend.kernels.int8 import lut as int8_lut
    from msc.backend.kernels.int8 import pool as int8_pool
    from msc.backend.kernels.int8.eltwise import QAdd

    for module, name in ((int8_conv_tasks, "PARALLEL_MACS"), (int8_pool, "_PARALLEL"),
                         (int8_dwconv, "_PARALLEL"), (int8_eltwise, "_PARALLEL"),
                         (int8_lut, "_PARALLEL")):
        monkeypatch.setattr(module, name, 0)
    monkeypatch.setattr(int8_conv_tasks, "_L2_BLOCK", 1 << 16)  # several blocks per task
    rng = np.random.default_rng(10)
    x = _draw(rng, "uint8", (1, 40, 13, 13))  # three panels: blocks of output channels too
    convs = [QConv2d(rng.integers(-127, 128, (70, 40, 3, 3), np.int8),
                     {"strides": (1, 1), "padding": (1,) * 4, "dilation": (1, 1)}, "uint8", 7,
                     np.float32(0.01), None, ("u8", 0.5, 3)),
             QConv2d(rng.integers(-127, 128, (20, 40, 3, 3), np.int8),
                     {"strides": (2, 2), "padding": (0, 1, 1, 0), "dilation": (1, 1)}, "uint8",
                     7, np.float32(0.01), None, ("u8", 0.5, 3))]
    x2 = _draw(rng, "uint8", (2, 40, 13, 13))
    dw = QDepthwise(rng.integers(-127, 128, (40, 1, 3, 3), np.int8),
                    {"strides": (1, 1), "padding": (1,) * 4, "dilation": (1, 1)}, "uint8", 3,
                    np.float32(0.02), None, ("u8", 0.5, 0))
    table = rng.integers(0, 256, (40, 256)).astype(np.uint8)
    runs = [lambda: convs[0](x, np.empty((1, 70, 13, 13), np.uint8)),
            lambda: convs[1](x, np.empty((1, 20, 6, 6), np.uint8)),
            lambda: dw(x2, np.empty((2, 40, 13, 13), np.uint8)),
            lambda: QMaxPool("uint8", (3, 3), (2, 2), (0,) * 4)(x2, np.empty((2, 40, 6, 6),
                                                                             np.uint8)),
            lambda: QAvgPool("uint8", (0.05, 9), None, None, None, False, ("u8", 0.1, 2))(
                x2, np.empty((2, 40, 1, 1), np.uint8)),
            lambda: QAdd("uint8", "uint8", (0.1, 3), (0.2, 5), ("u8", 0.3, 1), True)(
                x2, x2[::-1].copy(), np.empty(x2.shape, np.uint8)),
            lambda: QLut(table, 1)(x2, np.empty(x2.shape, np.uint8)),
            lambda: QLut(table[0], None)(x2, np.empty(x2.shape, np.uint8)),
            lambda: QConcat([None, table[1], None], 1, np.uint8)(
                x, x[:, :7].copy(), x[:, 3:].copy(), np.empty((1, 84, 13, 13), np.uint8))]
    for run in runs:
        one = run()
        with num_threads(2):
            np.testing.assert_array_equal(run(), one)
    whole = convs[0](x, np.empty((1, 70, 13, 13), np.uint8))
    acc = _grouped_ref(x, convs[0].w[:, :360].reshape(70, 40, 3, 3), 7, 1, 1, 1)
    np.testing.assert_array_equal(whole, np.clip(np.rint(acc.astype(np.float32) * np.float32(
        0.01) / np.float32(0.5)) + 3, 0, 255))
    np.testing.assert_array_equal(runs[-1](), np.concatenate([x, table[1][x[:, :7]], x[:, 3:]],
                                                             axis=1))
