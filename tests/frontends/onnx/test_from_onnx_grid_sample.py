"""GridSample bicubic (every padding mode) and 3-D grids, against onnxruntime (the ONNX
reference evaluator where onnxruntime departs from the spec)."""

import numpy as np
import pytest

from frontends.onnx.testing import assert_matches_ort, node_model, run_ort, run_reference

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
