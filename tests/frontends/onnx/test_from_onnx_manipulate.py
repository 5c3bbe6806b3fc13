"""ONNX shape / data-movement ops through msc against onnxruntime."""

import numpy as np
import pytest
from onnx import helper

from msc.frontends.onnx.testing import assert_matches_ort, graph_model, node_model

RNG = np.random.default_rng(1)
X = RNG.standard_normal((2, 3, 4, 5)).astype("float32")


def i64(*values):
    return np.array(values, "int64")


@pytest.mark.parametrize("shape", [(6, 20), (0, -1), (2, 0, 20), (-1,), (2, 3, 0, 5)])
def test_reshape_constant_target(shape):
    model = node_model("Reshape", {"x": X}, initializers={"s": i64(*shape)})
    assert_matches_ort(model, {"x": X})


def test_reshape_runtime_target_copies_zero_dims():
    feeds = {"x": X, "s": i64(0, 12, -1)}
    assert_matches_ort(node_model("Reshape", feeds), feeds)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_flatten(axis):
    assert_matches_ort(node_model("Flatten", {"x": X}, axis=axis), {"x": X})


@pytest.mark.parametrize("perm", [None, [0, 2, 3, 1], [3, 2, 1, 0]])
def test_transpose(perm):
    attrs = {} if perm is None else {"perm": perm}
    assert_matches_ort(node_model("Transpose", {"x": X}, **attrs), {"x": X})


@pytest.mark.parametrize("axes", [[0], [0, -1]])
def test_unsqueeze_then_squeeze(axes):
    nodes = [helper.make_node("Unsqueeze", ["x", "a"], ["u"]),
             helper.make_node("Squeeze", ["u", "a"], ["y"])]
    model = graph_model(nodes, {"x": X}, ["u", "y"], initializers={"a": i64(*axes)})
    assert_matches_ort(model, {"x": X})


def test_squeeze_all_unit_dims():
    x = X[:1, :, :1]
    assert_matches_ort(node_model("Squeeze", {"x": x}), {"x": x})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis):
    feeds = {"a": X, "b": X}
    assert_matches_ort(node_model("Concat", feeds, axis=axis), feeds)


@pytest.mark.parametrize("split", [(1, 2), (1, 1, 1)])
def test_split(split):
    model = node_model("Split", {"x": X}, len(split), initializers={"split": i64(*split)},
                       axis=1)
    assert_matches_ort(model, {"x": X})


@pytest.mark.parametrize("axis,count", [(1, 3), (3, 2)])  # 5 -> 3 + 2 (ceil-sized parts)
def test_split_num_outputs(axis, count):
    model = node_model("Split", {"x": X}, count, axis=axis, num_outputs=count)
    assert_matches_ort(model, {"x": X})


def test_split_opset11_equal_parts():
    model = node_model("Split", {"x": X}, 3, opset=11, axis=1)
    assert_matches_ort(model, {"x": X})


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ((1,), (3,), (2,), None), ((0, 1), (2, 5), (1, 3), (1, 2)),
    ((-1,), (-2 ** 63,), (3,), (-1,)), ((1,), (2 ** 62,), None, None),
])
def test_slice(starts, ends, axes, steps):
    inits = {"starts": i64(*starts), "ends": i64(*ends),
             "axes": None if axes is None else i64(*axes),
             "steps": None if steps is None else i64(*steps)}
    assert_matches_ort(node_model("Slice", {"x": X}, initializers=inits), {"x": X})


def test_slice_runtime_bounds():
    feeds = {"x": X, "starts": i64(1), "ends": i64(4)}
    model = node_model("Slice", feeds, initializers={"axes": i64(2)})
    assert_matches_ort(model, feeds)


@pytest.mark.parametrize("indices,axis", [(i64(0, -1), 1), (np.array(-2, "int64"), 3),
                                           (i64(1, 0, 1).reshape(3, 1), 0)])
def test_gather(indices, axis):
    model = node_model("Gather", {"x": X}, initializers={"i": indices}, axis=axis)
    assert_matches_ort(model, {"x": X})


def test_gather_runtime_negative_indices():
    feeds = {"x": X, "i": i64(-1, 0, 2)}
    assert_matches_ort(node_model("Gather", feeds, axis=2), feeds)


def test_gather_elements():
    idx = RNG.integers(-3, 3, (2, 3, 4, 5))
    feeds = {"x": X, "i": idx}
    assert_matches_ort(node_model("GatherElements", feeds, axis=1), feeds)


@pytest.mark.parametrize("reduction", ["none", "add", "max"])
def test_scatter_elements(reduction):
    idx = np.tile(np.arange(3)[:, None], (1, 4)).reshape(1, 3, 4, 1).repeat(2, 0)
    upd = RNG.standard_normal(idx.shape).astype("float32")
    feeds = {"x": X, "i": idx.astype("int64"), "u": upd}
    model = node_model("ScatterElements", feeds, axis=1, reduction=reduction)
    assert_matches_ort(model, feeds)


@pytest.mark.parametrize("shape", [(2, 1, 4, 1), (3, 1, 1, 1, 1), (5,)])
def test_expand(shape):
    x = X[:, :1, :, :1] if len(shape) == 4 else X[0, 0, 0]
    model = node_model("Expand", {"x": x}, initializers={"s": i64(*shape)})
    assert_matches_ort(model, {"x": x})


def test_tile():
    assert_matches_ort(node_model("Tile", {"x": X}, initializers={"r": i64(1, 2, 1, 3)}),
                       {"x": X})


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode):
    x = RNG.standard_normal((1, 8, 2, 3)).astype("float32")
    assert_matches_ort(node_model("DepthToSpace", {"x": x}, blocksize=2, mode=mode), {"x": x})


def test_space_to_depth():
    x = RNG.standard_normal((1, 2, 4, 6)).astype("float32")
    assert_matches_ort(node_model("SpaceToDepth", {"x": x}, blocksize=2), {"x": x})


def test_shape_size_constant_of_shape():
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1),
             helper.make_node("Size", ["x"], ["n"]),
             helper.make_node("ConstantOfShape", ["s"], ["c"],
                              value=helper.make_tensor("v", 7, [1], [3]))]
    assert_matches_ort(graph_model(nodes, {"x": X}, ["s", "n", "c"]), {"x": X})


@pytest.mark.parametrize("bounds,dtype", [((0, 10, 3), "int64"), ((1.0, -2.0, -0.5),
                                                                   "float32")])
def test_range(bounds, dtype):
    inits = {n: np.array(v, dtype) for n, v in zip("sld", bounds)}
    nodes = [helper.make_node("Range", ["s", "l", "d"], ["y"])]
    assert_matches_ort(graph_model(nodes, {}, ["y"], initializers=inits), {})


def test_range_runtime_limit():
    feeds = {"l": np.array(7, "int64")}
    model = graph_model([helper.make_node("Range", ["s", "l", "d"], ["y"])], feeds, ["y"],
                        initializers={"s": np.array(1, "int64"), "d": np.array(2, "int64")})
    assert_matches_ort(model, feeds)


@pytest.mark.parametrize("upper,k", [(1, 0), (0, -1), (1, 2)])
def test_trilu(upper, k):
    model = node_model("Trilu", {"x": X}, initializers={"k": np.array(k, "int64")},
                       upper=upper)
    assert_matches_ort(model, {"x": X})


def test_eye_like():
    x = np.zeros((3, 5), "float32")
    assert_matches_ort(node_model("EyeLike", {"x": x}, k=1), {"x": x})


def test_one_hot():
    idx = i64(0, 2, -1, 1)
    inits = {"depth": np.array(3, "int64"), "values": np.array([0.5, 2.0], "float32")}
    model = node_model("OneHot", {"i": idx}, initializers=inits, axis=0)
    assert_matches_ort(model, {"i": idx})


def test_nonzero_and_compress():
    x = np.array([[0, 1, 0], [2, 0, 3]], "float32")
    cond = np.array([True, False, True])
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]),
             helper.make_node("Compress", ["x", "c"], ["cx"], axis=1)]
    assert_matches_ort(graph_model(nodes, {"x": x, "c": cond}, ["nz", "cx"]),
                       {"x": x, "c": cond})


def test_reverse_sequence():
    x = RNG.standard_normal((4, 3, 2)).astype("float32")
    feeds = {"x": x, "lens": i64(4, 1, 3)}
    model = node_model("ReverseSequence", feeds, time_axis=0, batch_axis=1)
    assert_matches_ort(model, feeds)


def test_constant_node():
    value = helper.make_tensor("v", 1, [2, 2], [1.0, 2.0, 3.0, 4.0])
    nodes = [helper.make_node("Constant", [], ["c"], value=value),
             helper.make_node("Add", ["x", "c"], ["y"])]
    x = np.ones((2, 2), "float32")
    assert_matches_ort(graph_model(nodes, {"x": x}, ["y"]), {"x": x})


# --------------------------------------------------------------------------------------------
# Shape-like inputs known only at run time (bound to symbolic dims with R.match_cast).

def test_split_runtime_sizes():
    feeds = {"x": X, "split": i64(1, 4)}
    assert_matches_ort(node_model("Split", feeds, 2, axis=3), feeds)


def test_one_hot_runtime_depth_and_values():
    feeds = {"i": i64(0, 2, -1), "depth": np.array(4, "int64"),
             "values": np.array([-1.0, 3.0], "float32")}
    assert_matches_ort(node_model("OneHot", feeds, axis=-1), feeds)


def test_tile_runtime_repeats():
    feeds = {"x": X, "r": i64(2, 1, 1, 2)}
    assert_matches_ort(node_model("Tile", feeds), feeds)


def test_pad_runtime_amounts():
    feeds = {"x": X, "p": i64(0, 1, -1, 2, 0, 0, 2, -2), "v": np.array(1.5, "float32")}
    assert_matches_ort(node_model("Pad", feeds), feeds)


def test_center_crop_pad_runtime_shape():
    feeds = {"x": X, "s": i64(6, 3)}
    model = node_model("CenterCropPad", feeds, axes=[2, 3])
    assert_matches_ort(model, feeds)


def test_expand_runtime_shape():
    feeds = {"x": X[:, :1], "s": i64(2, 3, 1, 1)}
    assert_matches_ort(node_model("Expand", feeds), feeds)


def test_constant_of_shape_runtime_shape():
    feeds = {"s": i64(2, 3)}
    assert_matches_ort(node_model("ConstantOfShape", feeds), feeds)


def test_slice_v1_attributes():
    model = node_model("Slice", {"x": X}, opset=9, starts=[1, 0], ends=[3, -1], axes=[2, 3])
    assert_matches_ort(model, {"x": X})
