"""Windowed convs on planes of more than 1024 pixels with long sums (VGG's 256 -> 256 on 56x56)
take the pixel tiles on AVX-512 hosts, the others keep the direct conv (conv._pixel_large's
measured rule); each path against onnxruntime on the same model at 1 and 2 threads, relu fused.
"""

import textwrap

import numpy as np
import pytest

from benchmarks.blocks import _Graph
from benchmarks.common import msc_executable, msc_runner, ort_session
from msc.backend.kernels import conv as conv_kernels
from msc.backend.kernels import pixel_conv
from tests.helpers.isa_child import ROOT, capped_report

pytest.importorskip("onnxruntime")
TOL = {"rtol": 1e-4, "atol": 1e-4}


def _kernels(ex) -> set:
    return {type(node.fn).__name__ for program in ex.programs.values()
            for node in program.walk() if type(getattr(node, "fn", None)).__module__.startswith(
                "msc.backend.kernels")}


@pytest.mark.parametrize("cin, cout, size, pixel", [
    (128, 128, 36, True),   # K = 1152, as many output as input channels (VGG's 128 on 112x112)
    (232, 256, 33, True),   # K = 2088 >= 2048 (as VGG's 256 -> 512 on 56x56)
    (128, 256, 33, False),  # K = 1152 with more output channels: direct measured faster
    (128, 32, 33, False),   # densenet's 128 -> 32: fewer than 128 output channels
])
def test_large_plane_path_and_numbers(cin, cout, size, pixel):
    g = _Graph(seed=5)
    model = g.model([1, cin, size, size], g.act(g.conv("x", cin, cout, 3), "relu"))
    ex = msc_executable(model)
    want_kernel = "PixelConv2d" if pixel and pixel_conv.pixel_conv_available() else "DirectConv2d"
    assert want_kernel in _kernels(ex)
    x = np.random.default_rng(0).standard_normal((1, cin, size, size), dtype=np.float32)
    want = ort_session(model, 1)(x)
    for threads in (1, 2):
        np.testing.assert_allclose(msc_runner(ex, threads)(x), want, **TOL)


def test_rule_reads_the_weight_shape():
    assert conv_kernels._pixel_large(np.empty((256, 256, 3, 3)))
    assert not conv_kernels._pixel_large(np.empty((256, 256, 1, 1)))  # 1x1 keeps its limits
    assert not conv_kernels._pixel_large(np.empty((128, 64, 3, 3)))   # K = 576


_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    sys.path.insert(0, {root!r})
    from benchmarks.blocks import _Graph
    from benchmarks.common import msc_executable, msc_runner, ort_session
    g = _Graph(seed=5)
    model = g.model([1, 128, 36, 36], g.act(g.conv("x", 128, 128, 3), "relu"))
    ex = msc_executable(model)
    kernels = sorted({{type(node.fn).__name__ for program in ex.programs.values()
                      for node in program.walk() if type(getattr(node, "fn", None)).__module__
                      .startswith("msc.backend.kernels")}})
    x = np.random.default_rng(0).standard_normal((1, 128, 36, 36), dtype=np.float32)
    want = ort_session(model, 1)(x)
    errors = [float(np.abs(msc_runner(ex, t)(x) - want).max()) for t in (1, 2)]
    print(json.dumps({{"kernels": kernels, "errors": errors}}))
""")


@pytest.mark.parametrize("isa, kernel", [("avx512", "PixelConv2d"), ("avx2", "DirectConv2d")])
def test_capped_host_picks_by_its_features(isa, kernel, tmp_path):
    """A host without AVX-512 keeps the direct conv on these planes; one with it takes the
    pixel tiles; both match onnxruntime (a fresh interpreter per cap, its own kernel cache)."""
    from msc.backend.llvm.jit import host_target

    if isa == "avx512" and "+avx512f" not in host_target().features:
        pytest.skip("this host has no AVX-512 to keep")
    report = capped_report(_CHILD.format(root=ROOT), isa, tmp_path)
    assert kernel in report["kernels"]
    assert max(report["errors"]) < 1e-3
