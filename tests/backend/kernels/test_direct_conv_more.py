"""NCHW convs with small output planes run as pixel tiles (pixel_conv.py, AVX-512 hosts) or
else as im2col + GEMM (conv._gemm_wins), larger ones directly; every path matches torch, and
2 threads are bitwise equal to 1."""

import numpy as np
import pytest

from msc import relax
from msc.backend.kernels import conv as conv_kernels
from msc.backend.kernels import direct_conv, pixel_conv
from msc.backend.kernels import gemm as gemm_kernels
from msc.backend.kernels.base import Site
from msc.backend.runtime import native_run
from msc.backend.runtime.threads import num_threads
from msc.errors import ShapeError
from msc.relax import op as R

TOL = {"rtol": 1e-4, "atol": 1e-4}


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _site(out_shape) -> Site:
    return Site("nn.conv2d", None, [], relax.TensorStructInfo(out_shape, "float32"))


@pytest.mark.parametrize("out_shape, window, groups, gemm", [
    ((1, 2048, 7, 7), 1, 1, True),       # resnet50 res5 1x1: direct wastes a 48+1 tail
    ((1, 512, 7, 7), 3, 1, True),
    ((1, 256, 14, 14), 3, 1, True),      # 3x3 at 14x14: padded wide rows
    ((1, 1024, 14, 14), 1, 1, False),    # 1x1 at 14x14: direct measured ahead
    ((1, 128, 28, 28), 3, 1, False),
    ((1, 64, 7, 7), 3, 2, False),        # grouped convs stay direct
    ((1, 64, 0, 7), 1, 1, False),        # empty planes
])
def test_small_planes_take_the_gemm(out_shape, window, groups, gemm):
    weight = np.zeros((out_shape[1], 64, window, window), np.float32)
    assert conv_kernels._gemm_wins(_site(out_shape), weight, groups) == gemm


@pytest.mark.parametrize("out_shape, cin, window, direct", [
    ((16, 64, 8, 8), 16, 1, True),       # PoolFormer's MLP 1x1, K = 16
    ((1, 128, 7, 7), 32, 1, True),
    ((16, 16, 8, 8), 64, 1, False),      # K = 64: the pixel tiles
    ((16, 128, 4, 4), 32, 1, False),     # a 4x4 plane: the pixel tiles
    ((16, 24, 8, 8), 24, 3, False),      # RepVGG's 3x3, K = 216: windows keep their paths
])
def test_short_1x1_sums_on_small_planes_take_the_direct_conv(out_shape, cin, window, direct):
    weight = np.zeros((out_shape[1], cin, window, window), np.float32)
    site = _site(out_shape)
    other = conv_kernels._gemm_wins(site, weight, 1) or conv_kernels._pixel_wins(site, weight)
    assert other is not direct


@pytest.mark.parametrize("out_shape, cin, window, pixel", [
    ((1, 256, 14, 14), 64, 3, True),     # K = 576 on a small plane
    ((1, 32, 56, 56), 128, 3, False),    # large plane: direct
    ((1, 128, 28, 28), 128, 3, True),    # K = 1152 up to 32x32
    ((1, 64, 13, 13), 512, 1, False),    # 1x1 with < 1024 channels: direct
    ((1, 256, 14, 14), 1024, 1, True),
    ((1, 2048, 7, 7), 64, 1, True),      # where the GEMM path was
    ((16, 128, 4, 4), 32, 1, True),      # 1x1 on a 4x4 plane: any sum
])
def test_pixel_tiles_take_small_planes_with_long_sums(out_shape, cin, window, pixel):
    weight = np.zeros((out_shape[1], cin, window, window), np.float32)
    assert conv_kernels._pixel_wins(_site(out_shape), weight) == pixel


def _torch_conv(x, w, b, strides, padding, dilation):
    torch = pytest.importorskip("torch")
    top, left, bottom, right = (padding,) * 4 if isinstance(padding, int) else padding
    x = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    out = torch.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                       stride=strides, dilation=dilation)
    return np.maximum(out.numpy(), 0)


CASES = [  # x NCHW, weight OIHW, strides, padding, small-plane (pixel / GEMM) images run (by
    # the two calls: the two-thread call's half of them runs from Python)
    ((1, 96, 7, 7), (200, 96, 1, 1), 1, 0, 2),      # pointwise GEMM, no im2col
    ((2, 64, 14, 14), (70, 64, 1, 1), 2, 0, 4),     # strided 1x1: im2col subsamples
    ((1, 48, 7, 7), (40, 48, 3, 3), 1, 1, 2),
    ((2, 32, 14, 14), (33, 32, 3, 3), 1, 1, 4),
    ((1, 24, 13, 13), (16, 24, 3, 3), 2, 1, 2),     # 7x7 out of an odd plane
    ((1, 64, 12, 12), (20, 64, 3, 3), 1, 1, 2),     # 12x12, K = 576: pixel tiles (else GEMM)
    ((1, 16, 30, 30), (20, 16, 3, 3), 1, 1, 0),     # large plane: direct
    ((2, 16, 34, 33), (24, 16, 1, 1), 2, 0, 0),     # direct, strided 1x1: no compaction
    ((1, 8, 20, 20), (12, 8, 3, 1), 1, 1, 0),       # direct, padded 3x1: no compaction
]


@pytest.mark.parametrize("xs, ws, strides, padding, images", CASES)
def test_conv_bias_relu_matches_torch_on_both_paths(monkeypatch, xs, ws, strides, padding,
                                                    images):
    _check(monkeypatch, xs, ws, strides, padding, 1, images)


@pytest.mark.parametrize("ws, dilation, images", [
    ((24, 16, 3, 3), 2, 2),      # 8x9 out: GEMM
    ((24, 16, 3, 3), 1, 0),      # 14x15 out of a larger plane: direct
])
def test_dilated_asymmetric_padding(monkeypatch, ws, dilation, images):
    xs = (1, 16, 9, 10) if dilation == 2 else (1, 16, 13, 14)
    _check(monkeypatch, xs, ws, 1, (1, 2, 3, 0), dilation, images)


def _check(monkeypatch, xs, ws, strides, padding, dilation, images):
    monkeypatch.setattr(gemm_kernels, "PARALLEL_FLOPS", 0)  # split even these small convs
    monkeypatch.setattr(direct_conv, "_PARALLEL_MACS", 0)
    monkeypatch.setattr(pixel_conv, "_PARALLEL_MACS", 0)
    monkeypatch.setattr(native_run, "split_step", lambda *args: None)  # kernel objects split
    runs = []
    batched, pixels = conv_kernels._Conv2dNHWC._images, pixel_conv.PixelConv2d._run
    monkeypatch.setattr(conv_kernels._Conv2dNHWC, "_images", lambda self, x, out, i, m, *a:
                        runs.extend([1] * m) or batched(self, x, out, i, m, *a))
    monkeypatch.setattr(pixel_conv.PixelConv2d, "_run", lambda self, plan, *a: runs.extend(
        [1] * plan.out_shape[0]) or pixels(self, plan, *a))
    w, b = _rand(*ws, seed=1), _rand(ws[0], seed=2)
    x = relax.Var("x", relax.TensorStructInfo(xs, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(R.nn.conv2d(x, relax.const(w), strides=strides, padding=padding,
                                    dilation=dilation))
            y = bb.emit(R.add(y, relax.const(b.reshape(1, -1, 1, 1))))
            out = bb.emit_output(R.nn.relu(y))
        bb.emit_func_output(out)
    ex = relax.build(bb.get())
    assert ex.stats["ops"]["nn.conv2d"] == {"native": 1}
    f = relax.VirtualMachine(ex, relax.cpu())["main"]
    xv = _rand(*xs, seed=3)
    with num_threads(1):  # the plan's native chain runs the conv (runtime/plan_code.py)
        one = f(xv).numpy().copy()
    runs.clear()
    with num_threads(2):  # split across threads: the kernel object runs it
        two = f(xv).numpy().copy()
    assert np.array_equal(one, two)
    assert len(runs) == images // 2, "the conv took the other path"
    np.testing.assert_allclose(one, _torch_conv(xv, w, b, strides, padding, dilation), **TOL)


@pytest.mark.parametrize("xs, ws, strides, padding, kc_bytes", [
    ((2, 13, 5, 3), (37, 13, 3, 2), 1, (1, 0, 1, 1), 1 << 18),  # channel tail, 15 pixels
    ((1, 40, 9, 9), (300, 40, 3, 3), 2, 1, 4096),  # 5 panels split; 16-source K blocks
    ((1, 24, 7, 7), (20, 24, 1, 1), 1, 0, 1 << 18),  # the input read in place
])
def test_pixel_tiles_match_torch_and_split_bitwise(monkeypatch, xs, ws, strides, padding,
                                                   kc_bytes):
    if not pixel_conv.pixel_conv_available():
        pytest.skip("pixel tiles need AVX-512")
    monkeypatch.setattr(pixel_conv, "_PARALLEL_MACS", 0)
    monkeypatch.setattr(pixel_conv, "_KC_BYTES", kc_bytes)
    w, b, x = _rand(*ws, seed=1), _rand(ws[0], seed=2), _rand(*xs, seed=3)
    pad = (padding,) * 4 if isinstance(padding, int) else padding
    kernel = pixel_conv.PixelConv2d("nn.conv2d", w, b, True, {
        "strides": (strides, strides), "padding": pad, "dilation": (1, 1)})
    want = _torch_conv(x, w, b, strides, padding, 1)
    outs = []
    for count in (1, 2, 3):
        out = np.full(want.shape, np.nan, np.float32)
        with num_threads(count):
            kernel(x, out)
        outs.append(out)
    assert all(np.array_equal(outs[0], more) for more in outs[1:])
    np.testing.assert_allclose(outs[0], want, **TOL)
    with pytest.raises(ShapeError):
        kernel(x, np.empty((1, 2, 3, 4), np.float32))
