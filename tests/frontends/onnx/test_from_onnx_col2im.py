"""Col2Im: image / block shapes as run-time tensors or initializers, against onnxruntime."""

import numpy as np
import pytest

from msc.frontends.onnx.testing import assert_matches_ort, node_model

pytest.importorskip("onnxruntime")

ATTRS = {"dilations": [1, 2], "pads": [1, 0, 0, 2], "strides": [2, 1]}


def _data() -> np.ndarray:
    # image 6 x 5, block 2 x 3: padded 7 x 7, blocks (7 - 2) // 2 + 1 = 3 by 7 - 4 = 3
    return np.random.default_rng(0).random((2, 3 * 6, 9), dtype="float32")


@pytest.mark.parametrize("as_initializer", [False, True])
def test_col2im_matches_onnxruntime(as_initializer):
    shapes = {"image_shape": np.array([6, 5], "int64"), "block_shape": np.array([2, 3], "int64")}
    inputs = {"x": _data()}
    if as_initializer:
        model = node_model("Col2Im", inputs, opset=18, initializers=shapes, **ATTRS)
    else:
        inputs.update(shapes)
        model = node_model("Col2Im", inputs, opset=18, **ATTRS)
    assert_matches_ort(model, inputs, rtol=1e-5, atol=1e-6)
