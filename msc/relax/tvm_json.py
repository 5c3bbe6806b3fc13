"""TVM's JSON object graphs (``tvm.ir.save_json`` / ``tvm.ir.load_json``) for metadata sections,
read and written without TVM.

Read: every form TVM has written for a ``{key: [constant or tensor, ...]}`` map:

* tvm-ffi (TVM 0.27): nodes ``{"type": "ffi.Map" | "ffi.Array" | "ffi.String" | "ffi.Tensor" |
  "ir.GenericConst" | ..., "data": ...}``, a tensor's data the base64 of its DLTensor blob,
  a constant's fields ``{"span", "ty", "value"}``;
* early tvm-ffi: ``relax.expr.Constant`` with a ``data`` field, ``runtime.NDArray`` tensors;
* legacy: ``{"type_key": ..., "attrs": {...}}`` nodes with tensors in ``b64ndarrays``.

Write: the tvm-ffi form TVM 0.27 loads, in its serializer's order (children before
parents, map keys before values)::

    graph = decode_graph(json.loads(text))        # {"ir.GenericConst": [ndarray, ...]}
    text = encode_metadata({"ffi.Tensor": [a, b]})
"""

from __future__ import annotations

import base64
import json
import struct

import numpy as np

__all__ = ["CONSTANT_TYPES", "decode_blob", "decode_graph", "encode_blob", "encode_metadata"]

_BLOB_MAGIC = 0xDD5E40F096B4A13F
_TVM_VERSION = "0.27.0"
# DLPack dtype codes -> numpy kinds (6 is DLPack's bool; TVM once wrote bool as uint1).
_DL_CODES = {0: "int", 1: "uint", 2: "float", 6: "bool"}
_NP_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}
CONSTANT_TYPES = ("ir.GenericConst", "relax.expr.Constant", "relax.Constant")
_TENSOR_TYPES = ("ffi.Tensor", "runtime.Tensor", "runtime.NDArray", "ffi.NDArray")
_STRING_TYPES = ("ffi.String", "str", "runtime.String", "String")
_ARRAY_TYPES = ("ffi.Array", "ffi.List", "Array", "array")
_MAP_TYPES = ("ffi.Map", "ffi.Dict", "Map", "map")
_SCALAR_TYPES = ("int", "float", "bool", "DataType")


class Constant:
    """A decoded constant node: its tensor (kept apart from tensors, which TVM keeps in
    attributes and prints under their own key)."""

    __slots__ = ("data",)

    def __init__(self, data: np.ndarray):
        self.data = data


# --------------------------------------------------------------------------------------------
# Reading.

def decode_graph(graph: dict):
    """A save_json graph -> Python values: dict, list, str, numbers, numpy arrays (tensors),
    :class:`Constant` (constant nodes). Raises ValueError/KeyError/TypeError on bad input."""
    if not isinstance(graph, dict) or "nodes" not in graph:
        raise ValueError("not a TVM JSON graph (no 'nodes')")
    reader = _Reader(graph)
    return reader.value(int(graph.get("root_index", graph.get("root", 0))))


class _Reader:
    def __init__(self, graph: dict):
        self.nodes = graph["nodes"]
        self.arrays = graph.get("b64ndarrays", [])
        self.memo: dict = {}

    def value(self, index: int):
        if not 0 <= index < len(self.nodes):
            raise ValueError(f"node index {index} out of range (0..{len(self.nodes) - 1})")
        if index not in self.memo:
            node = self.nodes[index]
            self.memo[index] = self._legacy(node) if "type_key" in node else self._ffi(node)
        return self.memo[index]

    def _ffi(self, node: dict):
        kind, data = node["type"], node.get("data")
        if kind == "None":
            return None
        if kind in _STRING_TYPES or kind in _SCALAR_TYPES:
            return data
        if kind in _ARRAY_TYPES:
            return [self.value(int(i)) for i in data]
        if kind in _MAP_TYPES:
            return {self.value(int(data[i])): self.value(int(data[i + 1]))
                    for i in range(0, len(data), 2)}
        if kind in _TENSOR_TYPES:
            payload = data.get("data", data.get("b64")) if isinstance(data, dict) else data
            return decode_blob(base64.b64decode(payload))
        if kind in CONSTANT_TYPES:
            ref = data["value"] if "value" in data else data["data"]
            return Constant(_tensor(self.value(int(ref)), kind))
        return {"type": kind, "fields": data}  # other objects: not needed for metadata

    def _legacy(self, node: dict):
        kind, attrs = node["type_key"], node.get("attrs", {})
        if kind == "":
            return None
        if kind in _STRING_TYPES:
            return node.get("repr_str", attrs.get("data"))
        if kind in _ARRAY_TYPES:
            return [self.value(int(i)) for i in node["data"]]
        if kind in _MAP_TYPES:
            if "keys" in node:
                return {k: self.value(int(v)) for k, v in zip(node["keys"], node["data"])}
            data = node["data"]
            return {self.value(int(data[i])): self.value(int(data[i + 1]))
                    for i in range(0, len(data), 2)}
        if kind in CONSTANT_TYPES:
            return Constant(decode_blob(base64.b64decode(self.arrays[int(attrs["data"])])))
        return {"type": kind, "fields": attrs}


def _tensor(value, kind: str) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{kind} holds a {type(value).__name__}, not a tensor")
    return value


def decode_blob(blob: bytes) -> np.ndarray:
    """A serialized DLTensor (TVM's tensor save format) -> numpy array."""
    magic, _reserved, _dev_type, _dev_id, ndim = struct.unpack_from("<QQiii", blob, 0)
    if magic != _BLOB_MAGIC:
        raise ValueError("not a TVM tensor blob (bad magic number)")
    code, bits, lanes = struct.unpack_from("<BBH", blob, 28)
    offset = 32
    shape = struct.unpack_from(f"<{ndim}q", blob, offset)
    offset += 8 * ndim
    (nbytes,) = struct.unpack_from("<q", blob, offset)
    offset += 8
    dtype = _numpy_dtype(code, bits, lanes)
    if len(blob) < offset + nbytes:
        raise ValueError(f"tensor blob holds {len(blob) - offset} bytes, needs {nbytes}")
    data = np.frombuffer(blob[offset:offset + nbytes], dtype=dtype.newbyteorder("<"))
    return data.astype(dtype).reshape(shape)


def _numpy_dtype(code: int, bits: int, lanes: int) -> np.dtype:
    if lanes != 1:
        raise ValueError(f"vector dtypes (lanes={lanes}) are not supported")
    if (code, bits) in ((1, 1), (6, 8)):
        return np.dtype(np.bool_)
    kind = _DL_CODES.get(code)
    if kind is None or kind == "bool":
        raise ValueError(f"unsupported tensor dtype code {code} ({bits} bits)")
    return np.dtype(f"{kind}{bits}")


# --------------------------------------------------------------------------------------------
# Writing.

def encode_blob(arr: np.ndarray) -> bytes:
    """numpy array -> TVM's DLTensor blob (CPU device, little-endian)."""
    arr = np.asarray(arr, order="C")  # (ascontiguousarray makes 0-d arrays 1-d)
    if arr.dtype.kind not in _NP_CODES:
        raise ValueError(f"cannot write a {arr.dtype} tensor in TVM's format")
    code = _NP_CODES[arr.dtype.kind]
    bits = 8 if code == 6 else arr.dtype.itemsize * 8
    raw = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
    head = struct.pack("<QQiiiBBH", _BLOB_MAGIC, 0, 1, 0, arr.ndim, code, bits, 1)
    return head + struct.pack(f"<{arr.ndim}q", *arr.shape) + struct.pack("<q", len(raw)) + raw


class _Writer:
    """Appends nodes children-first, sharing None, strings and ints as TVM's serializer does."""

    def __init__(self):
        self.nodes: list = []
        self.memo: dict = {}

    def add(self, node: dict, key=None) -> int:
        if key is not None and key in self.memo:
            return self.memo[key]
        self.nodes.append(node)
        if key is not None:
            self.memo[key] = len(self.nodes) - 1
        return len(self.nodes) - 1

    def none(self) -> int:
        return self.add({"type": "None"}, ("None",))

    def string(self, s: str) -> int:
        return self.add({"type": "ffi.String", "data": s}, ("str", s))

    def int(self, v: int) -> int:
        return self.add({"type": "int", "data": int(v)}, ("int", int(v)))

    def tensor(self, arr: np.ndarray) -> int:
        return self.add({"type": "ffi.Tensor",
                         "data": base64.b64encode(encode_blob(arr)).decode("ascii")})

    def prim_type(self, dtype: str) -> int:
        return self.add({"type": "ir.PrimType", "data": {"span": self.none(), "dtype": dtype}})

    def constant(self, arr: np.ndarray) -> int:
        """An ``ir.GenericConst`` whose ``ty`` is the tensor type of ``arr``."""
        span = self.none()
        dims = [self.add({"type": "ir.IntImm", "data": {
            "span": span, "ty": self.prim_type("int64"), "value": self.int(d)}})
            for d in arr.shape]
        values = self.add({"type": "ffi.Array", "data": dims})
        shape_ty = self.add({"type": "relax.ShapeType", "data": {
            "span": span, "values": values, "ndim": arr.ndim}})
        shape = self.add({"type": "relax.expr.ShapeExpr", "data": {
            "span": span, "ty": shape_ty, "values": values}})
        dtype = "bool" if arr.dtype == np.bool_ else arr.dtype.name
        ty = self.add({"type": "relax.TensorType", "data": {
            "span": span, "shape": shape, "dtype": self.prim_type(dtype), "vdevice": span,
            "ndim": arr.ndim}})
        return self.add({"type": "ir.GenericConst", "data": {
            "span": span, "ty": ty, "value": self.tensor(arr)}})


def encode_metadata(tables: dict) -> str:
    """{key: [(kind, array)]} -> the JSON text of TVM's graph (2-space indent, as TVM prints
    it); kind "const" writes an ``ir.GenericConst``, "tensor" an ``ffi.Tensor``."""
    writer = _Writer()
    pairs = []
    for key, entries in tables.items():
        k = writer.string(key)
        items = [writer.constant(a) if kind == "const" else writer.tensor(a)
                 for kind, a in entries]
        pairs += [k, writer.add({"type": "ffi.Array", "data": items})]
    root = writer.add({"type": "ffi.Map", "data": pairs})
    graph = {"root_index": root, "nodes": writer.nodes,
             "metadata": {"tvm_version": _TVM_VERSION}}
    # TVM's JSON writer escapes "/" (base64 has it); "/" occurs only inside strings here.
    return json.dumps(graph, indent=2).replace("/", "\\/")
