"""ExprVisitor and ExprMutator: walk and rewrite Relax expressions (TVM's expr_functor).

Both dispatch on the node type through one table (``visit_call_``, ``visit_var_``, ...), so a
subclass overrides only the nodes it cares about::

    class CountCalls(ExprVisitor):
        def __init__(self):
            self.names = []

        def visit_call_(self, call):
            self.names.append(call.op.name)
            super().visit_call_(call)

    class ReluToSigmoid(ExprMutator):
        def visit_call_(self, call):
            call = self.visit_expr_post_order(call)       # children first
            if getattr(call.op, "name", "") == "relax.nn.relu":
                return op.sigmoid(call.args[0])          # re-normalized by visit_expr
            return call

The mutator rebuilds only what changed (an unchanged subtree is returned as the same object)
and re-normalizes rebuilt calls through a BlockBuilder, so struct info is inferred again.
"""

from __future__ import annotations

from collections.abc import Callable

from ..tir import expr as tir
from .block_builder import BlockBuilder, is_normal
from .expr import (
    Binding,
    BindingBlock,
    Call,
    Constant,
    DataflowBlock,
    DataflowVar,
    DataTypeImm,
    Expr,
    ExternFunc,
    Function,
    GlobalVar,
    If,
    MatchCast,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
)
from .module import IRModule
from .op.registry import Op
from .struct_info import (
    FuncStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)

__all__ = [
    "ExprMutator",
    "ExprVisitor",
    "all_global_vars",
    "all_vars",
    "bound_vars",
    "free_vars",
    "post_order_rewrite",
    "post_order_visit",
    "substitute_struct_info",
    "used_vars",
]

# Node type -> handler name. Subclasses of a node type (none today) fall back along the MRO.
_EXPR_HANDLERS = {
    Var: "visit_var_", DataflowVar: "visit_dataflow_var_", Constant: "visit_constant_",
    Call: "visit_call_", Tuple: "visit_tuple_", TupleGetItem: "visit_tuple_getitem_",
    ShapeExpr: "visit_shape_expr_", PrimValue: "visit_prim_value_",
    StringImm: "visit_string_imm_", DataTypeImm: "visit_data_type_imm_", If: "visit_if_",
    Function: "visit_function_", SeqExpr: "visit_seq_expr_", GlobalVar: "visit_global_var_",
    ExternFunc: "visit_extern_func_", Op: "visit_op_",
}
_BINDING_HANDLERS = {VarBinding: "visit_var_binding_", MatchCast: "visit_match_cast_"}
_BLOCK_HANDLERS = {BindingBlock: "visit_binding_block_", DataflowBlock: "visit_dataflow_block_"}
_VAR_DEF_HANDLERS = {Var: "visit_var_def_", DataflowVar: "visit_dataflow_var_def_"}


def _handler_name(table: dict, node) -> str:
    kind = type(node)
    name = table.get(kind)
    if name is not None:
        return name
    for klass in kind.__mro__:
        if klass in table:
            return table[klass]
    return "visit_expr_fallback_"


class ExprVisitor:
    """Visits every expression, binding, block and var definition (read-only)."""

    def visit_expr(self, expr: Expr) -> None:
        getattr(self, _handler_name(_EXPR_HANDLERS, expr))(expr)

    def visit_binding(self, binding: Binding) -> None:
        getattr(self, _handler_name(_BINDING_HANDLERS, binding))(binding)

    def visit_binding_block(self, block: BindingBlock) -> None:
        getattr(self, _handler_name(_BLOCK_HANDLERS, block))(block)

    def visit_var_def(self, var: Var) -> None:
        getattr(self, _handler_name(_VAR_DEF_HANDLERS, var))(var)

    # ---- leaves ---------------------------------------------------------------------------
    def visit_var_(self, var: Var) -> None:
        pass

    def visit_dataflow_var_(self, var: DataflowVar) -> None:
        self.visit_var_(var)

    def visit_constant_(self, const: Constant) -> None:
        pass

    def visit_shape_expr_(self, shape: ShapeExpr) -> None:
        pass

    def visit_prim_value_(self, value: PrimValue) -> None:
        pass

    def visit_string_imm_(self, value: StringImm) -> None:
        pass

    def visit_data_type_imm_(self, value: DataTypeImm) -> None:
        pass

    def visit_global_var_(self, gv: GlobalVar) -> None:
        pass

    def visit_extern_func_(self, func: ExternFunc) -> None:
        pass

    def visit_op_(self, op: Op) -> None:
        pass

    def visit_expr_fallback_(self, expr) -> None:
        pass

    # ---- compound -------------------------------------------------------------------------
    def visit_call_(self, call: Call) -> None:
        self.visit_expr(call.op)
        for arg in call.args:
            self.visit_expr(arg)

    def visit_tuple_(self, tup: Tuple) -> None:
        for field in tup.fields:
            self.visit_expr(field)

    def visit_tuple_getitem_(self, item: TupleGetItem) -> None:
        self.visit_expr(item.tuple_value)

    def visit_if_(self, node: If) -> None:
        self.visit_expr(node.cond)
        self.visit_expr(node.true_branch)
        self.visit_expr(node.false_branch)

    def visit_function_(self, func: Function) -> None:
        for param in func.params:
            self.visit_var_def(param)
        self.visit_expr(func.body)

    def visit_seq_expr_(self, seq: SeqExpr) -> None:
        for block in seq.blocks:
            self.visit_binding_block(block)
        self.visit_expr(seq.body)

    # ---- bindings -------------------------------------------------------------------------
    def visit_binding_block_(self, block: BindingBlock) -> None:
        for binding in block.bindings:
            self.visit_binding(binding)

    def visit_dataflow_block_(self, block: DataflowBlock) -> None:
        self.visit_binding_block_(block)

    def visit_var_binding_(self, binding: VarBinding) -> None:
        self.visit_expr(binding.value)
        self.visit_var_def(binding.var)

    def visit_match_cast_(self, binding: MatchCast) -> None:
        self.visit_expr(binding.value)
        self.visit_var_def(binding.var)

    def visit_var_def_(self, var: Var) -> None:
        pass

    def visit_dataflow_var_def_(self, var: DataflowVar) -> None:
        self.visit_var_def_(var)


# --------------------------------------------------------------------------------------------
# Mutator.

class _ScopedBuilder(BlockBuilder):
    """A BlockBuilder that collects bindings block by block for a mutator (no function scope):
    normalization still binds nested calls to fresh vars in the current block."""

    def __init__(self, mod: IRModule | None = None):
        super().__init__(mod)
        self._stack: list = []

    def begin_block(self, dataflow: bool) -> None:
        self._stack.append((self._bindings, self._is_dataflow))
        self._start_block(dataflow)

    def end_block(self) -> list:
        bindings = self._bindings
        self._bindings, self._is_dataflow = self._stack.pop()
        return bindings

    def reserve_names(self, names) -> None:
        self._names.update(names)

    def has_function(self, gv: GlobalVar) -> bool:
        return gv in self._mod


class ExprMutator(ExprVisitor):
    """Rebuilds the expressions it changes; everything it leaves alone keeps its identity.

    ``builder_`` normalizes rebuilt expressions (struct info inference); ``var_remap_`` maps
    old vars to their replacements (set when a binding's struct info changes, or by you through
    ``set_var_remap``). ``tir_var_map`` substitutes symbolic dims everywhere (struct info,
    shapes, prim values). Pass the module when calls to its functions may be rebuilt.
    """

    def __init__(self, mod: IRModule | None = None):
        self.builder_ = _ScopedBuilder(mod)
        self.var_remap_: dict = {}
        self.tir_var_map: dict = {}
        self._bound: dict = {}

    # ---- entry points ---------------------------------------------------------------------
    def visit_expr(self, expr: Expr) -> Expr:
        new = getattr(self, _handler_name(_EXPR_HANDLERS, expr))(expr)
        return new if is_normal(new) else self.builder_.normalize(new)

    def visit_expr_post_order(self, expr: Expr) -> Expr:
        """Mutate ``expr``'s children with the default rule for its node type (not your
        override), rebuild it if they changed, and normalize: call it first in an override."""
        name = _handler_name(_EXPR_HANDLERS, expr)
        return self.builder_.normalize(getattr(ExprMutator, name)(self, expr))

    def visit_binding(self, binding: Binding) -> None:
        getattr(self, _handler_name(_BINDING_HANDLERS, binding))(binding)

    def visit_binding_block(self, block: BindingBlock) -> BindingBlock:
        return getattr(self, _handler_name(_BLOCK_HANDLERS, block))(block)

    def visit_var_def(self, var: Var) -> Var:
        return getattr(self, _handler_name(_VAR_DEF_HANDLERS, var))(var)

    def visit_with_new_scope(self, expr: Expr) -> Expr:
        """Visit ``expr`` in a fresh binding scope; bindings that normalization emits are
        kept in a SeqExpr around the result."""
        self.builder_.begin_block(False)
        new = self.visit_expr(expr)
        emitted = self.builder_.end_block()
        if not emitted:
            return new
        if isinstance(new, SeqExpr):
            return SeqExpr([BindingBlock(emitted), *new.blocks], new.body, new.span)
        return SeqExpr([BindingBlock(emitted)], new)

    # ---- var remapping and lookups --------------------------------------------------------
    def set_var_remap(self, old: Var, new: Expr) -> None:
        self.var_remap_[old] = new

    def get_var_remap(self, var: Var) -> Expr:
        return self.var_remap_.get(var, var)

    def lookup_binding(self, var: Var) -> Expr | None:
        """The (new) value bound to a (new) var in what this mutator has emitted so far."""
        return self._bound.get(var)

    def with_struct_info(self, var: Var, sinfo: StructInfo) -> Var:
        """``var`` itself when its struct info is already ``sinfo``, else a same-named var."""
        if var.struct_info == sinfo:
            return var
        return type(var)(var.name_hint, sinfo, var.span)

    def visit_struct_info(self, sinfo: StructInfo | None) -> StructInfo | None:
        """Substitute ``tir_var_map`` in ``sinfo`` (unchanged when the map is empty)."""
        if not self.tir_var_map or sinfo is None:
            return sinfo
        return substitute_struct_info(sinfo, self.tir_var_map)

    def _prim(self, value):
        if not self.tir_var_map:
            return value
        return tir.substitute(value, self.tir_var_map)

    # ---- leaves ---------------------------------------------------------------------------
    def visit_var_(self, var: Var) -> Expr:
        return self.var_remap_.get(var, var)

    def visit_dataflow_var_(self, var: DataflowVar) -> Expr:
        return self.visit_var_(var)

    def visit_constant_(self, const: Constant) -> Expr:
        return const

    def visit_shape_expr_(self, shape: ShapeExpr) -> Expr:
        values = tuple(self._prim(v) for v in shape.values)
        return shape if values == shape.values else ShapeExpr(values, shape.span)

    def visit_prim_value_(self, value: PrimValue) -> Expr:
        new = self._prim(value.value)
        return value if new == value.value else PrimValue(new, value.span)

    def visit_string_imm_(self, value: StringImm) -> Expr:
        return value

    def visit_data_type_imm_(self, value: DataTypeImm) -> Expr:
        return value

    def visit_global_var_(self, gv: GlobalVar) -> Expr:
        return gv

    def visit_extern_func_(self, func: ExternFunc) -> Expr:
        return func

    def visit_op_(self, op: Op) -> Expr:
        return op

    def visit_expr_fallback_(self, expr) -> Expr:
        return expr

    # ---- compound -------------------------------------------------------------------------
    def visit_call_(self, call: Call) -> Expr:
        op = self.visit_expr(call.op)
        args = [self.visit_expr(a) for a in call.args]
        sinfo_args = [self.visit_struct_info(s) for s in call.sinfo_args]
        if op is call.op and _same(args, call.args) and _same(sinfo_args, call.sinfo_args):
            return call
        new = Call(op, args, call.attrs, sinfo_args, call.span)
        if not isinstance(op, Op) and not self._knows_callee(op) and call.struct_info:
            new._set_struct_info(self.visit_struct_info(call.struct_info))
        return new

    def _knows_callee(self, op) -> bool:
        return not isinstance(op, GlobalVar) or self.builder_.has_function(op)

    def visit_tuple_(self, tup: Tuple) -> Expr:
        fields = [self.visit_expr(f) for f in tup.fields]
        return tup if _same(fields, tup.fields) else Tuple(fields, tup.span)

    def visit_tuple_getitem_(self, item: TupleGetItem) -> Expr:
        inner = self.visit_expr(item.tuple_value)
        if inner is item.tuple_value:
            return item
        return TupleGetItem(inner, item.index, item.span)

    def visit_if_(self, node: If) -> Expr:
        cond = self.visit_expr(node.cond)
        true_branch = self.visit_with_new_scope(node.true_branch)
        false_branch = self.visit_with_new_scope(node.false_branch)
        if _same([cond, true_branch, false_branch],
                 [node.cond, node.true_branch, node.false_branch]):
            return node
        new = If(cond, true_branch, false_branch, node.span)
        sinfo = true_branch.struct_info or node.struct_info
        if sinfo is not None:
            new._set_struct_info(sinfo)
        return new

    def visit_function_(self, func: Function) -> Expr:
        self.builder_.reserve_names(v.name_hint for v in all_vars(func))
        params = [self.visit_var_def(p) for p in func.params]
        body = self.visit_with_new_scope(func.body)
        ret = self.visit_struct_info(func.ret_struct_info)
        if body.struct_info is not None and body.struct_info != func.body.struct_info:
            ret = body.struct_info  # the rewrite changed what the function returns
        if _same(params, func.params) and body is func.body and ret == func.ret_struct_info:
            return func
        return Function(params, body, ret, func.is_pure, func.attrs, func.span)

    def visit_seq_expr_(self, seq: SeqExpr) -> Expr:
        blocks = [self.visit_binding_block(b) for b in seq.blocks]
        self.builder_.begin_block(False)
        body = self.visit_expr(seq.body)
        emitted = self.builder_.end_block()
        if emitted:
            blocks.append(BindingBlock(emitted))
        blocks = [b for b in blocks if b.bindings]
        if _same(blocks, seq.blocks) and body is seq.body:
            return seq
        return SeqExpr(blocks, body, seq.span)

    # ---- bindings -------------------------------------------------------------------------
    def visit_binding_block_(self, block: BindingBlock) -> BindingBlock:
        self.builder_.begin_block(isinstance(block, DataflowBlock))
        for binding in block.bindings:
            self.visit_binding(binding)
        bindings = self.builder_.end_block()
        return block if _same(bindings, block.bindings) else type(block)(bindings)

    def visit_dataflow_block_(self, block: DataflowBlock) -> BindingBlock:
        return self.visit_binding_block_(block)

    def visit_var_binding_(self, binding: VarBinding) -> None:
        value = self.visit_expr(binding.value)
        self.reemit_binding(binding, value)

    def reemit_binding(self, binding: VarBinding, value: Expr) -> None:
        """Emit ``binding`` with a new value: the same binding when nothing changed, else a
        binding to a var whose struct info follows the value (remapping uses of the old var)."""
        var = self.visit_var_def(binding.var)
        if var is binding.var and value is binding.value:
            # TVM's ReEmitBinding: an unchanged binding keeps its var (and its annotation)
            self.emit_binding(binding)
            return
        new_var = self.with_struct_info(var, value.struct_info or var.struct_info)
        if new_var is not binding.var:
            self.set_var_remap(binding.var, new_var)
        self.emit_binding(VarBinding(new_var, value, binding.span))

    def visit_match_cast_(self, binding: MatchCast) -> None:
        value = self.visit_expr(binding.value)
        sinfo = self.visit_struct_info(binding.struct_info)
        var = self.visit_var_def(binding.var)
        if var is binding.var and value is binding.value and sinfo == binding.struct_info:
            self.emit_binding(binding)
            return
        new_var = self.with_struct_info(var, sinfo)
        if new_var is not binding.var:
            self.set_var_remap(binding.var, new_var)
        self.emit_binding(MatchCast(new_var, value, sinfo, binding.span))

    def emit_binding(self, binding: Binding) -> None:
        self.builder_.emit_normalized(binding)
        self._bound[binding.var] = binding.value

    def visit_var_def_(self, var: Var) -> Var:
        sinfo = self.visit_struct_info(var.struct_info)
        new = self.with_struct_info(var, sinfo)
        if new is not var:
            self.set_var_remap(var, new)
        return new

    def visit_dataflow_var_def_(self, var: DataflowVar) -> Var:
        return self.visit_var_def_(var)


def _same(new, old) -> bool:
    return len(new) == len(old) and all(a is b for a, b in zip(new, old))


# --------------------------------------------------------------------------------------------
# Struct info substitution (symbolic dims).

def substitute_struct_info(sinfo: StructInfo, mapping: dict) -> StructInfo:
    """``sinfo`` with symbolic vars replaced by ``mapping`` (name or tir.Var -> value)."""
    handler = _SINFO_SUBST.get(type(sinfo))
    return handler(sinfo, mapping) if handler else sinfo


def _subst_values(values, mapping):
    return None if values is None else [tir.substitute(v, mapping) for v in values]


def _subst_tensor(s: TensorStructInfo, mapping) -> StructInfo:
    if s.values is None:
        return s
    return TensorStructInfo(_subst_values(s.values, mapping), s.dtype, s.ndim, s.vdevice)


def _subst_shape(s: ShapeStructInfo, mapping) -> StructInfo:
    return s if s.values is None else ShapeStructInfo(_subst_values(s.values, mapping))


def _subst_prim(s: PrimStructInfo, mapping) -> StructInfo:
    value = None if s.value is None else tir.substitute(s.value, mapping)
    return PrimStructInfo(s.dtype, value)


def _subst_func(s: FuncStructInfo, mapping) -> StructInfo:
    params = None if s.params is None else [substitute_struct_info(p, mapping)
                                            for p in s.params]
    return FuncStructInfo(params, substitute_struct_info(s.ret, mapping), s.purity)


_SINFO_SUBST = {
    TensorStructInfo: _subst_tensor,
    ShapeStructInfo: _subst_shape,
    PrimStructInfo: _subst_prim,
    TupleStructInfo: lambda s, m: TupleStructInfo([substitute_struct_info(f, m)
                                                   for f in s.fields]),
    FuncStructInfo: _subst_func,
}


# --------------------------------------------------------------------------------------------
# Helpers.

class _PostOrder(ExprVisitor):
    def __init__(self, fn: Callable):
        self.fn = fn

    def visit_expr(self, expr) -> None:
        super().visit_expr(expr)
        self.fn(expr)


def post_order_visit(expr: Expr, fn: Callable[[Expr], None]) -> None:
    """Call ``fn`` on every expression under ``expr``, children before parents."""
    _PostOrder(fn).visit_expr(expr)


class _PostOrderRewriter(ExprMutator):
    def __init__(self, fn: Callable, mod: IRModule | None):
        super().__init__(mod)
        self.fn = fn

    def visit_expr(self, expr: Expr) -> Expr:
        return self.builder_.normalize(self.fn(super().visit_expr(expr)))


def post_order_rewrite(expr: Expr, fn: Callable[[Expr], Expr],
                       mod: IRModule | None = None) -> Expr:
    """Rewrite bottom-up: ``fn`` sees each expression after its children were rewritten and
    returns its replacement (or the expression itself)."""
    return _PostOrderRewriter(fn, mod).visit_expr(expr)


class _VarCollector(ExprVisitor):
    """Records vars (by identity, first appearance first) as they are defined and used."""

    def __init__(self):
        self.defined: dict = {}
        self.used: dict = {}
        self.order: dict = {}
        self.global_vars: dict = {}

    def visit_var_(self, var: Var) -> None:
        self.used.setdefault(var, None)
        self.order.setdefault(var, None)

    def visit_var_def_(self, var: Var) -> None:
        self.defined.setdefault(var, None)
        self.order.setdefault(var, None)
        self._visit_sinfo_vars(var.struct_info)

    def visit_match_cast_(self, binding: MatchCast) -> None:
        super().visit_match_cast_(binding)
        self._visit_sinfo_vars(binding.struct_info)

    def visit_global_var_(self, gv: GlobalVar) -> None:
        self.global_vars.setdefault(gv, None)

    def _visit_sinfo_vars(self, sinfo) -> None:
        # R.Tensor(shape_var) refers to a Relax var through its struct info.
        if isinstance(sinfo, TensorStructInfo) and isinstance(sinfo.shape, Var):
            self.visit_expr(sinfo.shape)
        for field in getattr(sinfo, "fields", ()):
            self._visit_sinfo_vars(field)


def _collect(expr: Expr) -> _VarCollector:
    collector = _VarCollector()
    collector.visit_expr(expr)
    return collector


def free_vars(expr: Expr) -> list[Var]:
    """Vars used in ``expr`` but not defined in it (neither a param nor bound there)."""
    c = _collect(expr)
    return [v for v in c.used if v not in c.defined]


def bound_vars(expr: Expr) -> list[Var]:
    """Vars defined in ``expr``: function params and binding vars, in definition order."""
    return list(_collect(expr).defined)


def all_vars(expr: Expr) -> list[Var]:
    """Every var defined or used in ``expr``, in order of first appearance."""
    return list(_collect(expr).order)


def used_vars(expr: Expr) -> list[Var]:
    """Vars referenced (used as values) in ``expr``, whether defined there or not."""
    return list(_collect(expr).used)


def all_global_vars(expr: Expr) -> list[GlobalVar]:
    """GlobalVars referenced in ``expr`` (callees, call_tir targets)."""
    return list(_collect(expr).global_vars)
