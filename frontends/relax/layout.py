"""Layout inference for Relax functions: MSC's ``SetExprLayout`` pass.

``infer_layouts`` gives every value of a function its layout string (``"NCHW"``, ``"OIHW"``,
``"AB"``…; ``""`` when unknown) so the graph builder can attach it to tensors::

    layouts = infer_layouts(mod["main"], mod=mod)
    layouts[param]          # "NCHW" for the input of a conv2d
    layouts[bn_var]         # ("NCHW", "O", "O") for a tuple value

The pass follows MSC (msc-conventions 3): a forward visit in binding order, where each call
uses MSC's rule for its op, else Relax's own rule (output only), else the common rule; then a
backward sweep in reverse order fills unknown *inputs* from outputs. The rules live in
``layout_rules.py``. Like MSC, a layout is written only when it is known: a tuple value keeps
``""`` in every field unless all of its fields are known.

Where MSC had a plain bug msc does the right thing: a TupleGetItem reads the field it asks for
(MSC read field 0), squeeze drops the symbolic dims Relax drops, and matmul/permute rules that
would index past a layout give up instead.
"""

from __future__ import annotations

from msc.errors import ValidationError
from msc.relax.expr import (
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    If,
    SeqExpr,
    ShapeExpr,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
)
from msc.relax.op.registry import Op
from msc.relax.struct_info import ShapeStructInfo, TensorStructInfo, TupleStructInfo

from .layout_rules import Inferred, common_backward, common_forward, rule_for
from .layout_strings import RuleFailed, initial_layout

__all__ = ["infer_layouts"]


def infer_layouts(func: Function, allow_missing: bool = True, mod=None) -> dict:
    """Layouts of ``func``'s params, bound vars and call-argument constants.

    Returns a dict keyed by the Var / Constant objects. A tensor or shape value maps to a
    string, ``""`` when unknown; a tuple value maps to a tuple of per-field strings. ``mod``
    resolves calls to other functions (fused composites): their params and vars are included.
    With ``allow_missing=False`` a ValidationError lists every call and constant left without
    a layout.

        >>> layouts = infer_layouts(mod["main"])
        >>> layouts[mod["main"].params[0]]
        'NCHW'
    """
    state = _LayoutState(mod)
    state.visit_function(func)
    state.backward()
    if not allow_missing:
        _check_complete(state, func)
    return state.result()


# --------------------------------------------------------------------------------------------
# Layout storage. MSC keeps two things: a var -> layout map (which may hold an unknown or a
# partial layout) and the layout written on each expression (only when fully known).

def _sinfo_kind(expr: Expr) -> str:
    sinfo = expr.struct_info
    if isinstance(sinfo, (TensorStructInfo, ShapeStructInfo)):
        return "leaf"
    return "tuple" if isinstance(sinfo, TupleStructInfo) else "other"


def _written(expr: Expr, layout):
    """The layout MSC would write on ``expr`` (SetLayout), or None when it writes nothing."""
    kind = _sinfo_kind(expr)
    if kind == "leaf" and isinstance(layout, str) and layout:
        return layout
    if kind == "tuple" and isinstance(layout, tuple) and all(
            isinstance(f, str) and f for f in layout):
        return layout
    return None


class _LayoutState:
    def __init__(self, mod):
        self.mod = mod
        self.var_layouts: dict = {}     # Var -> layout (MSC's var_layout_map)
        self.written: dict = {}         # id(expr) -> (expr, layout) (MSC's span attr)
        self.records: list = []         # (var, value) in binding order
        self.local_funcs: dict = {}     # Var -> Function bound in a visited function
        self.params: list = []
        self.bound: list = []           # every bound var, in binding order
        self.constants: dict = {}       # id -> Constant used as a call argument

    # ---- reading --------------------------------------------------------------------------
    def written_layout(self, expr: Expr):
        entry = self.written.get(id(expr))
        return entry[1] if entry is not None else ""

    def nlayout(self, expr: Expr):
        """MSC's InferNLayout: the var map first, else what is written on the expression."""
        if isinstance(expr, Var) and expr in self.var_layouts:
            return self.var_layouts[expr]
        return self.written_layout(expr)

    def is_inferred(self, expr: Expr) -> bool:
        if isinstance(expr, Tuple):
            return all(self.is_inferred(f) for f in expr.fields)
        return id(expr) in self.written

    # ---- writing --------------------------------------------------------------------------
    def set_layout(self, expr: Expr, layout) -> None:
        """MSC's SetExprLayout: vars always enter the map; known layouts are written."""
        if isinstance(expr, Var):
            self.var_layouts[expr] = layout
        value = _written(expr, layout)
        if value is not None:
            self.written[id(expr)] = (expr, value)

    def set_inputs(self, call: Call, layouts) -> None:
        if layouts is not None and len(layouts) == len(call.args):
            for arg, layout in zip(call.args, layouts):
                self.set_layout(arg, layout)

    # ---- forward --------------------------------------------------------------------------
    def visit_function(self, func: Function) -> None:
        self.params.extend(func.params)
        self.visit_expr(func.body)

    def visit_expr(self, expr: Expr) -> None:
        if isinstance(expr, SeqExpr):
            for block in expr.blocks:
                for binding in block.bindings:
                    self.visit_binding(binding)
        elif isinstance(expr, If):
            self.visit_expr(expr.true_branch)
            self.visit_expr(expr.false_branch)

    def visit_binding(self, binding) -> None:
        var, value = binding.var, binding.value
        self.bound.append(var)
        if not isinstance(binding, VarBinding):
            return
        handler = _BINDING_HANDLERS.get(type(value))
        if isinstance(value, Function):
            self.local_funcs[var] = value
        elif handler is not None:
            self.records.append((var, value))
            handler(self, var, value)
        else:
            self.visit_expr(value)

    def visit_call(self, var: Var, call: Call) -> None:
        self._note_constants(call)
        callee = self._callee(call)
        if callee is not None:
            self._forward_func(callee, call, var)
        elif isinstance(call.op, Op) and call.args and id(var) not in self.written \
                and not _has_unknown_rank(call.args):
            self._forward_call(var, call)

    def _forward_call(self, var: Var, call: Call) -> None:
        rule = rule_for(call.op.op_def)
        view = _CallView(self, call, var)
        inferred, set_inputs = None, True
        if rule.forward is not None:
            inferred = _attempt(rule.forward, view)
        elif rule.relax is None:
            inferred = _attempt(common_forward, view)
        if inferred is None and rule.relax is not None:
            output = _attempt(rule.relax, view)
            inferred = None if output is None else Inferred((), output)
            set_inputs = False
        if inferred is not None:
            self.set_layout(var, inferred.output)
            if set_inputs:
                self.set_inputs(call, inferred.inputs)

    def visit_tuple(self, var: Var, value: Tuple) -> None:
        if _is_nested_tensor(var.struct_info):
            self.set_layout(var, tuple(self.nlayout(f) for f in value.fields))

    def visit_get_item(self, var: Var, value: TupleGetItem) -> None:
        layout = self.nlayout(value.tuple_value)
        if isinstance(layout, tuple):
            # MSC reads field 0 whatever the index; msc reads the field asked for.
            field = layout[value.index] if value.index < len(layout) else ""
        else:
            field = layout if value.index == 0 else ""
        self.set_layout(var, field)

    def visit_shape(self, var: Var, value: ShapeExpr) -> None:
        self.set_layout(var, "O")

    # ---- calls to other functions (fused composites) ---------------------------------------
    def _callee(self, call: Call):
        if isinstance(call.op, GlobalVar) and self.mod is not None:
            func = self.mod[call.op]
            return func if isinstance(func, Function) else None
        return self.local_funcs.get(call.op) if isinstance(call.op, Var) else None

    def _forward_func(self, func: Function, call: Call, ret: Var) -> None:
        for param, arg in zip(func.params, call.args):
            if isinstance(arg, Var) and arg in self.var_layouts:
                self.set_layout(param, self.var_layouts[arg])
        self.visit_function(func)
        for param, arg in zip(func.params, call.args):
            if param in self.var_layouts:
                self.set_layout(arg, self.var_layouts[param])
        body = func.body.body if isinstance(func.body, SeqExpr) else None
        if isinstance(body, Var) and body in self.var_layouts:
            self.set_layout(ret, self.var_layouts[body])

    def _backward_func(self, func: Function, call: Call) -> None:
        for param, arg in zip(func.params, call.args):
            if param in self.var_layouts:
                self.set_layout(arg, self.var_layouts[param])

    # ---- backward -------------------------------------------------------------------------
    def backward(self) -> None:
        for var, value in reversed(self.records):
            if not isinstance(value, Call):
                continue
            callee = self._callee(value)
            if callee is not None:
                self._backward_func(callee, value)
            elif self._needs_backward(value):
                view = _CallView(self, value, var)
                rule = rule_for(value.op.op_def).backward or common_backward
                inferred = _attempt(rule, view)
                if inferred is not None:
                    self.set_inputs(value, inferred.inputs)

    def _needs_backward(self, call: Call) -> bool:
        if not isinstance(call.op, Op) or not call.args or _has_unknown_rank(call.args):
            return False
        return not all(self.is_inferred(a) for a in call.args)

    # ---- result ---------------------------------------------------------------------------
    def _note_constants(self, call: Call) -> None:
        for arg in call.args:
            for leaf in arg.fields if isinstance(arg, Tuple) else (arg,):
                if isinstance(leaf, Constant):
                    self.constants[id(leaf)] = leaf

    def result(self) -> dict:
        keys = [*self.params, *self.bound, *self.constants.values()]
        return {key: self.final_layout(key) for key in keys}

    def final_layout(self, expr: Expr):
        entry = self.written.get(id(expr))
        if entry is not None:
            return entry[1]
        sinfo = expr.struct_info
        if isinstance(sinfo, TupleStructInfo):
            return ("",) * len(sinfo.fields)
        return ""


_BINDING_HANDLERS = {
    Call: _LayoutState.visit_call,
    Tuple: _LayoutState.visit_tuple,
    TupleGetItem: _LayoutState.visit_get_item,
    ShapeExpr: _LayoutState.visit_shape,
}


def _attempt(rule, view):
    try:
        return rule(view)
    except RuleFailed:
        return None


def _is_nested_tensor(sinfo) -> bool:
    if isinstance(sinfo, TensorStructInfo):
        return True
    return isinstance(sinfo, TupleStructInfo) and all(_is_nested_tensor(f) for f in sinfo.fields)


def _has_unknown_rank(args) -> bool:
    for arg in args:
        if _unknown_rank(arg.struct_info):
            return True
    return False


def _unknown_rank(sinfo) -> bool:
    # module level, not nested: a recursive closure is a reference cycle made on every call
    if isinstance(sinfo, TupleStructInfo):
        return any(_unknown_rank(f) for f in sinfo.fields)
    return isinstance(sinfo, TensorStructInfo) and sinfo.ndim < 0


# --------------------------------------------------------------------------------------------
# What a rule sees of a call.

class _CallView:
    """One call as the rules see it: argument layouts (MSC's and Relax's view), ranks, shapes,
    attrs, and the output (its struct info and, for backward rules, its written layout)."""

    def __init__(self, state: _LayoutState, call: Call, var: Var):
        self.state, self.call, self.var = state, call, var
        self.nargs = len(call.args)
        out = var.struct_info
        self.out_is_tensor = isinstance(out, TensorStructInfo)
        self.out_fields = len(out.fields) if isinstance(out, TupleStructInfo) else None
        self.out_ndim = out.ndim if self.out_is_tensor else -1
        self.out_shape = (out.values or ()) if self.out_is_tensor else ()

    def arg(self, i: int) -> Expr:
        return self.call.args[i]

    def attr(self, name: str):
        attrs = self.call.attrs
        if attrs is None or name not in attrs:
            raise RuleFailed(f"no attr {name!r}")
        return attrs[name]

    def attr_or(self, name: str, default):
        attrs = self.call.attrs
        return attrs.get(name, default) if attrs is not None else default

    def layout(self, i: int) -> str:
        """MSC's layout of argument ``i``; a tuple layout makes the rule fail, as in MSC."""
        layout = self.state.nlayout(self.call.args[i])
        if not isinstance(layout, str):
            raise RuleFailed("argument has a tuple layout")
        return layout

    def relax_layout(self, i: int):
        """Relax's view: an unmapped value reads as the generic layout of its rank."""
        return _relax_nlayout(self.state, self.call.args[i])

    def is_tensor(self, i: int) -> bool:
        return isinstance(self.call.args[i].struct_info, TensorStructInfo)

    def ndim(self, i: int) -> int:
        sinfo = self.call.args[i].struct_info
        return sinfo.ndim if isinstance(sinfo, TensorStructInfo) else -1

    def shape(self, i: int) -> tuple:
        """MSC's ExprUtils::GetShape: the dims, empty when unknown (or rank 0)."""
        sinfo = self.call.args[i].struct_info
        return (sinfo.values or ()) if isinstance(sinfo, TensorStructInfo) else ()

    def out_nlayout(self):
        """The layout written on the call (backward rules read it, as MSC does)."""
        return self.state.written_layout(self.var)

    def out_layout(self) -> str:
        layout = self.out_nlayout()
        if not isinstance(layout, str):
            raise RuleFailed("output has a tuple layout")
        return layout

    def out_first(self) -> str:
        """MSC's InferLayoutDecisionAt(call, 0): the first field of a tuple output."""
        layout = self.out_nlayout()
        return layout[0] if isinstance(layout, tuple) else layout


def _relax_nlayout(state: _LayoutState, expr: Expr):
    if isinstance(expr, Var) and expr in state.var_layouts:
        return state.var_layouts[expr]
    if isinstance(expr, Tuple):
        return tuple(_relax_nlayout(state, f) for f in expr.fields)
    if isinstance(expr, (Var, Constant)):
        return _initial_nlayout(expr.struct_info)
    return None


def _initial_nlayout(sinfo):
    if isinstance(sinfo, TupleStructInfo):
        return tuple(_initial_nlayout(f) for f in sinfo.fields)
    if isinstance(sinfo, TensorStructInfo) and sinfo.ndim >= 0:
        return initial_layout(sinfo.ndim)
    return None


# --------------------------------------------------------------------------------------------
# allow_missing=False: every call and constant must have a layout.

def _check_complete(state: _LayoutState, func: Function) -> None:
    missing = []
    for var, value in _bindings(func):
        if isinstance(value, Call) and id(var) not in state.written:
            missing.append(f"{var.name_hint} = {_op_name(value)}(...)")
        for k, arg in enumerate(value.args if isinstance(value, Call) else ()):
            for leaf in arg.fields if isinstance(arg, Tuple) else (arg,):
                if isinstance(leaf, Constant) and id(leaf) not in state.written:
                    missing.append(f"constant {_const_desc(leaf)} (argument {k} of "
                                   f"{var.name_hint})")
    if missing:
        raise ValidationError(
            f"{len(missing)} value(s) have no layout:\n  " + "\n  ".join(missing),
            hint="give the inputs a layout through a layout-defining op (conv, pool, matmul…) "
                 "or build with allow_missing=True")


def _bindings(func: Function):
    stack = [func.body]
    while stack:
        expr = stack.pop()
        if isinstance(expr, SeqExpr):
            for block in expr.blocks:
                for binding in block.bindings:
                    yield binding.var, binding.value
                    stack.append(binding.value)
        elif isinstance(expr, If):
            stack.extend((expr.true_branch, expr.false_branch))
        elif isinstance(expr, Function):
            stack.append(expr.body)


def _op_name(call: Call) -> str:
    op = call.op
    return getattr(op, "name", None) or getattr(op, "name_hint", None) or type(op).__name__


def _const_desc(const: Constant) -> str:
    return f"{list(const.data.shape)} {const.data.dtype}"
