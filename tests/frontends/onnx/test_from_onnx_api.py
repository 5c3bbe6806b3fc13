"""from_onnx's interface: model sources, external data, input_info and symbolic dims,
shape-subgraph folding, opset selection, schema defaults, errors and the custom hook."""

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from msc import relax
from msc.errors import UnsupportedOpError, ValidationError
from msc.frontends.onnx import opset as opsets
from msc.frontends.onnx.api import from_onnx
from msc.frontends.onnx.attrs import node_attrs
from msc.frontends.onnx.testing import assert_matches_ort, graph_model, node_model, run_msc
from msc.relax.expr import Call, Constant

RNG = np.random.default_rng(5)
X = RNG.standard_normal((2, 3, 8, 8)).astype("float32")
W = RNG.standard_normal((4, 3, 3, 3)).astype("float32")


def conv_flatten_model(batch="N"):
    """Conv -> Relu -> Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as CNN exports."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Shape", ["r"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus_one"], ["shape"], axis=0),
             helper.make_node("Reshape", ["r", "shape"], ["y"])]
    inits = {"w": W, "zero": np.array(0, "int64"), "axes": np.array([0], "int64"),
             "minus_one": np.array([-1], "int64")}
    dims = {"x": [batch, 3, 8, 8]} if batch is not None else None
    return graph_model(nodes, {"x": X}, ["y"], initializers=inits, input_dims=dims)


def calls(mod) -> list:
    return [b.value.op.name.removeprefix("relax.") for blk in mod["main"].body.blocks
            for b in blk.bindings if isinstance(b.value, Call)]


# --------------------------------------------------------------------------------------------
# Model sources and weights.

def test_model_proto_path_and_bytes_give_the_same_module(tmp_path):
    model = conv_flatten_model(batch=None)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    texts = {from_onnx(src, as_msc=False)[0].script()
             for src in (model, str(path), path, model.SerializeToString())}
    assert len(texts) == 1


def test_weights_are_the_initializers_without_copies():
    mod, weights = from_onnx(conv_flatten_model(None), as_msc=False)
    assert set(weights) == {"w", "zero", "axes", "minus_one"}
    consts = [a for blk in mod["main"].body.blocks for b in blk.bindings
              if isinstance(b.value, Call) for a in b.value.args if isinstance(a, Constant)]
    assert any(c.data is weights["w"] for c in consts)
    np.testing.assert_array_equal(weights["w"], W)


def test_external_data_is_memory_mapped(tmp_path):
    model = conv_flatten_model(batch=None)
    path = tmp_path / "big.onnx"
    onnx.save_model(model, path, save_as_external_data=True, location="w.bin",
                    size_threshold=0)
    assert (tmp_path / "w.bin").exists()
    _mod, weights = from_onnx(path, as_msc=False)
    assert isinstance(weights["w"], np.memmap)
    np.testing.assert_array_equal(weights["w"], W)
    np.testing.assert_allclose(run_msc(str(path), {"x": X})[0],
                               run_msc(conv_flatten_model(None), {"x": X})[0])


def test_missing_external_data_file_is_a_clear_error(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save_model(conv_flatten_model(None), path, save_as_external_data=True,
                    location="w.bin", size_threshold=0)
    (tmp_path / "w.bin").unlink()
    with pytest.raises(ValidationError, match="external data file"):
        from_onnx(path, as_msc=False)


def test_missing_model_file():
    with pytest.raises(ValidationError, match="does not exist"):
        from_onnx("/nonexistent/model.onnx")


# --------------------------------------------------------------------------------------------
# Inputs: dim_param, input_info.

def test_dim_param_becomes_a_named_symbolic_dim():
    mod, _ = from_onnx(conv_flatten_model("batch"), as_msc=False)
    (x,) = mod["main"].params
    dim = x.struct_info.shape[0]
    assert dim.name == "batch"
    assert mod["main"].ret_struct_info.values[0] is dim or \
        str(mod["main"].ret_struct_info.values[0]) == "batch"


def test_same_dim_param_is_one_var():
    x = helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, ["n", 4])
    out = helper.make_tensor_value_info("c", onnx.TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"])], "g", [x, y], [out])
    mod, _ = from_onnx(helper.make_model(graph), as_msc=False)
    a, b = mod["main"].params
    assert a.struct_info.shape[0] is b.struct_info.shape[0]


@pytest.mark.parametrize("info", [{"x": [1, 3, 8, 8]}, {"x": ([1, 3, 8, 8], "float32")},
                                  [[1, 3, 8, 8]]])
def test_input_info_overrides_shapes(info):
    mod, _ = from_onnx(conv_flatten_model("N"), input_info=info, as_msc=False)
    assert [int(d) for d in mod["main"].ret_struct_info.values] == [1, 256]


def test_input_info_str_dim_is_symbolic():
    mod, _ = from_onnx(conv_flatten_model(None), input_info={"x": ["b", 3, 8, 8]},
                       as_msc=False)
    assert str(mod["main"].params[0].struct_info.shape[0]) == "b"


def test_input_info_unknown_name():
    with pytest.raises(ValidationError, match="not a graph input"):
        from_onnx(conv_flatten_model(), input_info={"nope": [1]}, as_msc=False)


# --------------------------------------------------------------------------------------------
# Shape subgraphs.

def test_shape_subgraph_folds_to_a_static_reshape():
    mod, _ = from_onnx(conv_flatten_model(None), as_msc=False)
    assert calls(mod) == ["nn.conv2d", "nn.relu", "reshape"]
    assert [int(d) for d in mod["main"].ret_struct_info.values] == [2, 256]


def test_shape_subgraph_folds_to_a_symbolic_reshape():
    mod, _ = from_onnx(conv_flatten_model("N"), as_msc=False)
    assert calls(mod) == ["nn.conv2d", "nn.relu", "reshape"]
    assert "R.shape([N, -1])" in mod.script()
    assert_matches_ort(conv_flatten_model("N"), {"x": X}, rtol=1e-4, atol=1e-4)


def test_shape_arithmetic_folds():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "one", "three"], ["hw"]),
             helper.make_node("Mul", ["hw", "two"], ["hw2"]),
             helper.make_node("Cast", ["hw2"], ["hw2f"], to=1),
             helper.make_node("Cast", ["hw2f"], ["hw2i"], to=7),
             helper.make_node("ConstantOfShape", ["hw2i"], ["y"])]
    inits = {"one": np.array([1], "int64"), "three": np.array([3], "int64"),
             "two": np.array(2, "int64")}
    model = graph_model(nodes, {"x": X[0]}, ["y"], initializers=inits,
                        input_dims={"x": [3, "h", 8]})
    mod, _ = from_onnx(model, as_msc=False)
    assert str(mod["main"].ret_struct_info) == 'R.Tensor((h * 2, 16), dtype="float32")'
    assert "shape_of" not in mod.script()


# --------------------------------------------------------------------------------------------
# Converter selection, schema defaults, the custom hook.

def test_opset_picks_the_nearest_lower_converter():
    def v1(g, n):
        return None

    def v13(g, n):
        return None

    table = {"Op": {1: v1, 13: v13}}
    assert opsets.select(table, "Op", 12) is v1
    assert opsets.select(table, "Op", 13) is v13
    assert opsets.select(table, "Op", 20) is v13
    assert opsets.select({"Op": {7: v1}}, "Op", 6) is None
    assert opsets.select(table, "Other", 20) is None


def test_opset_override_changes_semantics():
    # Softmax before opset 13 normalizes over the input flattened at ``axis``.
    model = node_model("Softmax", {"x": X}, opset=13, axis=1)
    new = run_msc(model, {"x": X})[0]
    old = run_msc(model, {"x": X}, opset=11)[0]
    np.testing.assert_allclose(new.sum(axis=1), 1, rtol=1e-5)
    np.testing.assert_allclose(old.reshape(2, -1).sum(axis=1), 1, rtol=1e-5)


def test_schema_defaults_are_filled_once():
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[2, 2])
    attrs = node_attrs(node, 17)
    assert attrs["strides"] == [2, 2]
    assert attrs["group"] == 1 and attrs["auto_pad"] == "NOTSET"
    assert attrs["pads"] is None and attrs["dilations"] is None


def test_custom_convert_map_adds_and_overrides():
    def my_op(g, node):
        return g.emit(relax.op.multiply(node.inputs[0], relax.const(2.0)))

    def relu_as_negative(g, node):
        return g.emit(relax.op.negative(node.inputs[0]))

    nodes = [helper.make_node("Double", ["x"], ["d"], domain="my.ops"),
             helper.make_node("Relu", ["d"], ["y"])]
    model = graph_model(nodes, {"x": X}, ["y"])
    model.opset_import.append(helper.make_opsetid("my.ops", 1))
    custom = {"my.ops:Double": my_op, "Relu": {14: relu_as_negative}}
    np.testing.assert_allclose(run_msc(model, {"x": X}, custom_convert_map=custom)[0], -2 * X)


def test_custom_converter_must_be_callable():
    with pytest.raises(ValidationError, match="not callable"):
        from_onnx(node_model("Relu", {"x": X}), custom_convert_map={"Relu": 3}, as_msc=False)


# --------------------------------------------------------------------------------------------
# Errors.

def test_unsupported_ops_are_listed_at_once():
    nodes = [helper.make_node("Foo", ["x"], ["a"], name="foo_1"),
             helper.make_node("Foo", ["a"], ["b"], name="foo_2"),
             helper.make_node("Bar", ["b"], ["c"], name="bar_1", domain="vendor"),
             helper.make_node("Dropout", ["c", "ratio", "train"], ["y"], name="drop")]
    inits = {"ratio": np.array(0.5, "float32"), "train": np.array(True)}
    model = graph_model(nodes, {"x": X}, ["y"], initializers=inits)
    model.opset_import.append(helper.make_opsetid("vendor", 3))
    with pytest.raises(UnsupportedOpError) as info:
        from_onnx(model, as_msc=False)
    items = {i["op"]: i for i in info.value.items}
    assert items["Foo"] == {"op": "Foo", "opset": 18, "count": 2, "node": "foo_1",
                            "reason": "no converter"}
    assert items["Bar"]["domain"] == "vendor" and items["Bar"]["opset"] == 3
    assert "custom_convert_map" in str(info.value)


def test_conversion_time_problems_are_collected():
    nodes = [helper.make_node("Dropout", ["x", "ratio", "train"], ["d"], name="drop"),
             helper.make_node("TopK", ["x", "k"], ["v", "i"], name="topk")]
    inits = {"ratio": np.array(0.5, "float32"), "train": np.array(True)}
    feeds = {"x": X, "k": np.array([2], "int64")}
    # k known only at run time slices a full sort, which needs the axis' size.
    model = graph_model(nodes, feeds, ["d", "v"], initializers=inits,
                        input_dims={"x": [2, 3, 8, "w"]})
    with pytest.raises(UnsupportedOpError) as info:
        from_onnx(model, as_msc=False)
    reasons = {i["op"]: i["reason"] for i in info.value.items}
    assert "training mode" in reasons["Dropout"] and "constant" in reasons["TopK"]


def test_shape_errors_name_the_onnx_node():
    node = helper.make_node("Add", ["a", "b"], ["y"], name="bad_add")
    model = graph_model([node], {"a": X, "b": X[:, :2]}, ["y"])
    with pytest.raises(Exception) as info:
        from_onnx(model, as_msc=False)
    assert "bad_add" in "".join(getattr(info.value, "__notes__", []))


def test_sequence_inputs_are_rejected():
    seq = helper.make_tensor_sequence_value_info("s", onnx.TensorProto.FLOAT, None)
    out = helper.make_tensor_value_info("y", onnx.TensorProto.INT64, None)
    graph = helper.make_graph([helper.make_node("SequenceLength", ["s"], ["y"])], "g", [seq],
                              [out])
    with pytest.raises(UnsupportedOpError):
        from_onnx(helper.make_model(graph), as_msc=False)


# --------------------------------------------------------------------------------------------
# The MSCGraph path.

def test_as_msc_returns_a_graph():
    graph, weights = from_onnx(conv_flatten_model("N"))
    nodes = graph.inspect()["nodes"]
    assert nodes["input"] == 1 and nodes["reshape"] == 1
    assert any(np.array_equal(w, W) for w in weights.values())


def test_weights_initializer_names_round_trip():
    model = conv_flatten_model(None)
    arrays = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    _, weights = from_onnx(model, as_msc=False)
    for name, value in arrays.items():
        np.testing.assert_array_equal(weights[name], value)
