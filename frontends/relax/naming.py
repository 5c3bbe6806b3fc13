"""Names of a function's values, as MSC's ``SetExprName`` gives them (msc-conventions 4.4).

A call is named after the last dotted segment of its op (``relax.nn.conv2d`` -> ``conv2d``),
made unique with ``_1``, ``_2``...; constants are ``const``, ``const_1``... in the order they
are met; a ShapeExpr (bound, or in the result) is ``shape``, a tuple ``tuple``, a tuple item ``<tuple>.<index>``.
Params keep their names. Names are given after fusion: a fused node is named after its
anchor call (``msc.conv2d_bias`` -> ``conv2d``) and the calls it absorbs use up no name::

    names = name_function(FunctionView(mod["main"]), mod, groups=fuse(view))
    names.of(conv_var), names.of(weight_const), names.blocks     # "conv2d", "const", ["block"]
"""

from __future__ import annotations

from dataclasses import dataclass, field

from msc.naming import UniqueNamer
from msc.relax.expr import (
    Call,
    Constant,
    Expr,
    ExternFunc,
    GlobalVar,
    ShapeExpr,
    Tuple,
    TupleGetItem,
    Var,
)
from msc.relax.op.registry import Op

from .optypes import VANISHING_OPS
from .walk import FunctionView, constants_in, op_name

__all__ = ["ExprNames", "UniqueNamer", "name_function"]

# Function attrs that name or type a composite function (MSC's ParseFunc).
UNIQUE_ATTR = "Unique"
FUSED_FALLBACK = "msc_fused"


@dataclass
class ExprNames:
    """Names keyed by Var (params and bound vars) and by Constant; block names by index."""

    values: dict = field(default_factory=dict)
    blocks: list = field(default_factory=list)

    def of(self, expr: Expr) -> str:
        return self.values.get(expr, "")

    def __contains__(self, expr) -> bool:
        return expr in self.values


def _call_hint(call: Call, mod, fused: list) -> str:
    op = call.op
    if isinstance(op, Op):
        if op.name == "relax.call_dps_packed" and isinstance(call.args[0], ExternFunc):
            return call.args[0].global_symbol
        return op.name.rsplit(".", 1)[-1]
    if isinstance(op, GlobalVar) and mod is not None and op in mod:
        unique = getattr(mod[op], "attrs", {}).get(UNIQUE_ATTR)
        if unique:
            return str(unique)
        fused.append(op)
        return f"{FUSED_FALLBACK}_{len(fused) - 1}"
    if isinstance(op, ExternFunc):
        return op.global_symbol
    return getattr(op, "name_hint", "call")


class _Namer:
    def __init__(self, view: FunctionView, mod, use_var_name: bool, groups):
        self.view, self.mod, self.use_var_name = view, mod, use_var_name
        self.groups = {g.root: g for g in groups}
        self.absorbed = {v for g in groups for v in g.members if v is not g.root}
        self.names = ExprNames()
        self.unique = UniqueNamer(p.name_hint for p in view.func.params)
        self.fused: list = []
        for p in view.func.params:
            self.names.values[p] = p.name_hint

    def name_constants(self, expr: Expr) -> None:
        for const in constants_in(expr):
            if const not in self.names:
                self.names.values[const] = self.unique("const")

    def name_binding(self, var: Var, value: Expr) -> None:
        if var in self.absorbed or self._vanishes(value):
            return
        group = self.groups.get(var)
        if group is not None:
            for arg in group.args:
                self.name_constants(arg)
            value = self.view.bound_value(group.anchor)
        else:
            self.name_constants(value)
        alias = self._alias(value)
        if alias is not None:
            self.names.values[var] = alias
            return
        hint = self._hint(value)
        if hint is not None:
            self.names.values[var] = self.unique(var.name_hint if self.use_var_name else hint)

    def name_result_shapes(self, result: Expr) -> None:
        """An unbound ShapeExpr in the function result (``return R.shape([...])``) becomes a
        ``shape`` node: name it ``shape`` like a bound one."""
        for leaf in result.fields if isinstance(result, Tuple) else (result,):
            if isinstance(leaf, ShapeExpr) and leaf not in self.names:
                self.names.values[leaf] = self.unique("shape")

    def _vanishes(self, value: Expr) -> bool:
        """Dropout and its items leave no node, so they take no name."""
        if isinstance(value, TupleGetItem):
            value = self.view.bound_value(self.view.value_of(value.tuple_value))
        return isinstance(value, Call) and op_name(value) in VANISHING_OPS

    def _alias(self, value: Expr) -> str | None:
        if isinstance(value, (Var, Constant)):
            return self.names.of(value)
        return None

    def _hint(self, value: Expr) -> str | None:
        if isinstance(value, Call):
            return _call_hint(value, self.mod, self.fused)
        if isinstance(value, TupleGetItem):
            return f"{self.names.of(value.tuple_value) or 'tuple'}.{value.index}"
        return _LEAF_HINTS.get(type(value))


_LEAF_HINTS = {Tuple: "tuple", ShapeExpr: "shape"}


def name_function(view: FunctionView, mod=None, use_var_name: bool = False,
                  groups=()) -> ExprNames:
    """Name the params, bindings, constants and binding blocks of ``view.func``; a fused
    group (``fusion.FusedGroup``) is named at its root binding after its anchor call.

    With ``use_var_name`` a bound value takes its Relax var's name instead of its op's.
    """
    namer = _Namer(view, mod, use_var_name, groups)
    blocks = UniqueNamer()
    namer.names.blocks = [blocks("block") for _ in view.blocks]
    for _, binding in view.bindings:
        namer.name_binding(binding.var, binding.value)
    namer.name_constants(view.result)
    namer.name_result_shapes(view.result)
    return namer.names
