"""MSCTensor, Layout and the attribute encoding (conventions 1.1, 1.2, 1.8)."""

import json

import numpy as np
import pytest

from msc.errors import SerializationError, ShapeError, ValidationError
from msc.graph import Layout, MSCTensor, encode_attr, get_type_attr, parse_attr


def conv_out(**kw):
    return MSCTensor("conv2d:0", "float32", "NCHW", [1, 6, 4, 4], **kw)


def dyn():
    return MSCTensor("inp_0:0", "float32", "NCHW", [-1, 3, 10, 10], "inp_0",
                     ["bz", "3", "10", "10"])


# ---- Layout -------------------------------------------------------------------------------
def test_layout_basics():
    layout = Layout("NCHW")
    assert layout.name == "NCHW" and layout.defined and layout == "NCHW"
    assert layout.index_of("C") == 1 and layout.index_of("D") == -1
    assert len(layout) == 4 and layout[3] == "W"
    assert Layout("NCHW") == Layout("NCHW") and hash(Layout("NC")) == hash(Layout("NC"))


def test_layout_undefined_and_subaxes():
    assert not Layout("") and Layout("") == "" and Layout(None).name == ""
    assert Layout("").index_of("N") == -1
    assert Layout("NCHW4c").index_of("c") == 4 and len(Layout("NCHW4c")) == 5


@pytest.mark.parametrize("bad", ["NC-HW", "N C", 5])
def test_layout_rejects_junk(bad):
    with pytest.raises(ValidationError, match="invalid layout"):
        Layout(bad)


# ---- fields and queries -------------------------------------------------------------------
def test_fields_are_plain_values():
    t = conv_out(alias="conv2d")
    assert (t.name, t.alias, t.dtype, t.dtype_name) == ("conv2d:0", "conv2d", "float32", "float32")
    assert t.layout == "NCHW" and t.shape == [1, 6, 4, 4] and t.prims == [] and t.ndim == 4
    t.shape.append(9)  # a copy: the tensor cannot be changed behind the graph's back
    assert t.shape == [1, 6, 4, 4]


@pytest.mark.parametrize("dtype, name", [(np.float32, "float32"), (np.dtype("int64"), "int64"),
                                         ("float", "float32"), ("bool", "bool"),
                                         ("bfloat16", "bfloat16"), ("float16", "float16")])
def test_dtype_normalized(dtype, name):
    assert MSCTensor("x:0", dtype, "", [1]).dtype == name


@pytest.mark.parametrize("kw, key", [
    ({"dtype": "floaty"}, "dtype"), ({"shape": [1, "3"]}, "shape"), ({"shape": [1, -2]}, "shape"),
    ({"shape": [True]}, "shape"), ({"shape": "1,3"}, "shape"), ({"prims": ["bz"]}, "prims"),
    ({"prims": "bz,3"}, "prims"), ({"layout": "N!"}, "layout")])
def test_constructor_rejects_bad_values(kw, key):
    args = {"name": "x:0", "dtype": "float32", "layout": "NC", "shape": [1, 3], **kw}
    with pytest.raises(ValidationError) as info:
        MSCTensor(**args)
    assert info.value.context["tensor"] == "x:0"
    assert info.value.context.get("key") == key


def test_get_shape_with_prims():
    t = dyn()
    assert t.get_shape() == [-1, 3, 10, 10]
    assert t.get_shape(with_prims=True) == ["bz", 3, 10, 10]
    assert conv_out().get_shape(True) == [1, 6, 4, 4]


def test_size_and_dims():
    t = conv_out()
    assert t.get_size() == 96 and dyn().get_size() == -1
    assert MSCTensor("s:0", "float32", "", []).get_size() == 1
    assert t.dim_at(1) == 6 and t.dim_at(-1) == 4 and t.dim_at("C") == 6
    assert t.layout_of("H") == 2 and t.layout_of("D") == -1
    assert dyn().prim_at("N") == "bz" and t.prim_at(0) == ""


@pytest.mark.parametrize("axis", ["D", 4, -5])
def test_dim_at_rejects_missing_axis(axis):
    with pytest.raises(ShapeError) as info:
        conv_out().dim_at(axis)
    assert info.value.context["tensor"] == "conv2d:0"


def test_alias_is_the_only_mutable_field():
    t = conv_out()
    t.set_alias("feat")
    assert t.alias == "feat"
    t.alias = "feat2"
    assert t.alias == "feat2"
    with pytest.raises(AttributeError):
        t.shape = [1]
    with pytest.raises(ValidationError):
        t.set_alias(3)


def test_equal_compares_shape_with_prims_and_dtype_only():
    assert conv_out().equal(MSCTensor("other:0", "float32", "ABCD", [1, 6, 4, 4], "x"))
    assert not conv_out().equal(MSCTensor("conv2d:0", "float16", "NCHW", [1, 6, 4, 4]))
    assert not dyn().equal(MSCTensor("inp_0:0", "float32", "NCHW", [-1, 3, 10, 10], "",
                                     ["n", "3", "10", "10"]))
    assert not conv_out().equal("conv2d:0")


def test_inspect_reports_alias_as_name():
    assert dyn().inspect() == {"name": "inp_0", "shape": ["bz", 3, 10, 10], "dtype": "float32",
                               "layout": "NCHW"}
    assert MSCTensor("x:0", "int32", "", [2]).inspect() == {
        "name": "", "shape": [2], "dtype": "int32", "layout": ""}


@pytest.mark.parametrize("tensor, text", [
    (conv_out(alias="conv2d"), "conv2d:0(conv2d)<1,6,4,4|float32|NCHW>"),
    (conv_out(), "conv2d:0<1,6,4,4|float32|NCHW>"),
    (MSCTensor("r:0", "float32", "", [2, 3]), "r:0<2,3|float32>"),
    (MSCTensor("s:0", "float32", "", []), "s:0<float32>"),
    (dyn(), "inp_0:0(inp_0)<bz,3,10,10|float32|NCHW>"),
    (MSCTensor("const_1", "float32", "O", [6], "conv2d.bias"), "const_1(conv2d.bias)<6|float32|O>"),
])
def test_printed_form(tensor, text):
    assert str(tensor) == text and repr(tensor) == text


# ---- JSON ---------------------------------------------------------------------------------
def test_to_json_is_an_ordered_dict():
    data = dyn().to_json()
    assert list(data) == ["name", "alias", "dtype", "layout", "shape", "prims"]
    assert data == {"name": "inp_0:0", "alias": "inp_0", "dtype": "float32", "layout": "NCHW",
                    "shape": [-1, 3, 10, 10], "prims": ["bz", "3", "10", "10"]}


def test_from_json_accepts_dict_text_and_path(tmp_path):
    data = dyn().to_json()
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    for source in (data, json.dumps(data), str(path), path):
        assert MSCTensor.from_json(source).to_json() == data


def test_from_json_defaults_and_overrides():
    t = MSCTensor.from_json('{"name": "x:0", "dtype": "int32", "shape": [2]}', alias="x")
    assert (t.alias, t.layout.name, t.prims) == ("x", "", [])


def test_clone_overrides_keys_and_leaves_original():
    w = MSCTensor("const", "float32", "OIHW", [6, 3, 7, 7], "conv2d.weight")
    pruned = w.clone(shape=(3, 3, 7, 7))
    assert pruned.shape == [3, 3, 7, 7] and pruned.name == "const" and pruned.alias == w.alias
    assert w.shape == [6, 3, 7, 7] and pruned is not w
    assert w.clone(dtype=np.float16, layout=Layout("ABCD")).dtype == "float16"


def test_clone_rejects_unknown_key():
    with pytest.raises(ValidationError, match="unknown tensor keys"):
        conv_out().clone(shap=[1])


@pytest.mark.parametrize("text, key", [
    ('{"name": "x:0", "shape": [1]}', "dtype"), ('{"dtype": "float32", "shape": [1]}', "name"),
    ('{"name": "x:0", "dtype": "float32"}', "shape"),
    ('{"name": "x:0", "dtype": "float32", "shape": "1"}', "shape"),
    ('{"name": 3, "dtype": "float32", "shape": [1]}', "name")])
def test_from_json_names_the_bad_key(text, key):
    with pytest.raises(SerializationError) as info:
        MSCTensor.from_json(text)
    assert info.value.context["key"] == key


def test_from_json_malformed_and_missing_file(tmp_path):
    with pytest.raises(SerializationError) as info:
        MSCTensor.from_json('{"name": "x:0",\n "dtype": }')
    assert info.value.context["line"] == 2 and info.value.context["col"] == 11
    with pytest.raises(SerializationError, match="no such file"):
        MSCTensor.from_json(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x:0", "dtype": "no_type", "shape": [1]}')
    with pytest.raises(ValidationError) as info:
        MSCTensor.from_json(bad)
    assert info.value.context["file"] == str(bad)


# ---- attribute encoding -------------------------------------------------------------------
@pytest.mark.parametrize("value, text", [
    (None, ""), (True, "1"), (False, "0"), (3, "3"), (np.int64(-2), "-2"), (1e-5, "0.000010"),
    (0.5, "0.500000"), (np.float32(2), "2.000000"), (float("inf"), "inf"), ("NCHW", "NCHW"),
    (np.dtype("float32"), "float32"), ([1, 1], "1,1"), ([5], "5,"), ((2.0,), "2.000000,"),
    ([], ""), (np.array([1, 2]), "1,2"), ([True, False], "1,0"), (["a", "b"], "a,b")])
def test_encode_attr(value, text):
    assert encode_attr(value) == text


def test_encode_attr_rejects_objects():
    with pytest.raises(ValidationError, match="cannot encode"):
        encode_attr(object())


@pytest.mark.parametrize("text, kind, array, value", [
    ("3", int, False, 3), ("-1", int, False, -1), ("0", bool, False, False),
    ("2", bool, False, True), ("0.000010", float, False, 1e-5), ("NCHW", str, False, "NCHW"),
    ("1,1", int, True, [1, 1]), ("5,", int, True, [5]), ("0.5,1.5", float, True, [0.5, 1.5]),
    ("1,0,", bool, True, [True, False]), ("a,b", str, True, ["a", "b"])])
def test_parse_attr(text, kind, array, value):
    assert parse_attr(text, kind, array=array) == value


@pytest.mark.parametrize("text, kind, array", [
    ("3,", int, False), ("1,1", bool, False), ("5", int, True), ("x", int, False),
    ("1,,2", int, True), ("1.5", int, False)])
def test_parse_attr_is_strict(text, kind, array):
    with pytest.raises(ValidationError) as info:
        parse_attr(text, kind, key="axis", array=array)
    assert info.value.context["key"] == "axis"


def test_get_type_attr_defaults_and_errors():
    attrs = {"groups": "1", "empty": "", "strides": "1,1"}
    assert get_type_attr(attrs, "groups", int) == 1
    assert get_type_attr(attrs, "empty", int, default=7) == 7  # empty counts as missing
    assert get_type_attr(attrs, "axis", int, -1) == -1
    with pytest.raises(ValidationError) as info:
        get_type_attr(attrs, "axis", int, node="conv2d")
    assert info.value.context == {"node": "conv2d", "key": "axis"}
    with pytest.raises(ValidationError, match="unsupported attribute kind"):
        get_type_attr(attrs, "groups", list)
