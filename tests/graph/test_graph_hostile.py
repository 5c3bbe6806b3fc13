"""Hostile MSC JSON (issue #20): each defect found by hand is refused at load with an msc error
that names the input, the tensor and what is wrong."""

from __future__ import annotations

import copy
import json
import pathlib

import pytest

from msc.errors import SerializationError, ValidationError
from msc.graph import MSCGraph, MSCTensor

CONV_RELU = pathlib.Path(__file__).parents[2] / "msc" / "data" / "conv_relu.json"


def _graph_data() -> dict:
    return json.loads(CONV_RELU.read_text())


def _with_output(**fields) -> dict:
    data = copy.deepcopy(_graph_data())
    data["nodes"][0]["outputs"][0].update(fields)
    return data


@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_deep_nesting_is_a_serialization_error(tmp_path, opener):
    text = opener * 100_000 + "1" + ("]" if opener == "[" else "}") * 100_000
    with pytest.raises(SerializationError, match="nested too deeply"):
        MSCGraph.from_json(text)
    path = tmp_path / "deep.json"
    path.write_text(text)
    with pytest.raises(SerializationError, match="deep.json"):
        MSCGraph.from_json(str(path))


def test_unknown_dtype_is_refused_naming_the_tensor(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(_with_output(dtype="float99")))
    with pytest.raises(ValidationError) as info:
        MSCGraph.from_json(str(path))
    text = str(info.value)
    assert "float99" in text and "inp_0:0" in text and "g.json" in text and "float32" in text


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "bfloat16", "float8_e4m3fn",
                                   "uint8", "float16x4", "void"])
def test_known_dtypes_load(dtype):
    assert MSCTensor("x:0", dtype, "", [2]).dtype == dtype


@pytest.mark.parametrize("fields, words", [
    ({"shape": [1, -2, 10, 10]}, "-2"),
    ({"shape": [1, 3.0, 10, 10]}, "ints"),
    ({"shape": [1, True, 10, 10]}, "ints"),
    ({"shape": [1, 2 ** 70, 10, 10]}, "int64"),
    ({"layout": "NCHWN"}, "twice"),
    ({"layout": 7}, "string"),
    ({"dtype": ["float32"]}, "string"),
])
def test_bad_tensor_fields_are_refused(fields, words):
    with pytest.raises((SerializationError, ValidationError), match=words) as info:
        MSCGraph.from_dict(_with_output(**fields))
    assert "inp_0" in str(info.value)


@pytest.mark.parametrize("text", [b"\xff\xfe{\x00", '{"n": ' + "9" * 5000 + "}"])
def test_undecodable_json_is_a_serialization_error(text):
    with pytest.raises(SerializationError):
        MSCGraph.from_json(text)


def test_path_with_nul_byte_is_a_serialization_error():
    with pytest.raises(SerializationError, match="cannot read"):
        MSCGraph.from_json("graph\x00.json")
