"""Small-plane convs at batch > 1 run several images a native call (pixel_conv.py's pixel
table over every image, conv.py's GEMM path with one transpose and one GEMM): against
onnxruntime on the same model, at a batch (6) that the images-per-call step must divide,
1 and 2 threads, with relu6 fused, on both paths (the pixel tiles need AVX-512; the GEMM path
is what an AVX2 host runs)."""

import numpy as np
import pytest

from benchmarks.blocks import _Graph
from benchmarks.common import msc_executable, msc_runner, ort_session
from msc.backend.kernels import conv as conv_kernels
from msc.backend.kernels import pixel_conv
from msc.backend.runtime import native_run

pytest.importorskip("onnxruntime")
TOL = {"rtol": 1e-4, "atol": 1e-4}


def _model(n: int):
    """1x1 (read in place) -> relu6 -> 3x3 padded (a pad pass) -> 1x1 stride 2, on 4x4."""
    g = _Graph(seed=3)
    y = g.act(g.conv("x", 24, 40, 1), "relu6")
    y = g.act(g.conv(y, 40, 32, 3), "relu")
    y = g.conv(y, 32, 48, 1, stride=2)
    model = g.model([n, 24, 4, 4], y)
    return model


def _check(model) -> dict:
    ex = msc_executable(model)
    x = np.random.default_rng(0).standard_normal((6, 24, 4, 4), dtype=np.float32)
    want = ort_session(model, 1)(x)
    for threads in (1, 2):
        np.testing.assert_allclose(msc_runner(ex, threads)(x), want, **TOL)
    return ex.stats


def test_pixel_conv_takes_several_images_a_call():
    if not pixel_conv.pixel_conv_available():
        pytest.skip("the pixel tiles need AVX-512 (the GEMM path test covers this host)")
    assert pixel_conv._images_per_call(6, 4 * 40) == 6
    assert pixel_conv._images_per_call(6, pixel_conv._BATCH_BYTES // 8) == 2  # divides 6
    assert pixel_conv._images_per_call(6, pixel_conv._BATCH_BYTES) == 1
    stats = _check(_model(6))
    assert stats["ops"]["nn.conv2d"] == {"native": 3}


def test_gemm_path_takes_several_images_a_call(monkeypatch):
    monkeypatch.setattr(conv_kernels, "pixel_conv_available", lambda: False)
    monkeypatch.setattr(native_run, "split_step", lambda *args: None)  # 2 threads: _images
    calls = []
    images = conv_kernels._Conv2dNHWC._images
    monkeypatch.setattr(conv_kernels._Conv2dNHWC, "_images",
                        lambda self, x, out, i, m, *rest: calls.append(m) or
                        images(self, x, out, i, m, *rest))
    stats = _check(_model(6))
    assert stats["ops"]["nn.conv2d"] == {"native": 3}
    assert calls and set(calls) == {6}  # every call took the whole batch
