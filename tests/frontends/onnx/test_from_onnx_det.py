"""Det of batched square matrices (one singular) against onnxruntime."""

import numpy as np
import pytest

from msc.frontends.onnx.testing import assert_matches_ort, node_model

pytest.importorskip("onnxruntime")


def test_batched_det_matches_onnxruntime():
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 4)).astype("float32")
    x[1, 2, 3] = x[1, 2, 0]  # a singular matrix: det 0
    inputs = {"x": x}
    assert_matches_ort(node_model("Det", inputs, opset=11), inputs, rtol=1e-4, atol=1e-5)
