"""Whole IRModules as TVM 0.27 TVMScript: ``@I.ir_module class Module:`` with its Relax
functions, TIR prim funcs (through msc.tir.printer) and externs, and the type vars and
metadata section they need::

    text = module_to_script(mod)                  # what mod.script() returns
    text = module_to_script(mod, show_meta=True)  # + the constants' values
"""

from __future__ import annotations

from ...tir.printer import prim_func_to_script
from ..expr import ExternFunc, Function
from .exprs import FunctionPrinter, literal
from .metadata import METADATA_NOTE, MetaTables, metadata_section
from .text import INDENT, script_header

__all__ = ["module_to_script"]

_TIR_PRIORITY, _EXTERN_PRIORITY, _RELAX_PRIORITY, _MAIN_PRIORITY = 1, 2, 3, 1000


def _func_order(item) -> tuple:
    """TVM's order: TIR functions, externs, Relax functions, by name; ``main`` last."""
    gv, func = item
    if gv.name_hint == "main":
        return (_MAIN_PRIORITY, gv.name_hint)
    if isinstance(func, Function):
        return (_RELAX_PRIORITY, gv.name_hint)
    if isinstance(func, ExternFunc):
        return (_EXTERN_PRIORITY, gv.name_hint)
    return (_TIR_PRIORITY, gv.name_hint)


def module_to_script(mod, show_meta: bool = False, **_kwargs) -> str:
    """An IRModule as TVM 0.27 TVMScript. ``show_meta`` writes the metadata's values above
    it (TVM's ``metadata = tvm.ir.load_json(...)``); without it, a note ends the text."""
    meta = MetaTables()
    type_vars: dict = {}
    blocks = []
    for gv, func in sorted(mod.functions.items(), key=_func_order):
        blocks.append(_print_func(func, gv.name_hint, meta, type_vars))
    body = "\n\n".join(blocks)
    if mod.attrs:
        body = f"{INDENT}I.module_attrs({literal(mod.attrs, meta)})\n" + body
    lines = script_header(body, bool(type_vars))
    lines += [f'{name} = TypeVar("{name}")' for name in sorted(type_vars)]
    text = "\n".join(lines + ["@I.ir_module", "class Module:", body])
    if meta and show_meta:
        return metadata_section(meta) + "\n" + text
    return text + "\n\n" + METADATA_NOTE if meta else text


def _print_func(func, name: str, meta: MetaTables, type_vars: dict) -> str:
    if isinstance(func, Function):
        printer = FunctionPrinter(func, name, meta)
        for var_name, var in printer.signature_vars().items():
            if var.dtype == "int64":
                type_vars.setdefault(var_name, var)
        return "\n".join(printer.print())
    for var in getattr(func, "module_vars", list)():
        type_vars.setdefault(var.name, var)
    return _prim_func_text(func, name)


def _prim_func_text(func, name: str) -> str:
    return prim_func_to_script(func, name, len(INDENT)).rstrip("\n")
