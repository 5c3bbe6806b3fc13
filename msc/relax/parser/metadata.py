"""The metadata section: values referenced as ``metadata["ir.GenericConst"][i]`` (constants
in expressions), ``metadata["ffi.Tensor"][i]`` (tensors in attributes, e.g. ``"params"``) or
older keys such as ``metadata["relax.expr.Constant"][i]``.

Two forms are read, both without executing anything:

* msc's, a literal ``metadata = {"relax.expr.Constant": [{"dtype": "float32", "shape": [2],
  "data": "<base64 of little-endian C-order bytes>"}, ...]}``;
* TVM's, ``metadata = tvm.ir.load_json(\"\"\"{...}\"\"\")``: the JSON object graph in every
  form TVM wrote (tvm-ffi's ``ffi.Tensor`` / ``ir.GenericConst`` of TVM 0.27, early tvm-ffi's
  ``relax.expr.Constant`` / ``runtime.NDArray``, the legacy ``type_key`` graph with
  ``b64ndarrays``), read by msc/relax/tvm_json.py.
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
from ..tvm_json import Constant as JsonConstant
from ..tvm_json import decode_blob, decode_graph


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
            raise ctx.error(node, f"cannot read TVM metadata: {err}",
                            hint="the section should be what TVM's mod.script(show_meta=True) "
                                 "printed; or drop it and pass metadata={key: [arrays]} to "
                                 "from_script") from None
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
# TVM's JSON object graph (msc/relax/tvm_json.py reads every form TVM wrote).

def decode_tvm_json(graph: dict) -> dict:
    """A TVM ``save_json`` graph of ``{key: [constant or tensor, ...]}`` ->
    {key: [Constant, ...]}."""
    table = decode_graph(graph)
    if not isinstance(table, dict):
        raise TypeError(f"the root is a {type(table).__name__}, not a map of key -> list")
    out = {}
    for key, values in table.items():
        if not isinstance(values, list):
            raise TypeError(f"metadata[{key!r}] is a {type(values).__name__}, not a list")
        out[str(key)] = [_as_constant(key, i, v) for i, v in enumerate(values)]
    return out


def _as_constant(key, index: int, value) -> Constant:
    if isinstance(value, JsonConstant):
        return Constant(value.data)
    if isinstance(value, np.ndarray):
        return Constant(value)
    raise ValueError(f"metadata[{key!r}][{index}] is a {type(value).__name__}, not a tensor "
                     "or constant")


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
