"""ONNX neural-network ops (conv, pool, norms, softmax, pad, resize, grids) against
onnxruntime."""

import numpy as np
import pytest

from msc.frontends.onnx.testing import assert_matches_ort, node_model

RNG = np.random.default_rng(2)
X = RNG.standard_normal((2, 4, 9, 8)).astype("float32")
W = (RNG.standard_normal((6, 4, 3, 3)) * 0.2).astype("float32")
B = RNG.standard_normal(6).astype("float32")
# Accumulations over whole windows: float32 sums in a different order than onnxruntime.
CONV_TOL = {"rtol": 1e-4, "atol": 1e-4}


@pytest.mark.parametrize("attrs", [
    {}, {"pads": [1, 1, 1, 1]}, {"strides": [2, 2], "pads": [0, 1, 2, 1]},
    {"dilations": [2, 1]}, {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
    {"auto_pad": "SAME_LOWER"}, {"auto_pad": "VALID"},
])
def test_conv2d(attrs):
    model = node_model("Conv", {"x": X}, initializers={"w": W, "b": B}, **attrs)
    assert_matches_ort(model, {"x": X}, **CONV_TOL)


def test_conv_grouped_without_bias():
    w = W[:, :2]
    model = node_model("Conv", {"x": X}, initializers={"w": w}, group=2)
    assert_matches_ort(model, {"x": X}, **CONV_TOL)


@pytest.mark.parametrize("rank", [3, 5])
def test_conv1d_conv3d(rank):
    x = RNG.standard_normal((1, 2) + (6,) * (rank - 2)).astype("float32")
    w = RNG.standard_normal((3, 2) + (3,) * (rank - 2)).astype("float32")
    model = node_model("Conv", {"x": x}, initializers={"w": w}, pads=[1] * (2 * rank - 4))
    assert_matches_ort(model, {"x": x}, **CONV_TOL)


@pytest.mark.parametrize("attrs", [
    {}, {"strides": [2, 2], "pads": [1, 1, 1, 1]}, {"strides": [2, 2],
                                                     "output_padding": [1, 1]},
    {"strides": [2, 2], "output_shape": [19, 17]}, {"auto_pad": "SAME_UPPER",
                                                    "strides": [2, 2]},
])
def test_conv_transpose(attrs):
    w = (RNG.standard_normal((4, 3, 3, 3)) * 0.2).astype("float32")
    model = node_model("ConvTranspose", {"x": X}, initializers={"w": w, "b": B[:3]}, **attrs)
    assert_matches_ort(model, {"x": X}, **CONV_TOL)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2, 2]}, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 2], "ceil_mode": 1, "strides": [2, 2]},
    {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]},
])
def test_pool(op, attrs):
    assert_matches_ort(node_model(op, {"x": X}, **attrs), {"x": X})


def test_average_pool_count_include_pad():
    model = node_model("AveragePool", {"x": X}, kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                       count_include_pad=1)
    assert_matches_ort(model, {"x": X})


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"])
def test_global_pool(op):
    assert_matches_ort(node_model(op, {"x": X}), {"x": X})


def test_lp_pool():
    model = node_model("LpPool", {"x": X}, kernel_shape=[2, 2], p=2, strides=[2, 2])
    assert_matches_ort(model, {"x": X}, **CONV_TOL)


def test_batch_norm_inference():
    c = X.shape[1]
    inits = {"s": RNG.random(c, "float32") + 0.5, "b": RNG.standard_normal(c).astype("float32"),
             "m": RNG.standard_normal(c).astype("float32"),
             "v": RNG.random(c, "float32") + 0.5}
    model = node_model("BatchNormalization", {"x": X}, initializers=inits, epsilon=1e-3)
    assert_matches_ort(model, {"x": X})


def test_instance_norm():
    inits = {"s": np.linspace(0.5, 1.5, 4, dtype="float32"), "b": np.ones(4, "float32")}
    model = node_model("InstanceNormalization", {"x": X}, initializers=inits)
    assert_matches_ort(model, {"x": X}, **CONV_TOL)


@pytest.mark.parametrize("axis,bias", [(-1, True), (1, False), (2, True)])
def test_layer_norm(axis, bias):
    shape = X.shape[axis:] if axis >= 0 else X.shape[-1:]
    inits = {"s": RNG.random(shape, "float32") + 0.5,
             "b": RNG.standard_normal(shape).astype("float32") if bias else None}
    model = node_model("LayerNormalization", {"x": X}, initializers=inits, axis=axis)
    assert_matches_ort(model, {"x": X}, **CONV_TOL)


def test_layer_norm_mean_and_inv_std_outputs():
    inits = {"s": np.ones(8, "float32")}
    model = node_model("LayerNormalization", {"x": X}, 3, initializers=inits)
    assert_matches_ort(model, {"x": X}, **CONV_TOL)


def test_group_norm():
    inits = {"s": np.linspace(0.5, 1.5, 4, dtype="float32"), "b": np.ones(4, "float32")}
    model = node_model("GroupNormalization", {"x": X}, opset=21, initializers=inits,
                       num_groups=2)
    assert_matches_ort(model, {"x": X}, **CONV_TOL)


def test_lrn():
    model = node_model("LRN", {"x": X}, size=3, alpha=1e-3, beta=0.75, bias=1.5)
    assert_matches_ort(model, {"x": X})


@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization(p):
    assert_matches_ort(node_model("LpNormalization", {"x": X}, p=p, axis=1), {"x": X})


def test_mean_variance_normalization():
    assert_matches_ort(node_model("MeanVarianceNormalization", {"x": X}), {"x": X},
                       **CONV_TOL)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("opset,axis", [(13, 1), (13, -1), (11, 1), (11, 2)])
def test_softmax_family(op, opset, axis):
    assert_matches_ort(node_model(op, {"x": X}, opset=opset, axis=axis), {"x": X})


def test_dropout_inference_outputs_mask():
    assert_matches_ort(node_model("Dropout", {"x": X}, 2), {"x": X})


@pytest.mark.parametrize("mode,pads", [
    ("constant", [0, 0, 1, 2, 0, 0, 2, 1]), ("reflect", [0, 0, 2, 1, 0, 0, 1, 2]),
    ("edge", [0, 1, 1, 0, 0, 0, 1, 1]), ("wrap", [0, 0, 1, 1, 0, 0, 2, 2]),
    ("constant", [0, 0, -1, 1, 0, 0, 2, -2]),
])
def test_pad(mode, pads):
    inits = {"p": np.array(pads, "int64"), "v": np.array(0.5, "float32")}
    assert_matches_ort(node_model("Pad", {"x": X}, initializers=inits, mode=mode), {"x": X})


@pytest.mark.parametrize("attrs,sizes", [
    ({"mode": "nearest"}, [2, 4, 18, 16]),
    ({"mode": "linear"}, [2, 4, 5, 4]),
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, [2, 4, 12, 10]),
    ({"mode": "cubic"}, [2, 4, 12, 16]),
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
      "nearest_mode": "floor"}, [2, 4, 3, 3]),
])
def test_resize_sizes(attrs, sizes):
    inits = {"roi": None, "scales": None, "sizes": np.array(sizes, "int64")}
    model = node_model("Resize", {"x": X}, initializers=inits, **attrs)
    assert_matches_ort(model, {"x": X}, **CONV_TOL)


def test_resize_runtime_sizes():
    feeds = {"x": X, "roi": None, "scales": None, "sizes": np.array([2, 4, 4, 4], "int64")}
    model = node_model("Resize", feeds, mode="linear")
    feeds = {"x": X, "sizes": feeds["sizes"]}
    assert_matches_ort(model, feeds, **CONV_TOL)


def test_resize_integer_scales():
    inits = {"roi": None, "scales": np.array([1, 1, 2, 3], "float32")}
    assert_matches_ort(node_model("Resize", {"x": X}, initializers=inits, mode="nearest"),
                       {"x": X})


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample(mode, padding_mode):
    grid = RNG.uniform(-1.2, 1.2, (2, 5, 6, 2)).astype("float32")
    feeds = {"x": X, "g": grid}
    model = node_model("GridSample", feeds, opset=16, mode=mode, padding_mode=padding_mode)
    assert_matches_ort(model, feeds, **CONV_TOL)


# --------------------------------------------------------------------------------------------
# Older opsets pick their own converters (attributes instead of inputs, other semantics).

def test_pad_v2_attributes():
    model = node_model("Pad", {"x": X}, opset=10, pads=[0, 0, 1, 0, 0, 0, 0, 2], value=0.25)
    assert_matches_ort(model, {"x": X})


@pytest.mark.parametrize("opset,mode", [(8, "nearest"), (9, "nearest"), (9, "linear")])
def test_upsample(opset, mode):
    scales = np.array([1, 1, 2, 2], "float32")
    if opset < 9:
        model = node_model("Upsample", {"x": X}, opset=opset, mode=mode, scales=list(scales))
    else:
        model = node_model("Upsample", {"x": X}, opset=opset, initializers={"s": scales},
                           mode=mode)
    assert_matches_ort(model, {"x": X}, **CONV_TOL)


def test_resize_v10():
    inits = {"s": np.array([1, 1, 2, 3], "float32")}
    model = node_model("Resize", {"x": X}, opset=10, initializers=inits, mode="nearest")
    assert_matches_ort(model, {"x": X})


def test_group_norm_v18_per_group_scale():
    inits = {"s": np.array([0.5, 2.0], "float32"), "b": np.array([1.0, -1.0], "float32")}
    model = node_model("GroupNormalization", {"x": X}, opset=18, initializers=inits,
                       num_groups=2)
    assert_matches_ort(model, {"x": X}, **CONV_TOL)
