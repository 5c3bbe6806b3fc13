"""Fuzzing from_onnx (issue #20) over mutations of real models: flipped and truncated bytes,
and structured edits through the protobuf API (dims, names, cycles, attributes, op types,
opsets). Property: it translates, or raises an msc.errors error with a message; never another
exception, never a hang. CI runs a few examples with a fixed seed; a long run:

    MSC_FUZZ_EXAMPLES=2000 python -m pytest tests/frontends/onnx/test_fuzz_onnx.py -q
"""

import os
from pathlib import Path

import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import AttributeProto, helper

from msc.errors import MSCError
from msc.frontends.onnx.api import from_onnx
from tests.helpers.fuzz import time_guard

EXAMPLES = int(os.environ.get("MSC_FUZZ_EXAMPLES", "40"))
LIGHT = Path(onnx.__file__).parent / "backend/test/data/light"
MODELS = {name: onnx.load(LIGHT / f"light_{name}.onnx") for name in ("squeezenet", "zfnet512")}
FUZZ = settings(derandomize=True, max_examples=EXAMPLES, deadline=None,
                suppress_health_check=list(HealthCheck))


def translate_or_msc_error(source) -> None:
    with time_guard(20):
        try:
            from_onnx(source, as_msc=False)
        except MSCError as err:
            assert str(err).strip()


# --------------------------------------------------------------------------------------------
# Bytes.

@FUZZ
@given(st.sampled_from(sorted(MODELS)), st.data())
def test_flipped_and_truncated_bytes(name, data):
    raw = bytearray(MODELS[name].SerializeToString())
    for _ in range(data.draw(st.integers(1, 8))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(1, len(raw)))
    translate_or_msc_error(bytes(raw[:cut]))


# --------------------------------------------------------------------------------------------
# Structured edits: each draws what it needs and edits the model in place.

def _dims(data):
    return data.draw(st.lists(st.integers(-3, 10**12) | st.sampled_from([0, 1, 2, 3]),
                              max_size=5))


def edit_value_info_dims(model, data):
    values = list(model.graph.input) + list(model.graph.output)
    value = data.draw(st.sampled_from(values))
    shape = value.type.tensor_type.shape
    del shape.dim[:]
    for d in _dims(data):
        shape.dim.add().dim_value = d


def edit_initializer_dims(model, data):
    if model.graph.initializer:
        tensor = data.draw(st.sampled_from(list(model.graph.initializer)))
        tensor.dims[:] = _dims(data)


def _node(model, data):
    return data.draw(st.sampled_from(list(model.graph.node)))


def _names(model):
    return [n for node in model.graph.node for n in node.output] + \
        [v.name for v in model.graph.input] + ["", "ghost"]


def edit_input_name(model, data):
    node = _node(model, data)
    if node.input:
        node.input[data.draw(st.integers(0, len(node.input) - 1))] = \
            data.draw(st.sampled_from(_names(model)))


def edit_output_name(model, data):
    node = _node(model, data)
    node.output[0] = data.draw(st.sampled_from(_names(model)))


def edit_node_order(model, data):
    nodes = list(model.graph.node)
    i, j = data.draw(st.integers(0, len(nodes) - 1)), data.draw(st.integers(0, len(nodes) - 1))
    nodes[i], nodes[j] = nodes[j], nodes[i]
    del model.graph.node[:]
    model.graph.node.extend(nodes)


_ATTR_VALUES = st.one_of(st.integers(-2**40, 2**40), st.floats(allow_nan=True),
                         st.text(max_size=5), st.lists(st.integers(-5, 5), min_size=1, max_size=6),
                         st.lists(st.floats(-3, 3), min_size=1, max_size=3))


def edit_attribute(model, data):
    node = _node(model, data)
    names = [a.name for a in node.attribute] + ["axis", "perm", "pads", "strides", "bogus"]
    name = data.draw(st.sampled_from(names))
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(kept + [helper.make_attribute(name, data.draw(_ATTR_VALUES))])


def edit_attribute_type(model, data):
    node = _node(model, data)
    if node.attribute:
        attr = data.draw(st.sampled_from(list(node.attribute)))
        attr.type = data.draw(st.sampled_from(list(AttributeProto.AttributeType.values())))


def edit_op_type(model, data):
    node = _node(model, data)
    node.op_type = data.draw(st.sampled_from(["Relu", "Conv", "Gemm", "Reshape", "Concat",
                                              "NoSuchOp", "", "Loop", "If", "Softmax"]))
    node.domain = data.draw(st.sampled_from(["", "", "ai.onnx", "com.example", "ai.onnx.ml"]))


def edit_opset(model, data):
    version = data.draw(st.sampled_from([None, -1, 0, 1, 6, 13, 21, 99, 10**9]))
    del model.opset_import[:]
    if version is not None:
        model.opset_import.add(domain="", version=version)


def edit_elem_type(model, data):
    value = data.draw(st.sampled_from(list(model.graph.input) + list(model.graph.initializer)))
    elem = data.draw(st.integers(0, 30))
    if hasattr(value, "data_type"):
        value.data_type = elem
    else:
        value.type.tensor_type.elem_type = elem


EDITS = [edit_value_info_dims, edit_initializer_dims, edit_input_name, edit_output_name,
         edit_node_order, edit_attribute, edit_attribute_type, edit_op_type, edit_opset,
         edit_elem_type]


@FUZZ
@given(st.sampled_from(sorted(MODELS)), st.lists(st.sampled_from(EDITS), min_size=1,
                                                 max_size=3), st.data())
def test_structured_edits(name, edits, data):
    model = onnx.ModelProto()
    model.CopyFrom(MODELS[name])
    for edit in edits:
        edit(model, data)
    translate_or_msc_error(model)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_unedited_models_translate(name):
    from_onnx(MODELS[name], as_msc=False)
