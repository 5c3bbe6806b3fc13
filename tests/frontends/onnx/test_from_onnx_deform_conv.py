"""DeformConv (groups, offset groups, bias, mask, strides, pads, dilations) against
onnxruntime."""

import numpy as np
import pytest

from msc.frontends.onnx.testing import assert_matches_ort, node_model

pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("with_mask_bias", [False, True])
def test_deform_conv_matches_onnxruntime(with_mask_bias):
    rng = np.random.default_rng(int(with_mask_bias))
    # 4 channels in 2 groups, 2 offset groups, 3x2 kernel, stride 2 x 1, dilation 1 x 2
    x = rng.random((2, 4, 7, 6), dtype="float32")
    w = rng.standard_normal((6, 2, 3, 2)).astype("float32")
    oh, ow = (7 + 1 + 1 - 3) // 2 + 1, (6 + 0 + 2 - 3) // 1 + 1
    offset = rng.uniform(-2, 2, (2, 2 * 6 * 2, oh, ow)).astype("float32")
    inputs = {"x": x, "w": w, "offset": offset}
    if with_mask_bias:
        inputs["b"] = rng.standard_normal(6).astype("float32")
        inputs["mask"] = rng.random((2, 2 * 6, oh, ow), dtype="float32")
    model = node_model("DeformConv", inputs, opset=19, group=2, offset_group=2,
                       strides=[2, 1], dilations=[1, 2], pads=[1, 0, 1, 2], kernel_shape=[3, 2])
    assert_matches_ort(model, inputs, rtol=1e-4, atol=1e-4)
