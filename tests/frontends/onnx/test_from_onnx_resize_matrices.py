"""Resize cases image.resize2d cannot say, composed as interpolation matrices: a scale given at
run time (not out / in), antialias, half_pixel_symmetric, a roi given at run time."""

import numpy as np
import pytest

from msc.frontends.onnx.testing import assert_matches_ort, node_model, run_ort, run_reference

pytest.importorskip("onnxruntime")

X = np.random.default_rng(0).random((1, 2, 7, 9), dtype="float32")


# align_corners with a scale whose out = floor(in * scale) rounds: onnxruntime divides by
# (out - 1), the ONNX spec (and its reference evaluator) by (in * scale - 1).
@pytest.mark.parametrize("mode,coord,antialias,reference", [
    ("cubic", "half_pixel", 0, run_ort), ("linear", "align_corners", 0, run_reference),
    ("cubic", "half_pixel", 1, run_ort), ("linear", "half_pixel_symmetric", 0, run_ort),
    ("linear", "pytorch_half_pixel", 1, run_ort),
])
def test_scales_at_run_time_match_the_reference(mode, coord, antialias, reference):
    inputs = {"x": X, "roi": None, "scales": np.array([1, 1, 0.6, 1.3], "float32")}
    model = node_model("Resize", inputs, opset=19, mode=mode, antialias=antialias,
                       coordinate_transformation_mode=coord)
    assert_matches_ort(model, {"x": X, "scales": inputs["scales"]}, rtol=1e-4, atol=1e-5,
                       reference=reference)


def test_roi_at_run_time_crops_and_extrapolates_as_onnxruntime():
    inputs = {"x": X, "roi": np.array([0.2, -0.1, 0.9, 0.7], "float32"), "scales": None,
              "sizes": np.array([4, 5], "int64")}
    model = node_model("Resize", inputs, opset=19, mode="linear", axes=[2, 3],
                       coordinate_transformation_mode="tf_crop_and_resize",
                       extrapolation_value=-3.0)
    feeds = {k: v for k, v in inputs.items() if v is not None}
    assert_matches_ort(model, feeds, rtol=1e-4, atol=1e-5)
