"""TVM's metadata JSON (msc/relax/tvm_json.py): every form TVM wrote is read; what msc writes
is TVM 0.27's form and reads back bit for bit."""

import base64
import json

import numpy as np
import pytest

from msc import relax
from msc.errors import ParseError
from msc.relax.parser.metadata import decode_tvm_json
from msc.relax.tvm_json import decode_blob, encode_blob, encode_metadata

ARRAYS = [np.arange(6, dtype="float32").reshape(2, 3), np.array([True, False]),
          np.array([-3, 7], "int64"), np.array(2.5, "float16"), np.arange(4, dtype="uint8")]
BLOB = base64.b64encode(encode_blob(ARRAYS[0])).decode()
MODULE = '''# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
        gv: R.Tensor((2, 3), dtype="float32") = R.add(x, metadata[KEY][0])
        return gv
'''


@pytest.mark.parametrize("arr", ARRAYS, ids=lambda a: str(a.dtype))
def test_blob_round_trip_keeps_dtype_shape_and_bits(arr):
    back = decode_blob(encode_blob(arr))
    assert back.dtype == arr.dtype and back.shape == arr.shape
    np.testing.assert_array_equal(back, arr)


def _decoded(tables: dict) -> dict:
    return {k: [c.data for c in v] for k, v in decode_tvm_json(json.loads(
        encode_metadata(tables).replace("\\/", "/"))).items()}


def test_written_graph_reads_back_constants_and_tensors():
    got = _decoded({"ir.GenericConst": [("const", a) for a in ARRAYS],
                    "ffi.Tensor": [("tensor", ARRAYS[1])]})
    for a, b in zip(got["ir.GenericConst"] + got["ffi.Tensor"], ARRAYS + [ARRAYS[1]]):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype


# The forms of older TVMs: key -> graph holding ARRAYS[0].
FORMS = {
    "tvm-ffi 0.27 ir.GenericConst": ("ir.GenericConst", {"root_index": 3, "nodes": [
        {"type": "ffi.String", "data": "ir.GenericConst"}, {"type": "ffi.Tensor", "data": BLOB},
        {"type": "ir.GenericConst", "data": {"span": 4, "ty": 4, "value": 1}},
        {"type": "ffi.Map", "data": [0, 5]}, {"type": "None"}, {"type": "ffi.Array",
                                                               "data": [2]}]}),
    "early tvm-ffi relax.expr.Constant": ("relax.expr.Constant", {"root_index": 0, "nodes": [
        {"type": "Map", "data": [1, 2]}, {"type": "runtime.String", "data": "relax.expr.Constant"},
        {"type": "Array", "data": [3]},
        {"type": "relax.expr.Constant", "data": {"data": 4, "span": 5}},
        {"type": "runtime.NDArray", "data": {"b64": BLOB}}, {"type": "None"}]}),
    "legacy b64ndarrays": ("relax.expr.Constant", {"root": 1, "nodes": [
        {"type_key": ""}, {"type_key": "Map", "keys": ["relax.expr.Constant"], "data": [2]},
        {"type_key": "Array", "data": [3]},
        {"type_key": "relax.expr.Constant", "attrs": {"data": "0", "span": "0"}}],
        "b64ndarrays": [BLOB], "attrs": {"tvm_version": "0.17.dev0"}}),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_tvm_form_gives_the_real_weights(form):
    key, graph = FORMS[form]
    escaped = json.dumps(graph, indent=2).replace('"', '\\"')
    text = f'metadata = tvm.ir.load_json("""{escaped}""")\n' + \
        MODULE.replace("KEY", json.dumps(key))
    mod = relax.from_script(text)
    np.testing.assert_array_equal(mod["main"].body.blocks[0].bindings[0].value.args[1].data,
                                  ARRAYS[0])
    assert 'metadata["ir.GenericConst"][0]' in mod.script()


def test_unreadable_metadata_names_the_problem():
    graph = {"root_index": 0, "nodes": [{"type": "ffi.Map", "data": [1, 2]},
                                        {"type": "ffi.String", "data": "ir.GenericConst"},
                                        {"type": "ffi.Array", "data": [3]},
                                        {"type": "ffi.String", "data": "oops"}]}
    text = f'metadata = tvm.ir.load_json("""{json.dumps(graph)}""")\n' + \
        MODULE.replace("KEY", '"ir.GenericConst"')
    with pytest.raises(ParseError, match=r"metadata\['ir.GenericConst'\]\[0\] is a str") as err:
        relax.from_script(text)
    assert "show_meta=True" in str(err.value)
