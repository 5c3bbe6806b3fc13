"""The metadata section: constants too large to print inline, by value, after the module."""

from __future__ import annotations

import base64

import numpy as np

from .text import format_str

__all__ = ["METADATA_NOTE", "META_KEY", "metadata_section"]

META_KEY = "relax.expr.Constant"
METADATA_NOTE = "# Metadata omitted. Use show_meta=True in script() method to show it."


def metadata_section(constants: list) -> str:
    """``metadata = {...}``: each constant's dtype, shape and base64 of its little-endian C-order
    bytes. Parsed back by the parser; never executed."""
    lines = ["# Metadata: constant values (base64 of little-endian C-order bytes).",
             "metadata = {", f"    {format_str(META_KEY)}: ["]
    for c in constants:
        lines.append(f"        {_constant_entry(c.data)},")
    lines += ["    ],", "}"]
    return "\n".join(lines)


def _constant_entry(data: np.ndarray) -> str:
    arr = np.ascontiguousarray(data)
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    encoded = base64.b64encode(arr.tobytes()).decode("ascii")
    dtype = "bool" if arr.dtype == np.bool_ else arr.dtype.name
    return (f'{{"dtype": {format_str(dtype)}, "shape": {list(arr.shape)}, '
            f'"data": {format_str(encoded)}}}')
