"""DeadCodeElimination: drop unused bindings and functions no entry function reaches.

    mod = relax.transform.DeadCodeElimination()(mod)          # entries: public functions
    mod = relax.transform.DeadCodeElimination(["main"])(mod)

A binding is kept when its var is used later (or returned) or when its value has a side effect
(an impure op such as ``R.print``, a call to an extern or impure function).
"""

from __future__ import annotations

from ..expr import (
    BindingBlock,
    Call,
    Constant,
    DataflowVar,
    DataTypeImm,
    ExternFunc,
    Function,
    GlobalVar,
    MatchCast,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
)
from ..module import IRModule
from ..op.registry import Op
from ..struct_info import FuncStructInfo, TensorStructInfo
from ..visitor import ExprMutator, all_global_vars, used_vars
from .base import ModulePass, PassContext

__all__ = ["DeadCodeElimination", "is_impure", "remove_all_unused"]


def _callee_is_pure(callee, mod: IRModule | None) -> bool:
    if isinstance(callee, Op):
        return callee.op_def.pure  # the op's trait (TVM's FPurity)
    if isinstance(callee, ExternFunc):
        return False  # R.call_packed: TVM treats extern calls as impure
    if isinstance(callee, GlobalVar) and mod is not None and callee in mod:
        return getattr(mod[callee], "is_pure", True)
    sinfo = getattr(callee, "struct_info", None)
    return sinfo.purity if isinstance(sinfo, FuncStructInfo) else True


def is_impure(expr, mod: IRModule | None = None) -> bool:
    """Whether evaluating ``expr`` (a binding's value) may have a side effect."""
    return isinstance(expr, Call) and not _callee_is_pure(expr.op, mod)


class _RemoveUnused(ExprMutator):
    """Prunes every SeqExpr (innermost first) with one backward liveness pass."""

    def __init__(self, mod: IRModule | None):
        super().__init__(mod)
        self.mod = mod

    def visit_seq_expr_(self, seq: SeqExpr):
        seq = super().visit_seq_expr_(seq)
        live = set(used_vars(seq.body))
        blocks = [self._prune(block, live) for block in reversed(seq.blocks)][::-1]
        blocks = [b for b in blocks if b.bindings]
        if len(blocks) == len(seq.blocks) and all(
                len(a.bindings) == len(b.bindings) for a, b in zip(blocks, seq.blocks)):
            return seq
        return SeqExpr(blocks, seq.body, seq.span)

    def _prune(self, block: BindingBlock, live: set) -> BindingBlock:
        kept = []
        for binding in reversed(block.bindings):
            if self._keep(binding, live):
                kept.append(binding)
                live.update(used_vars(binding.value))
                live.update(_struct_info_uses(binding))
        if len(kept) == len(block.bindings):
            return block
        return type(block)(kept[::-1])

    def _keep(self, binding, live: set) -> bool:
        if binding.var in live or is_impure(binding.value, self.mod):
            return True
        # A match_cast may define symbolic dims that later struct info relies on.
        return isinstance(binding, MatchCast) and _defines_symbols(binding)


def _struct_info_uses(binding) -> list:
    """Vars that struct info refers to (``R.Tensor(shape_var)``)."""
    sinfos = [binding.var.struct_info, getattr(binding, "struct_info", None)]
    return [s.shape for s in sinfos
            if isinstance(s, TensorStructInfo) and isinstance(s.shape, Var)]


def _defines_symbols(binding: MatchCast) -> bool:
    values = getattr(binding.struct_info, "values", None) or ()
    return any(not v.is_const for v in values)


def remove_all_unused(func: Function, mod: IRModule | None = None) -> Function:
    """``func`` without bindings whose vars are never used (impure bindings stay)."""
    pruned = _prune_flat(func, mod)
    return pruned if pruned is not None else _RemoveUnused(mod).visit_expr(func)


_LEAVES = (Constant, ShapeExpr, PrimValue, StringImm, DataTypeImm, GlobalVar, ExternFunc, Op)
_LEAF_TYPES = frozenset(_LEAVES)


def _flat_uses(value) -> list | None:
    """The vars a flat value uses (a var, leaf, or a call / tuple / item over vars and
    leaves); None when something nests (If, inner functions, nested calls)."""
    if type(value) is Call and type(value.op) is Op:  # the usual binding: an op on vars
        uses = []
        for item in value.args:
            kind = type(item)
            if kind is DataflowVar or kind is Var:
                uses.append(item)
            elif kind not in _LEAF_TYPES and not isinstance(item, _LEAVES):
                return _flat_uses_of(value)  # a subclass or a nested value: the long way
        return uses
    return _flat_uses_of(value)


def _flat_uses_of(value) -> list | None:
    if isinstance(value, Var):
        return [value]
    if isinstance(value, _LEAVES):
        return []
    if isinstance(value, Call):
        items = (value.op, *value.args)
    elif isinstance(value, Tuple):
        items = value.fields
    elif isinstance(value, TupleGetItem):
        items = (value.tuple_value,)
    else:
        return None
    uses = []
    for item in items:
        if isinstance(item, Var):
            uses.append(item)
        elif not isinstance(item, _LEAVES):
            return None
    return uses


def _prune_flat(func: Function, mod: IRModule | None) -> Function | None:
    """The same pruning as ``_RemoveUnused`` on a function whose bindings are all flat (the
    usual case), without rebuilding every expression; None to take the general path."""
    seq = func.body
    if not isinstance(seq, SeqExpr):
        return None
    live = set(used_vars(seq.body))
    blocks = []
    for block in reversed(seq.blocks):
        kept = []
        for binding in reversed(block.bindings):
            uses = _flat_uses(binding.value)
            if uses is None:
                return None
            if binding.var in live or is_impure(binding.value, mod) or (
                    isinstance(binding, MatchCast) and _defines_symbols(binding)):
                kept.append(binding)
                live.update(uses)
                live.update(_struct_info_uses(binding))
        blocks.append(block if len(kept) == len(block.bindings) else type(block)(kept[::-1]))
    blocks = [b for b in reversed(blocks) if b.bindings]
    if len(blocks) == len(seq.blocks) and all(a is b for a, b in zip(blocks, seq.blocks)):
        return func
    return Function(func.params, SeqExpr(blocks, seq.body, seq.span), func.ret_struct_info,
                    func.is_pure, func.attrs, func.span)


def _is_public(func) -> bool:
    attrs = getattr(func, "attrs", None) or {}
    return "global_symbol" in attrs


def _reachable(mod: IRModule, entries: list[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(entries)
    while todo:
        name = todo.pop()
        if name in seen or name not in mod:
            continue
        seen.add(name)
        func = mod[name]
        if isinstance(func, Function):
            todo.extend(gv.name_hint for gv in all_global_vars(func))
    return seen


class DeadCodeElimination(ModulePass):
    """Drop unused bindings in every Relax function, then the functions that neither an entry
    function (``entry_functions`` plus every public function, i.e. one with a
    ``global_symbol``) nor anything they call refers to. A module with no entry at all keeps
    its functions."""

    opt_level = 1

    def __init__(self, entry_functions=None):
        super().__init__()
        self.entry_functions = list(entry_functions or [])

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = IRModule(attrs=mod.attrs)
        keep = self._kept_functions(mod)
        for gv, func in mod.functions.items():
            if gv.name_hint not in keep:
                continue
            out[gv] = remove_all_unused(func, mod) if isinstance(func, Function) else func
        return out

    def _kept_functions(self, mod: IRModule) -> set[str]:
        entries = [n for n in self.entry_functions if n in mod]
        entries += [gv.name_hint for gv, f in mod.functions.items() if _is_public(f)]
        if not entries:
            return {gv.name_hint for gv in mod.get_global_vars()}
        return _reachable(mod, entries)
