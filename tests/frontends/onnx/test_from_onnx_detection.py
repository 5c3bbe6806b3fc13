"""NonMaxSuppression: a data-dependent number of selected rows, against onnxruntime."""

import numpy as np
import pytest

from msc.frontends.onnx.testing import assert_matches_ort, node_model

pytest.importorskip("onnxruntime")


def _boxes(rng, batch: int, n: int, center: int) -> np.ndarray:
    """Overlapping boxes; corner boxes have half their corners flipped (ONNX allows it)."""
    lo = rng.uniform(0, 4, (batch, n, 2))
    size = rng.uniform(0.5, 3, (batch, n, 2))
    if center:
        return np.concatenate([lo, size], -1).astype("float32")
    boxes = np.concatenate([lo, lo + size], -1)
    flip = rng.random((batch, n)) < 0.5
    boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]
    return boxes.astype("float32")


@pytest.mark.parametrize("center", [0, 1])
def test_thresholds_known_only_at_run_time_match_onnxruntime(center):
    rng = np.random.default_rng(center)
    inputs = {"boxes": _boxes(rng, 2, 12, center),
              "scores": rng.random((2, 3, 12), dtype="float32"),
              "max_out": np.array([4], "int64"), "iou": np.array([0.3], "float32"),
              "score_min": np.array([0.2], "float32")}
    model = node_model("NonMaxSuppression", inputs, opset=11, center_point_box=center)
    assert_matches_ort(model, inputs, rtol=0, atol=0)


def test_absent_thresholds_use_onnx_defaults():
    rng = np.random.default_rng(2)
    inputs = {"boxes": _boxes(rng, 1, 8, 0), "scores": rng.random((1, 2, 8), dtype="float32")}
    model = node_model("NonMaxSuppression", inputs, opset=11,
                       initializers={"max_out": np.array([3], "int64")})
    assert_matches_ort(model, inputs, rtol=0, atol=0)
