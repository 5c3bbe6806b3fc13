"""What the long atheris campaign (benchmarks/fuzz_atheris.py) found in the ONNX reader, each
pinned by the smallest model that showed it; all are msc errors naming the input now."""

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from msc.errors import SerializationError, ValidationError
from msc.frontends.onnx.api import from_onnx

NAME = "conv1_b_0__SHAPE"


def _model() -> bytes:
    graph = helper.make_graph([helper.make_node("Relu", [NAME], ["y"], name="relu")], "g",
                              [helper.make_tensor_value_info(NAME, T.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]) \
        .SerializeToString()


@pytest.mark.parametrize("where", [0, 1])
def test_a_name_that_is_not_utf8_is_a_serialization_error(tmp_path, where):
    """Was TypeError (cannot use a string pattern on a bytes-like object): protobuf returns
    proto2 string fields that are not UTF-8 as bytes."""
    data = _model()
    assert data.count(NAME.encode()) == 2  # node input, graph input
    spots = [i for i in range(len(data)) if data.startswith(NAME.encode(), i)]
    broken = bytearray(data)
    broken[spots[where] + len(NAME) - 1] = 0xB9  # 'E' -> a lone continuation byte
    path = tmp_path / "m.onnx"
    path.write_bytes(bytes(broken))
    with pytest.raises(SerializationError, match=r"m\.onnx: .* is not UTF-8 text"):
        from_onnx(path, as_msc=False)
    with pytest.raises(SerializationError, match="<bytes>"):
        from_onnx(bytes(broken), as_msc=False)


def test_a_model_proto_with_bytes_names_is_refused():
    model = onnx.ModelProto()
    model.ParseFromString(_model().replace(b"y", b"\xff", 1))
    with pytest.raises(SerializationError, match="<ModelProto>"):
        from_onnx(model, as_msc=False)


@pytest.mark.parametrize("elem", [2143219455, 0, -1])
def test_a_tensor_attribute_of_unknown_type_names_node_and_attribute(elem):
    """Was KeyError from onnx's type table (ConstantOfShape's value, in a mutated squeezenet)."""
    value = helper.make_tensor("v", T.FLOAT, [1], [1.0])
    value.data_type = elem
    node = helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill", value=value)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("s", T.INT64, [2])],
                              [helper.make_tensor_value_info("y", T.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(ValidationError, match=r"node 'fill': attribute 'value' cannot be read"):
        from_onnx(model, as_msc=False)


def test_a_tensor_attribute_declaring_more_than_it_stores_is_refused():
    value = helper.make_tensor("v", T.FLOAT, [1], [1.0])
    value.dims[:] = [10 ** 6, 10 ** 6]
    node = helper.make_node("Constant", [], ["y"], name="c", value=value)
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", T.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(ValidationError, match=r"node 'c'.*1000000000000 elements"):
        from_onnx(model, as_msc=False)
