"""Hostile ONNX input (issue #20): corrupted bytes, impossible tensors and broken graphs end
in an msc.errors error naming the file, tensor or node, before anything large is allocated."""

import numpy as np
import pytest
from onnx import TensorProto, helper

from msc.errors import MSCError, SerializationError, ValidationError
from msc.frontends.onnx.api import from_onnx
from msc.frontends.onnx.testing import graph_model

X = np.ones((2, 3), "float32")


def relu_model():
    return graph_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], {"x": X}, ["y"])


def model_with_initializer(tensor: TensorProto):
    nodes = [helper.make_node("Add", ["x", tensor.name], ["y"], name="add")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [2, 3])],
                              [helper.make_tensor_value_info("y", 1, None)],
                              initializer=[tensor])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_truncated_bytes_name_the_source(cut):
    data = relu_model().SerializeToString()
    with pytest.raises(SerializationError, match="not a valid ONNX model"):
        from_onnx(data[:int(len(data) * cut)], as_msc=False)


def test_corrupted_file_names_the_file(tmp_path):
    path = tmp_path / "broken.onnx"
    path.write_bytes(b"\xff" * 64)
    with pytest.raises(SerializationError, match="broken.onnx") as info:
        from_onnx(path, as_msc=False)
    assert "re-export" in str(info.value)


def test_initializer_of_a_trillion_elements_fails_before_allocating():
    tensor = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1_000_000, 1_000_000])
    with pytest.raises(ValidationError, match="'w'.*10{12}|'w'.*1000000000000"):
        from_onnx(model_with_initializer(tensor), as_msc=False)


@pytest.mark.parametrize("dims", [[-2, 3], [7, 3]])
def test_initializer_dims_that_disagree_with_data(dims):
    tensor = helper.make_tensor("w", TensorProto.FLOAT, [2, 3], np.ones(6, "float32"))
    tensor.dims[:] = dims
    with pytest.raises(ValidationError, match="tensor 'w'"):
        from_onnx(model_with_initializer(tensor), as_msc=False)


def test_dangling_input_names_the_node():
    model = graph_model([helper.make_node("Add", ["x", "ghost"], ["y"], name="add")],
                        {"x": X}, ["y"])
    with pytest.raises(ValidationError, match="node 'add'.*'ghost'"):
        from_onnx(model, as_msc=False)


def test_node_cycle_is_reported():
    nodes = [helper.make_node("Relu", ["b"], ["a"], name="n1"),
             helper.make_node("Relu", ["a"], ["b"], name="n2")]
    model = graph_model(nodes, {"x": X}, ["a"])
    with pytest.raises(ValidationError, match="node 'n1'"):
        from_onnx(model, as_msc=False)


def test_duplicate_output_names_are_refused():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="n1"),
             helper.make_node("Neg", ["x"], ["y"], name="n2")]
    with pytest.raises(ValidationError, match="node 'n2'.*'y'"):
        from_onnx(graph_model(nodes, {"x": X}, ["y"]), as_msc=False)


def test_bad_attribute_type_names_the_node():
    node = helper.make_node("Transpose", ["x"], ["y"], name="t", perm="not ints")
    with pytest.raises(MSCError, match="'t'"):
        from_onnx(graph_model([node], {"x": X}, ["y"]), as_msc=False)


@pytest.mark.parametrize("version", [0, -5, 10**6])
def test_absurd_opset(version):
    model = relu_model()
    model.opset_import[0].version = version
    try:
        from_onnx(model, as_msc=False)
    except MSCError as err:
        assert "opset" in str(err)


def test_input_dtype_outside_the_schema_names_the_node():
    """Found by the fuzzer: a float shape for Reshape built a rank-256 tensor, slowly."""
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"], name="r")]
    model = graph_model(nodes, {"x": X}, ["y"], initializers={"s": np.array([3, 2], "float32")})
    with pytest.raises(ValidationError, match="node 'r'.*tensor\\(float\\).*tensor\\(int64\\)"):
        from_onnx(model, as_msc=False)
