"""The in-place window kernels (kernels/window3.py) against numpy / torch references:
3x3 and 5x5 depthwise convs on the flat path (stride 1, rows as wide as the input's, narrower than half
a vector) and the row path (wider planes, other paddings, stride 2), masks at every border,
channel multipliers, batches, relu; max and average pooling (padding, ceil_mode, NaN)."""

import numpy as np
import pytest

from msc import relax
from msc.backend.kernels import pool
from msc.backend.kernels.base import Site
from msc.backend.kernels.conv import _DepthwiseNCHW
from msc.backend.kernels.pool import fast_window, window_kernels
from msc.backend.kernels.window3 import WINDOW_ARGS, takes_window
from msc.backend.runtime.program import Value

TOL = {"rtol": 1e-5, "atol": 1e-5}


def _rand(*shape, seed=0):
    return np.random.default_rng(seed + len(shape)).standard_normal(shape).astype(np.float32)


def _reference(x, w, b, stride, pad, mult):
    """Direct float64 sum over the k * k taps of the zero-padded input."""
    n, c, h, wd = x.shape
    k = w.shape[-1]
    top, left, bottom, right = pad
    xp = np.zeros((n, c, h + top + bottom, wd + left + right))
    xp[:, :, top:top + h, left:left + wd] = x
    oh = (h + top + bottom - k) // stride + 1
    ow = (wd + left + right - k) // stride + 1
    xp = np.repeat(xp, mult, axis=1)  # output channel co reads input channel co // mult
    out = np.zeros((n, c * mult, oh, ow)) + b.reshape(1, -1, 1, 1)
    for kh in range(k):
        for kw in range(k):
            win = xp[:, :, kh:kh + stride * oh:stride, kw:kw + stride * ow:stride]
            out += win * w[:, 0, kh, kw].reshape(1, -1, 1, 1)
    return out


CASES = [  # n, c, mult, h, w, stride, (top, left, bottom, right)
    (1, 37, 1, 7, 7, 1, (1, 1, 1, 1)),      # ShuffleNet's 7x7: flat path, 4 vectors a plane
    (1, 5, 1, 14, 14, 1, (1, 1, 1, 1)),     # ShuffleNet's 14x14: row path
    (2, 3, 2, 9, 5, 1, (2, 1, 0, 1)),       # flat, batch, multiplier, uneven top / bottom
    (1, 4, 1, 6, 6, 1, (0, 1, 0, 1)),       # flat, no rows of padding
    (1, 3, 1, 5, 16, 1, (1, 1, 1, 1)),      # a row of exactly one vector: row path
    (1, 3, 1, 11, 33, 1, (1, 1, 1, 1)),     # row path, a one-lane tail
    (1, 2, 1, 8, 7, 1, (1, 2, 1, 0)),       # OW == W from uneven left / right: flat path
    (1, 3, 1, 8, 10, 1, (2, 2, 2, 2)),      # OW != W: row path
    (1, 2, 1, 9, 9, 1, (0, 0, 0, 0)),       # no padding at all
    (1, 6, 1, 28, 28, 2, (1, 1, 1, 1)),     # stride 2: even lanes of two masked loads
    (2, 3, 2, 15, 13, 2, (1, 0, 0, 1)),     # stride 2, odd sizes, multiplier, batch
    (1, 2, 1, 40, 41, 2, (1, 1, 1, 1)),     # stride 2 over two column blocks
    (1, 2, 1, 3, 3, 2, (1, 1, 1, 1)),       # tiny plane
    (1, 4, 1, 16, 16, 2, (1, 1, 1, 1)),     # stride 2, OW = 8: two output rows a vector
    (1, 3, 1, 11, 9, 2, (0, 0, 0, 0)),      # ... odd OH without padding (no blank row)
]
CASES_5X5 = [  # EfficientNet / MobileNetV3 5x5 (pad 2): flat, rows, stride 2, odd sizes
    (1, 37, 1, 7, 7, 1, (2, 2, 2, 2)),      # 7x7 plane: flat path, 25 masks a block
    (1, 5, 1, 14, 14, 1, (2, 2, 2, 2)),     # row path, row pairs of 6 input rows
    (2, 3, 2, 19, 33, 1, (2, 2, 2, 2)),     # batch, multiplier, two column blocks
    (1, 6, 1, 28, 28, 2, (2, 2, 2, 2)),     # stride 2: taps 0-1, 2-3, 4 from three pairs
    (2, 3, 1, 15, 13, 2, (2, 1, 1, 2)),     # stride 2, odd sizes, uneven padding
    (1, 2, 1, 40, 41, 2, (2, 2, 2, 2)),     # stride 2 over two column blocks
    (2, 19, 1, 14, 14, 2, (1, 1, 2, 2)),    # EfficientNet's 14 -> 7 (TF "same" padding)
]


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("n, c, mult, h, w, stride, pad, k",
                         [(*case, 3) for case in CASES] + [(*case, 5) for case in CASES]
                         + [(*case, 5) for case in CASES_5X5])
def test_depthwise_matches_numpy(n, c, mult, h, w, stride, pad, k, relu):
    weight, bias, x = _rand(c * mult, 1, k, k), _rand(c * mult, seed=1), _rand(n, c, h, w)
    attrs = {"strides": (stride, stride), "padding": pad, "dilation": (1, 1)}
    kernel = _DepthwiseNCHW("nn.conv2d", weight, bias, relu, c, attrs)
    assert kernel.window is fast_window("dwconv", stride, k)
    kernel.lanes = None  # small planes take dw_lanes.py (its own tests): test the plane kernel
    ref = _reference(x, weight, bias, stride, pad, mult)
    ref = np.maximum(ref, 0) if relu else ref
    out = kernel(x, np.full(ref.shape, np.nan, np.float32))
    np.testing.assert_allclose(out, ref, **TOL)


def test_relu_keeps_nan_and_borders_read_no_neighbour_plane():
    """A NaN in one plane stays in its own outputs (masked lanes read nothing of the next
    plane or row), and relu passes it on as numpy's maximum does."""
    x = np.ones((1, 2, 7, 7), np.float32)
    x[0, 0, 0, 0] = np.nan
    weight = np.ones((2, 1, 3, 3), np.float32)
    attrs = {"strides": (1, 1), "padding": (1, 1, 1, 1), "dilation": (1, 1)}
    out = _DepthwiseNCHW("nn.conv2d", weight, None, True, 2, attrs)(
        x, np.empty((1, 2, 7, 7), np.float32))
    assert np.isnan(out[0, 0, :2, :2]).all() and not np.isnan(out[0, 0, 2:, :]).any()
    assert not np.isnan(out[0, 1]).any()
    assert out[0, 1, 0, 0] == 4 and out[0, 1, 3, 3] == 9


@pytest.mark.parametrize("kh, kw, strides, dilation, takes", [
    (3, 3, (1, 1), (1, 1), True), (3, 3, (2, 2), (1, 1), True), (3, 3, (3, 3), (1, 1), False),
    (3, 3, (1, 2), (1, 1), False), (3, 3, (1, 1), (2, 2), False), (5, 5, (1, 1), (1, 1), True),
    (5, 5, (2, 2), (1, 1), True), (5, 3, (1, 1), (1, 1), False), (7, 7, (1, 1), (1, 1), False),
])
def test_other_windows_keep_the_window_kernel(kh, kw, strides, dilation, takes):
    assert takes_window("dwconv", kh, kw, strides, dilation) is takes
    assert not takes_window("max", 5, 5, (1, 1), (1, 1))
    attrs = {"strides": strides, "padding": (1, 1, 1, 1), "dilation": dilation}
    kernel = _DepthwiseNCHW("nn.conv2d", _rand(4, 1, kh, kw), None, False, 4, attrs)
    assert (kernel.window is window_kernels()["dwconv"]) is not takes


def test_window_arguments_match_pool():
    assert WINDOW_ARGS == pool._ARGS + pool._PLANE_ARGS


POOL_CASES = [  # n, c, h, w, stride, padding, ceil_mode
    (1, 3, 112, 112, 2, 1, False),   # ResNet's stem pool
    (1, 4, 111, 111, 2, 0, True),    # SqueezeNet: ceil_mode, the last window hangs over
    (2, 3, 14, 15, 1, 1, False),     # Inception's stride-1 pools, batch
    (1, 2, 7, 40, 2, 1, True),       # two column blocks, ceil_mode with padding
    (1, 2, 5, 3, 1, 0, False),       # tiny plane
]


def _pool_kernel(op, c, h, w, stride, padding, ceil_mode, include_pad=False):
    attrs = relax.Attrs({"pool_size": 3, "strides": stride, "padding": padding,
                         "ceil_mode": ceil_mode, "count_include_pad": include_pad})
    site = Site(op, attrs, [Value(0, relax.TensorStructInfo((1, c, h, w), "float32"))],
                relax.TensorStructInfo((1, c, 1, 1), "float32"))
    return pool.Pool2dFact(op[3:6]).make(site)  # "max" / "avg"


@pytest.mark.parametrize("n, c, h, w, stride, padding, ceil_mode", POOL_CASES)
def test_max_and_avg_pool_match_torch(n, c, h, w, stride, padding, ceil_mode):
    torch = pytest.importorskip("torch")
    x = _rand(n, c, h, w)
    x[0, 0, 1, 2] = np.nan  # max keeps NaN, as numpy and torch do
    t = torch.from_numpy(x)
    for op, include_pad in (("nn.max_pool2d", False), ("nn.avg_pool2d", False),
                            ("nn.avg_pool2d", True)):
        kernel = _pool_kernel(op, c, h, w, stride, padding, ceil_mode, include_pad)
        assert kernel.run is fast_window(op[3:6], stride)
        if op == "nn.max_pool2d":
            ref = torch.nn.functional.max_pool2d(t, 3, stride, padding, ceil_mode=ceil_mode)
        else:
            ref = torch.nn.functional.avg_pool2d(t, 3, stride, padding, ceil_mode=ceil_mode,
                                                 count_include_pad=include_pad)
        ref = ref.numpy()
        out = kernel(x, np.full(ref.shape, 7.0, np.float32))
        np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("k, stride, hw", [(3, 1, 7), (3, 1, 20), (3, 2, 19), (5, 1, 7), (5, 2, 14),
                                           (5, 2, 23), (7, 1, 11), (3, 3, 12)])
def test_depthwise_relu6_clamps_both_ends(k, stride, hw):
    """A fused clip(x, 0, 6): in-place windows (3x3, 5x5) and pool.py's padded kernel (7x7,
    stride 3) clamp above too; NaN passes through as numpy's clip passes it."""
    c, pad = 5, (k // 2,) * 4
    weight, bias = _rand(c, 1, k, k, seed=3) * 4, _rand(c, seed=4) * 4
    x = _rand(2, c, hw, hw, seed=5)
    x[1, 2, 3, 3] = np.nan
    attrs = {"strides": (stride, stride), "padding": pad, "dilation": (1, 1)}
    kernel = _DepthwiseNCHW("nn.conv2d", weight, bias, True, c, attrs, 6.0)
    ref = np.clip(_reference(x, weight, bias, stride, pad, 1), 0, 6)
    out = kernel(x, np.full(ref.shape, -1, np.float32))
    np.testing.assert_allclose(out, ref, **TOL)
    assert (out == 6).any() and (out == 0).any() and np.isnan(out).any()
