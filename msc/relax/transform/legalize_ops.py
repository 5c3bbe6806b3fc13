"""LegalizeOps: every op call that has a legalization rule becomes ``R.call_tir`` to a TIR
PrimFunc added to the module (TVM's ``relax.transform.LegalizeOps``); ``get_pipeline("zero")``.

    mod = LegalizeOps()(mod)
    mod.show()       # @T.prim_func(private=True, s_tir=True) def add(...) ... R.call_tir(cls.add, ...)

Rules are the op fact ``"legalize"`` (``msc/backend/legalize/``), or ``customize_legalize_map``
entries ``{"relax.add": fn(call) -> PrimFunc}``. Calls whose op has no rule, or whose shapes are
unknown, are left as they are. Identical prim funcs are added once; names follow TVM (``add``,
``add1``...).
"""

from __future__ import annotations

import dataclasses
import re

from ..expr import Call, Function, Tuple, TupleGetItem
from ..module import IRModule
from ..op.defs_special import call_tir
from ..op.registry import Op
from ..struct_info import TensorStructInfo, TupleStructInfo
from ..visitor import ExprMutator
from .base import ModulePass, PassContext, Sequential

__all__ = ["LegalizeOps", "get_pipeline"]


class LegalizeOps(ModulePass):
    """Lower op calls to ``R.call_tir`` of generated PrimFuncs."""

    opt_level = 0
    name = "LegalizeOps"

    def __init__(self, customize_legalize_map: dict | None = None, enable_warning: bool = False):
        super().__init__()
        self.custom = {k.removeprefix("relax."): v for k, v in
                       (customize_legalize_map or {}).items()}
        self.enable_warning = enable_warning

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        from ...backend.legalize import legalize_call

        out = mod.copy()
        table = _FuncTable(out)
        for gv, func in mod.functions.items():
            if isinstance(func, Function):
                new = _Legalizer(out, table, lambda c: legalize_call(c, self.custom),
                                 self.enable_warning).visit_expr(func)
                if new is not func:
                    out[gv] = new
        return out


class _FuncTable:
    """Adds prim funcs to the module once each, under TVM-style unique names."""

    def __init__(self, mod: IRModule):
        self.mod = mod
        self.by_text: dict = {}

    def add(self, func):
        key = _shape_key(func)
        gv = self.by_text.get(key)
        if gv is None:
            name = _unique(func.name, self.mod)
            gv = self.mod.add(name, dataclasses.replace(func, name=name))
            self.by_text[key] = gv
        return gv


def _shape_key(func) -> str:
    """The func's text with its params renamed by position: funcs that differ only in the
    names of the vars passed to them are one func (TVM's structural equality)."""
    text = func.script("f")
    names = sorted(((p.name, i) for i, p in enumerate(func.params)), key=lambda t: -len(t[0]))
    for name, i in names:
        text = re.sub(rf"\b{re.escape(name)}\b", f"\0p{i}", text)
    return text


def _unique(base: str, mod: IRModule) -> str:
    name, n = base, 0
    while name in mod:
        n += 1
        name = f"{base}{n}"
    return name


class _Legalizer(ExprMutator):
    def __init__(self, mod: IRModule, table: _FuncTable, legalize, warn: bool):
        super().__init__(mod)
        self.table = table
        self.legalize = legalize
        self.warn = warn

    def visit_call_(self, call: Call):
        call = self.visit_expr_post_order(call)
        if not isinstance(call, Call) or not isinstance(call.op, Op):
            return call
        func = self.legalize(call)
        if func is None:
            if self.warn and "legalize" not in call.op.op_def.facts:
                import warnings

                warnings.warn(f"LegalizeOps: no legalization for {call.op.name}", stacklevel=2)
            return call
        gv = self.table.add(func)
        return call_tir(gv, Tuple(_tensor_args(call)), out_sinfo=call.struct_info)


def _tensor_args(call: Call) -> list:
    """The call's tensor arguments, tuples flattened (the prim func's input params)."""
    args = []
    for arg in call.args:
        sinfo = arg.struct_info
        if isinstance(sinfo, TensorStructInfo):
            args.append(arg)
        elif isinstance(sinfo, TupleStructInfo):
            for i, field in enumerate(sinfo.fields):
                if isinstance(field, TensorStructInfo):
                    args.append(arg.fields[i] if isinstance(arg, Tuple) else TupleGetItem(arg, i))
    return args


def get_pipeline(name: str = "zero") -> Sequential:
    """TVM's named pass pipelines; ``"zero"`` legalizes every op and cleans up."""
    from .dead_code_elimination import DeadCodeElimination
    from .fold_constant import FoldConstant

    pipelines = {"zero": lambda: [LegalizeOps(), FoldConstant(), DeadCodeElimination()]}
    if name not in pipelines:
        from ...errors import ValidationError

        raise ValidationError(f"unknown pipeline {name!r}", hint=f"known: {sorted(pipelines)}")
    return Sequential(pipelines[name](), name=f"{name}_pipeline")
