"""The metadata section: constant values referenced as ``metadata["relax.expr.Constant"][i]``.

Two forms are read, both without executing anything:

* msc's, a literal ``metadata = {"relax.expr.Constant": [{"dtype": "float32", "shape": [2],
  "data": "<base64 of little-endian C-order bytes>"}, ...]}``;
* TVM's, ``metadata = tvm.ir.load_json(\"\"\"{...}\"\"\")``: the JSON object graph (the legacy
  ``type_key``/``b64ndarrays`` graph and the ``type``/``data`` graph of tvm-ffi), whose
  tensors are base64 DLTensor blobs.
"""

from __future__ import annotations

import ast
import base64
import binascii
import json
import struct

import numpy as np

from ...errors import ParseError
from ..expr import Constant

_BLOB_MAGIC = 0xDD5E40F096B4A13F
# DLPack dtype codes -> numpy kinds.
_DL_CODES = {0: "int", 1: "uint", 2: "float", 4: "bfloat"}


def parse_metadata(ctx, node) -> dict:
    """``metadata = ...`` right-hand side -> {key: [Constant, ...]}."""
    if isinstance(node, ast.Dict):
        return _from_literal(ctx, literal(ctx, node), node)
    if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("load_json") and \
            len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and \
            isinstance(node.args[0].value, str):
        try:
            return decode_tvm_json(json.loads(node.args[0].value))
        except (ValueError, KeyError, IndexError, TypeError, struct.error,
                binascii.Error) as err:
            raise ctx.error(node, f"cannot read TVM metadata: {err}") from None
    raise ctx.error(node, "metadata must be a literal dict or tvm.ir.load_json(\"\"\"...\"\"\")")


def literal(ctx, node):
    """A Python literal from the ast (dict, list, tuple, str, number, bool, None)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [literal(ctx, e) for e in node.elts]
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {literal(ctx, k): literal(ctx, v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and \
            isinstance(node.operand, ast.Constant):
        return -node.operand.value
    raise ctx.error(node, "only literals are allowed here")


def _from_literal(ctx, table, node) -> dict:
    out = {}
    for key, entries in table.items():
        if not isinstance(entries, list):
            raise ctx.error(node, f"metadata[{key!r}] must be a list")
        out[key] = [_entry(ctx, e, node) for e in entries]
    return out


def _entry(ctx, entry, node) -> Constant:
    try:
        dtype = np.dtype(entry["dtype"])
        raw = base64.b64decode(entry["data"], validate=True)
        data = np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype)
        return Constant(data.reshape(entry["shape"]))
    except (KeyError, TypeError, ValueError, binascii.Error) as err:
        raise ctx.error(node, f"invalid metadata entry: {err}",
                        hint='entries are {"dtype": ..., "shape": [...], "data": base64}') \
            from None


# --------------------------------------------------------------------------------------------
# TVM's JSON object graph.

def decode_tvm_json(graph: dict) -> dict:
    """A TVM ``save_json`` graph of ``{key: [Constant, ...]}`` -> {key: [Constant, ...]}."""
    nodes = graph["nodes"]
    root = graph.get("root", graph.get("root_index"))
    arrays = graph.get("b64ndarrays", [])
    out = {}
    for key, value in _map_items(nodes, nodes[root]):
        out[key] = [_tvm_constant(nodes, arrays, nodes[i]) for i in _array_items(nodes[value])]
    return out


def _kind(node: dict) -> str:
    return node.get("type_key", node.get("type", ""))


def _map_items(nodes, node):
    if "keys" in node:  # legacy: string keys, value indices in data
        return list(zip(node["keys"], node["data"]))
    data = node["data"]
    return [(_string(nodes[data[i]]), data[i + 1]) for i in range(0, len(data), 2)]


def _string(node) -> str:
    value = node.get("data", node.get("repr_str"))
    return value if isinstance(value, str) else str(value)


def _array_items(node) -> list:
    return [int(i) for i in node["data"]]


def _tvm_constant(nodes, arrays, node) -> Constant:
    fields = node.get("attrs") or node.get("data") or {}
    ref = fields["data"]
    if "attrs" in node:  # legacy: index into b64ndarrays
        return Constant(decode_blob(base64.b64decode(arrays[int(ref)])))
    tensor = nodes[int(ref)]
    payload = tensor.get("data")
    if isinstance(payload, dict):
        payload = payload.get("data", payload.get("b64"))
    return Constant(decode_blob(base64.b64decode(payload)))


def decode_blob(blob: bytes) -> np.ndarray:
    """A serialized DLTensor (TVM's NDArray save format) -> numpy array."""
    magic, _reserved, _dev_type, _dev_id, ndim = struct.unpack_from("<QQiii", blob, 0)
    if magic != _BLOB_MAGIC:
        raise ValueError("not a TVM tensor blob")
    code, bits, lanes = struct.unpack_from("<BBH", blob, 28)
    offset = 32
    shape = struct.unpack_from(f"<{ndim}q", blob, offset)
    offset += 8 * ndim
    (nbytes,) = struct.unpack_from("<q", blob, offset)
    offset += 8
    dtype = _numpy_dtype(code, bits, lanes)
    data = np.frombuffer(blob[offset:offset + nbytes], dtype=dtype.newbyteorder("<"))
    return data.astype(dtype).reshape(shape)


def _numpy_dtype(code: int, bits: int, lanes: int) -> np.dtype:
    if lanes != 1:
        raise ValueError(f"vector dtypes (lanes={lanes}) are not supported")
    if code == 1 and bits == 1:
        return np.dtype(np.bool_)
    kind = _DL_CODES.get(code)
    if kind is None or kind == "bfloat":
        raise ValueError(f"unsupported tensor dtype code {code} ({bits} bits)")
    return np.dtype(f"{kind}{bits}")


def normalize_metadata(metadata) -> dict | None:
    """User-supplied metadata ({key: [arrays or Constants]}) -> {key: [Constant]}."""
    if metadata is None:
        return None
    out = {}
    for key, values in metadata.items():
        out[key] = [v if isinstance(v, Constant) else Constant(np.asarray(v)) for v in values]
    return out


__all__ = [
    "ParseError",
    "decode_blob",
    "decode_tvm_json",
    "normalize_metadata",
    "parse_metadata",
]
