"""Scalar text shared by every part of the printer: floats, strings, PrimExprs, the script
header. TVM 0.27's spellings throughout."""

from __future__ import annotations

import json
import math
import re

from ...tir import expr as tir

__all__ = ["INDENT", "format_float", "format_str", "prim_to_str", "script_header"]

INDENT = "    "


def format_float(value: float) -> str:
    """TVM's float text: integral values as ``6.0``, others with 17 significant digits."""
    value = float(value)
    if not math.isfinite(value):
        return format_str(str(value))
    if value.is_integer():
        return f"{value:.1f}"
    return f"{value:.17g}"


def format_str(value: str) -> str:
    return json.dumps(value)


def prim_to_str(e: tir.PrimExpr) -> str:
    """A PrimExpr in Relax context: int64 ints bare, other typed immediates as ``T.f32(v)``."""
    if isinstance(e, tir.IntImm) and e.dtype not in ("int64", "bool"):
        return f"T.{e.dtype}({e.value})"
    if isinstance(e, tir.FloatImm):
        return f"T.{e.dtype}({format_float(e.value)})"
    return tir.to_str(e)


def script_header(body: str, has_type_vars: bool, module: bool = True) -> list[str]:
    """The commented imports TVM prints above a script (T's only when ``body`` uses it)."""
    lines = ["# from typing import TypeVar"] if has_type_vars else []
    if module:
        lines.append("# from tvm.script import ir as I")
    if re.search(r"\bT\.", body):
        lines += ["# from tvm.script import tirx as T", "# from tvm.tirx.layout import Axis"]
    return lines + ["# from tvm.script import relax as R", ""]
