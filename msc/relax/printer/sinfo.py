"""Struct info as TVMScript annotations: ``R.Tensor((n, 3), dtype="float32")``, ``R.Tuple``,
``R.Shape``, ``R.Callable``; and the symbolic dims a struct info mentions."""

from __future__ import annotations

from ...tir import expr as tir
from ..expr import Var
from ..struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from .text import format_str, prim_to_str

__all__ = ["sinfo_to_str", "sinfo_vars"]


def sinfo_to_str(sinfo: StructInfo, signature: bool = False) -> str:
    """``R.Tensor((n, 3), dtype="float32")`` etc. In a signature, compound dims print as
    strings (``"n * 3"``), as TVM 0.27 does."""
    printer = _SINFO_PRINTERS.get(type(sinfo))
    if printer is None:
        return f"R.Object  # {type(sinfo).__name__}"
    return printer(sinfo, signature)


def _dim(value, signature: bool) -> str:
    text = prim_to_str(value)
    if signature and not isinstance(value, (tir.IntImm, tir.Var)):
        return format_str(text)
    return text


def _dims(values, signature: bool) -> str:
    parts = [_dim(v, signature) for v in values]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _tensor_sinfo(s: TensorStructInfo, signature: bool) -> str:
    parts = []
    if s.values is not None:
        parts.append(_dims(s.values, signature))
    elif isinstance(s.shape, Var):
        parts.append(s.shape.name_hint)
    if s.dtype != "void":
        parts.append(f"dtype={format_str(s.dtype)}")
    if s.shape is None and s.ndim != -1:
        parts.append(f"ndim={s.ndim}")
    return f"R.Tensor({', '.join(parts)})" if parts else "R.Tensor"


def _tuple_sinfo(s: TupleStructInfo, signature: bool) -> str:
    if not s.fields:
        return "R.Tuple"
    return "R.Tuple(" + ", ".join(sinfo_to_str(f, signature) for f in s.fields) + ")"


def _shape_sinfo(s: ShapeStructInfo, signature: bool) -> str:
    if s.values is None:
        return f"R.Shape(ndim={s.ndim})"
    return "R.Shape([" + ", ".join(_dim(v, signature) for v in s.values) + "])"


def _func_sinfo(s: FuncStructInfo, signature: bool) -> str:
    if s.params is None:
        return "R.Callable"
    params = [sinfo_to_str(p, signature) for p in s.params]
    params_text = "(" + ", ".join(params) + ("," if len(params) == 1 else "") + ")"
    return f"R.Callable({params_text}, {sinfo_to_str(s.ret, signature)}, {s.purity})"


_SINFO_PRINTERS = {
    ObjectStructInfo: lambda s, sig: "R.Any",
    PrimStructInfo: lambda s, sig: f"T.{s.dtype}",
    TensorStructInfo: _tensor_sinfo,
    TupleStructInfo: _tuple_sinfo,
    ShapeStructInfo: _shape_sinfo,
    FuncStructInfo: _func_sinfo,
}


def sinfo_vars(sinfo: StructInfo | None, found: dict) -> None:
    """Collect the symbolic vars of a struct info (name -> tir.Var), in first-use order."""
    if isinstance(sinfo, (TensorStructInfo, ShapeStructInfo)):
        _prim_vars(sinfo.values or (), found)
    elif isinstance(sinfo, PrimStructInfo) and sinfo.value is not None:
        _prim_vars((sinfo.value,), found)
    elif isinstance(sinfo, TupleStructInfo):
        for f in sinfo.fields:
            sinfo_vars(f, found)
    elif isinstance(sinfo, FuncStructInfo):
        for p in sinfo.params or ():
            sinfo_vars(p, found)
        sinfo_vars(sinfo.ret, found)


def _prim_vars(values, found: dict) -> None:
    for value in values:
        for v in tir.free_vars(tir.convert(value)):
            found.setdefault(v.name, v)

