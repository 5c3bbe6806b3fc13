"""ExpandTupleArguments: private functions take the fields of their tuple params instead.

    f(t: R.Tuple(A, B), y)   ->   f(t_0: A, t_1: B, y)      # callers: f(tup, y) -> f(a, b, y)

Only private functions (no ``global_symbol``) change: public signatures are an interface.
Nested tuples flatten recursively (``t_0_1``). Callers pass the fields of a tuple literal,
of a var bound to one, or ``tup[i]`` otherwise; afterwards unused bindings and functions are
removed (DeadCodeElimination), as TVM does.
"""

from __future__ import annotations

from ..expr import Call, Function, GlobalVar, Tuple, TupleGetItem, Var
from ..module import IRModule
from ..struct_info import TupleStructInfo
from ..visitor import ExprMutator
from .base import ModulePass, PassContext
from .dead_code_elimination import DeadCodeElimination

__all__ = ["ExpandTupleArguments"]


def _flatten_param(var: Var, name: str) -> tuple[list[Var], object]:
    """The flat params replacing ``var`` and the expression rebuilding its value."""
    sinfo = var.struct_info
    if not isinstance(sinfo, TupleStructInfo):
        new = var if name == var.name_hint else type(var)(name, sinfo)
        return [new], new
    flat, fields = [], []
    for i, field in enumerate(sinfo.fields):
        sub_flat, sub_value = _flatten_param(Var(f"{name}_{i}", field), f"{name}_{i}")
        flat += sub_flat
        fields.append(sub_value)
    return flat, Tuple(fields)


class _InlineParams(ExprMutator):
    """Uses of a tuple param become a Tuple of the new params; ``t[i]`` becomes the field
    and a binding that merely renames a new param is dropped."""

    def __init__(self, mod: IRModule, new_params: set):
        super().__init__(mod)
        self.new_params = new_params

    def visit_tuple_getitem_(self, item: TupleGetItem):
        item = self.visit_expr_post_order(item)
        inner = getattr(item, "tuple_value", None)
        return inner.fields[item.index] if isinstance(inner, Tuple) else item

    def visit_var_binding_(self, binding) -> None:
        value = self.visit_expr(binding.value)
        if isinstance(value, (Var, Tuple)) and _only_params(value, self.new_params):
            self.set_var_remap(binding.var, value)
            return
        self.reemit_binding(binding, value)


def _only_params(value, params: set) -> bool:
    if isinstance(value, Tuple):
        return all(_only_params(f, params) for f in value.fields)
    return value in params


def _expand_function(func: Function, mod: IRModule) -> Function:
    params, mutator_map = [], {}
    for p in func.params:
        flat, value = _flatten_param(p, p.name_hint)
        params += flat
        if value is not p:
            mutator_map[p] = value
    mutator = _InlineParams(mod, set(params))
    for old, value in mutator_map.items():
        mutator.set_var_remap(old, value)
    body = mutator.visit_with_new_scope(func.body)
    return Function(params, body, func.ret_struct_info, func.is_pure, func.attrs, func.span)


class _UpdateCallers(ExprMutator):
    """Callers of expanded functions pass the flattened fields."""

    def __init__(self, mod: IRModule, expanded: dict):
        super().__init__(mod)
        self.expanded = expanded  # name -> original Function

    def visit_call_(self, call: Call):
        call = self.visit_expr_post_order(call)
        op = getattr(call, "op", None)
        if not isinstance(op, GlobalVar) or op.name_hint not in self.expanded:
            return call
        args = []
        for arg, param in zip(call.args, self.expanded[op.name_hint].params):
            args += self._flatten_arg(arg, param.struct_info)
        new = Call(op, args, call.attrs, call.sinfo_args, call.span)
        new._set_struct_info(call.struct_info)
        return new

    def _flatten_arg(self, arg, sinfo) -> list:
        if not isinstance(sinfo, TupleStructInfo):
            return [arg]
        bound = self.lookup_binding(arg) if isinstance(arg, Var) else None
        source = arg if isinstance(arg, Tuple) else bound
        out = []
        for i, field in enumerate(sinfo.fields):
            item = source.fields[i] if isinstance(source, Tuple) else TupleGetItem(arg, i)
            out += self._flatten_arg(item, field)
        return out


def _private_with_tuple_params(mod: IRModule) -> dict:
    return {gv.name_hint: f for gv, f in mod.functions.items()
            if isinstance(f, Function) and "global_symbol" not in f.attrs
            and any(isinstance(p.struct_info, TupleStructInfo) for p in f.params)}


class ExpandTupleArguments(ModulePass):
    """Flatten the tuple parameters of private functions (TVM's pass of the same name)."""

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        expanded = _private_with_tuple_params(mod)
        if not expanded:
            return mod
        out = mod.copy()
        for name, func in expanded.items():
            out[name] = _expand_function(func, mod)
        for gv, func in list(out.functions.items()):
            if isinstance(func, Function):
                out[gv] = _UpdateCallers(out, expanded).visit_expr(func)
        return DeadCodeElimination()(out)
