"""GridSample bicubic (every padding mode), 3-D grids and 3-D AffineGrid, against onnxruntime
(the ONNX reference evaluator where onnxruntime departs from the spec)."""

import numpy as np
import pytest

from msc.frontends.onnx.testing import assert_matches_ort, node_model, run_ort, run_reference

pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_bicubic_matches_onnxruntime(padding, align):
    rng = np.random.default_rng(align)
    inputs = {"x": rng.random((1, 2, 5, 6), dtype="float32"),
              "grid": rng.uniform(-1.4, 1.4, (1, 4, 3, 2)).astype("float32")}
    model = node_model("GridSample", inputs, opset=20, mode="cubic", padding_mode=padding,
                       align_corners=align)
    # border: onnxruntime clamps every coordinate (as PyTorch); the ONNX spec and its reference
    # evaluator only those past the border (-0.5 .. n - 0.5 without align_corners), then clamp
    # each tap, which differs for cubic's 4 taps
    reference = run_reference if padding == "border" else run_ort
    assert_matches_ort(model, inputs, rtol=1e-4, atol=1e-5, reference=reference)


@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_volumetric_matches_onnxruntime(mode):
    rng = np.random.default_rng(3)
    inputs = {"x": rng.random((2, 2, 3, 4, 5), dtype="float32"),
              "grid": rng.uniform(-1.1, 1.1, (2, 2, 3, 4, 3)).astype("float32")}
    model = node_model("GridSample", inputs, opset=20, mode=mode, padding_mode="border")
    assert_matches_ort(model, inputs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid_3d_size_at_run_time_matches_onnxruntime(align):
    # no axis of size 1: there onnxruntime's align_corners grid is 0, the spec's -1 (as msc)
    rng = np.random.default_rng(align)
    inputs = {"theta": rng.standard_normal((2, 3, 4)).astype("float32"),
              "size": np.array([2, 1, 3, 2, 4], "int64")}
    model = node_model("AffineGrid", inputs, opset=20, align_corners=align)
    assert_matches_ort(model, inputs, rtol=1e-5, atol=1e-6)
