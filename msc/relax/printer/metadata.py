"""The metadata section: values too large to print inline, numbered where they are used, as
TVM 0.27 does::

    metadata["ir.GenericConst"][i]   # a tensor constant in an expression
    metadata["ffi.Tensor"][i]        # a tensor in an attribute (R.func_attr({"params": [...]}))

``show_meta=True`` writes ``metadata = tvm.ir.load_json(\"\"\"...\"\"\")`` above the header in
tvm-ffi's JSON (msc/relax/tvm_json.py), which TVM 0.27's parser and msc's both read;
otherwise the module ends with TVM's "Metadata omitted" note.
"""

from __future__ import annotations

import numpy as np

from ..tvm_json import encode_metadata
from .text import format_str

__all__ = [
    "CONST_KEY",
    "METADATA_NOTE",
    "META_KEY",
    "TENSOR_KEY",
    "MetaTables",
    "metadata_section",
]

CONST_KEY = "ir.GenericConst"
TENSOR_KEY = "ffi.Tensor"
META_KEY = CONST_KEY
METADATA_NOTE = "# Metadata omitted. Use show_meta=True in script() method to show it."
# How each key's entries are written in TVM's graph.
_ENTRY_KIND = {CONST_KEY: "const", TENSOR_KEY: "tensor"}


class MetaTables:
    """The module's metadata tables, each numbered in printing order; a value used twice
    (the same object) keeps its first index."""

    def __init__(self):
        self.tables: dict[str, list] = {}
        self._index: dict[tuple, int] = {}  # (key, id(value)) -> index: no scan per use

    def ref(self, key: str, value) -> str:
        table = self.tables.setdefault(key, [])
        index = self._index.get((key, id(value)))
        if index is None:
            table.append(value)  # the table keeps the value alive, so its id stays its own
            index = self._index[(key, id(value))] = len(table) - 1
        return f"metadata[{format_str(key)}][{index}]"

    def __bool__(self) -> bool:
        return any(self.tables.values())


def metadata_section(meta: MetaTables) -> str:
    """``metadata = tvm.ir.load_json(\"\"\"...\"\"\")`` as TVM 0.27 prints it (quotes escaped)."""
    tables = {key: [(_ENTRY_KIND.get(key, "const"), _array(v)) for v in values]
              for key, values in meta.tables.items() if values}
    text = encode_metadata(tables).replace("\\", "\\\\").replace('"', '\\"')
    return f'metadata = tvm.ir.load_json("""{text}""")'


def _array(value) -> np.ndarray:
    data = getattr(value, "data", value)
    return np.asarray(data)
