"""The conv kernels' prefetches. The direct conv's source prefetch (DirectConv2d._ahead): which
1x1 convs take it, and that the tile loop with it computes what numpy does, on every vector
width, with a fused residual, tails of positions and output channels, and on 1 and 2 threads
(the rule's limits shrunk so small shapes take it too). The pixel tiles' next-panel prefetch
(pixel_conv._PREFETCH_PIXELS): small planes take it, and match numpy with several panels and
K blocks, images per call and thread splits."""

import numpy as np
import pytest

from msc.backend.kernels import direct_conv, pixel_conv
from msc.backend.kernels.direct_conv import PLAN_FIELDS, DirectConv2d
from msc.backend.kernels.pixel_conv import PixelConv2d
from msc.backend.runtime.threads import num_threads

TOL = {"rtol": 1e-4, "atol": 1e-4}
ONE = {"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1)}


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _ahead(kernel, shape) -> int:
    return int(kernel._plan(shape).args[PLAN_FIELDS.index("ahead")])


@pytest.mark.parametrize("c, h, o, k, want", [
    (256, 56, 64, 1, 4),     # resnet50's 56x56 1x1 convs: 256 pages a tile
    (512, 28, 128, 1, 4),    # 512 channels on 28x28
    (128, 55, 16, 1, 4),     # squeezenet's 128 -> 16 squeeze on 55x55
    (64, 56, 256, 1, 0),     # 64 channels: within the TLB, no prefetch
    (1024, 14, 256, 1, 0),   # 14x14 planes: measured slower with it
    (256, 56, 64, 3, 0),     # 3x3 (padded planes): measured slower at any distance
])
def test_which_convs_prefetch(c, h, o, k, want):
    attrs = dict(ONE, padding=(k // 2,) * 4)
    kernel = DirectConv2d("nn.conv2d", np.zeros((o, c, k, k), np.float32), None, False, 1, attrs)
    assert _ahead(kernel, (1, c, h, h)) == want


@pytest.mark.parametrize("lanes", [16, 8, 4])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n, c, h, w, o, stride, residual", [
    (1, 24, 9, 11, 20, 1, False),   # tails of positions (99) and channels (20)
    (2, 7, 16, 16, 8, 1, True),     # batch, a residual added in the store, fewer sources
    (1, 40, 12, 13, 33, 2, False),  # stride 2 reads its phase planes: never prefetches
])
def test_prefetching_loop_matches_numpy(monkeypatch, lanes, threads, n, c, h, w, o, stride,
                                        residual):
    monkeypatch.setattr(direct_conv, "_PREFETCH", (3, 1, 1))  # every plain 1x1 conv takes it
    monkeypatch.setattr(direct_conv, "_PARALLEL_MACS", 0)  # 2 threads split the conv
    weight, bias, x = _rand(o, c, 1, 1), _rand(o, seed=1), _rand(n, c, h, w, seed=2)
    attrs = dict(ONE, strides=(stride, stride))
    kernel = DirectConv2d("nn.conv2d", weight, bias, True, 1, attrs, lanes=lanes,
                          residual=1 if residual else None)
    assert _ahead(kernel, x.shape) == (3 if stride == 1 else 0)
    y = np.einsum("oc,nchw->nohw", weight[:, :, 0, 0], x[:, :, ::stride, ::stride]) \
        + bias[None, :, None, None]
    res = _rand(*y.shape, seed=3)
    want = np.maximum(y + res if residual else y, 0)
    out = np.full(y.shape, np.nan, np.float32)
    with num_threads(threads):
        kernel(x, *([res] if residual else []), out)
    np.testing.assert_allclose(out, want, **TOL)


def _conv_ref(x, weight, bias, stride, pad):
    """NCHW conv + bias + relu in numpy (windows of the padded input)."""
    o, _, kh, kw = weight.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (xp.shape[2] - kh) // stride + 1, (xp.shape[3] - kw) // stride + 1
    y = np.zeros((x.shape[0], o, oh, ow), np.float32)
    for i in range(kh):
        for j in range(kw):
            window = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            y += np.einsum("oc,nchw->nohw", weight[:, :, i, j], window)
    return np.maximum(y + bias[None, :, None, None], 0)


@pytest.mark.skipif(not pixel_conv.pixel_conv_available(), reason="pixel tiles need AVX-512")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n, c, h, o, k, stride, pad, prefetch", [
    (1, 40, 7, 200, 1, 1, 0, True),      # 7x7: 9 tiles, 4 panels (the last one partial)
    (1, 24, 7, 130, 3, 1, 1, True),      # 3x3 on 7x7, K blocks of 16 sources
    (2, 16, 14, 70, 3, 2, 1, True),      # stride 2 to 7x7, 2 images: 49 pixels a call
    (1, 16, 14, 70, 1, 1, 0, False),     # 196 pixels: no prefetch
])
def test_pixel_tiles_prefetching_next_panel_match_numpy(monkeypatch, threads, n, c, h, o, k,
                                                         stride, pad, prefetch):
    monkeypatch.setattr(pixel_conv, "_PARALLEL_MACS", 0)  # 2 threads split panels or pixels
    weight, bias, x = _rand(o, c, k, k), _rand(o, seed=1), _rand(n, c, h, h, seed=2)
    attrs = {"strides": (stride, stride), "padding": (pad,) * 4, "dilation": (1, 1)}
    kernel = PixelConv2d("nn.conv2d", weight, bias, True, attrs)
    kernel.kc = 16  # several K blocks: later blocks add to the tiles' scratch
    plan = kernel._plan(x.shape)
    assert plan.fixed[pixel_conv._ARGS.index("ahead")] == (pixel_conv.NV if prefetch else 0)
    want = _conv_ref(x, weight, bias, stride, pad)
    out = np.full(want.shape, np.nan, np.float32)
    with num_threads(threads):
        kernel(x, out)
    np.testing.assert_allclose(out, want, **TOL)
