"""Optypes of Relax values (msc-conventions 4.1) and the check that a function can become a
graph at all.

A Relax op call gives its op name minus ``relax.``; a ``call_dps_packed`` of an extern
function is a plugin named by its symbol; a call to a composite function is named by its
``Codegen``, ``Optype`` or ``Composite`` attr. Runtime plumbing (``call_tir``, packed calls,
closures...) has no graph meaning::

    call_optype(call, mod)                     # "nn.conv2d", a plugin symbol, or None
    find_unsupported(view, mod)                # [{"op": "call_tir", "node": "lv3"}, ...]
"""

from __future__ import annotations

from msc.relax.expr import (
    Call,
    Constant,
    ExternFunc,
    Function,
    GlobalVar,
    MatchCast,
    ShapeExpr,
    Tuple,
    TupleGetItem,
    Var,
)
from msc.relax.op.registry import OPS, Op, ops_with
from msc.relax.struct_info import ShapeStructInfo, TensorStructInfo, TupleStructInfo

from .walk import FunctionView, callee_name, op_name

__all__ = ["FIRST_OUTPUT_ONLY", "VANISHING_OPS", "call_optype", "find_unsupported",
           "op_optype"]

# Identity at inference time: the node disappears and its consumers read its input.
VANISHING_OPS = ops_with("inference_identity")
# Tuple-valued ops whose graph node keeps only output 0 (the rest are training statistics).
FIRST_OUTPUT_ONLY = ops_with("stat_outputs")
# Function attrs naming the optype of a composite function, by priority.
FUNC_OPTYPE_ATTRS = ("Codegen", "Optype", "Composite")


def _strip_target(name: str) -> str:
    """A BYOC composite ``<target>.<optype>`` (``tensorrt.nn.conv2d``) -> the optype."""
    target, _, rest = name.partition(".")
    return rest if target and name not in OPS and rest.removeprefix("relax.") in OPS else name


def _func_optype(func) -> str | None:
    attrs = getattr(func, "attrs", None) or {}
    for key in FUNC_OPTYPE_ATTRS:
        if attrs.get(key):
            return _strip_target(str(attrs[key]))
    return None


def op_optype(name: str) -> str | None:
    """The graph optype of a table op: its name, or None for runtime plumbing (calls into
    TIR / packed functions, effects, runtime objects), whose computation a graph cannot say.
    """
    return None if OPS[name].runtime else name


def call_optype(call: Call, mod=None) -> str | None:
    """The optype of a call, or None when no graph optype describes it."""
    op = call.op
    if isinstance(op, Op):
        name = op_name(call)
        if name == "call_dps_packed" and call.args and isinstance(call.args[0], ExternFunc):
            return call.args[0].global_symbol  # a plugin, named by its symbol
        return op_optype(name)
    if isinstance(op, GlobalVar) and mod is not None and op in mod:
        return _func_optype(mod[op])
    if isinstance(op, Function):
        return _func_optype(op)
    return None


def _graph_sinfo(sinfo, optype: str | None = None) -> bool:
    """Whether a value of this struct info can be the output of a graph node."""
    if isinstance(sinfo, TupleStructInfo):
        fields = sinfo.fields[:1] if optype in FIRST_OUTPUT_ONLY else sinfo.fields
        return all(isinstance(f, TensorStructInfo) for f in fields)
    return isinstance(sinfo, (TensorStructInfo, ShapeStructInfo))


def leaf_sinfos(sinfo) -> list:
    """The struct infos of a (nested) tuple's leaves, in order."""
    if isinstance(sinfo, TupleStructInfo):
        return [leaf for f in sinfo.fields for leaf in leaf_sinfos(f)]
    return [sinfo]


def _tensor_leaves(sinfo) -> bool:
    """A nested tuple of tensors: the function's result may be one (its fields are ONNX
    sequences, msc/graph/outputs.py); the graph lists its leaves as outputs."""
    return all(isinstance(leaf, TensorStructInfo) for leaf in leaf_sinfos(sinfo))


class _Checker:
    def __init__(self, view: FunctionView, mod):
        self.view, self.mod = view, mod
        self.items: list[dict] = []

    def add(self, op: str, node: str, reason: str) -> None:
        self.items.append({"op": op, "node": node, "reason": reason})

    def binding(self, binding) -> None:
        var, value = binding.var, binding.value
        if isinstance(binding, MatchCast) and not isinstance(value, Var):
            self.add("match_cast", var.name_hint, "match_cast of a non-var value")
        elif isinstance(value, Call):
            self.call(var, value)
        elif isinstance(value, TupleGetItem):
            self.get_item(var, value)
        elif isinstance(value, Tuple) and not _graph_sinfo(var.struct_info) and \
                not (var is self.view.result and _tensor_leaves(var.struct_info)):
            self.add("tuple", var.name_hint, f"nested tuple {var.struct_info}")
        elif not isinstance(value, (Var, Constant, Tuple, ShapeExpr)):
            self.add(type(value).__name__, var.name_hint, "no graph node for this value")

    def call(self, var: Var, call: Call) -> None:
        optype = call_optype(call, self.mod)
        if optype is None:
            self.add(callee_name(call), var.name_hint, "no optype for this call")
        elif not _graph_sinfo(var.struct_info, optype):
            self.add(optype, var.name_hint, f"output {var.struct_info} is not a tensor")

    def get_item(self, var: Var, item: TupleGetItem) -> None:
        producer = self.view.bound_value(self.view.value_of(item.tuple_value))
        name = op_name(producer) if isinstance(producer, Call) else None
        if item.index != 0 and name in FIRST_OUTPUT_ONLY | VANISHING_OPS:
            self.add(name, var.name_hint, f"only output 0 of {name} is in the graph")
        elif not _graph_sinfo(var.struct_info):
            self.add("get_item", var.name_hint, f"output {var.struct_info} is not a tensor")


def find_unsupported(view: FunctionView, mod=None) -> list[dict]:
    """Every param and binding of ``view.func`` that cannot become a graph node, as
    ``{"op", "node", "reason"}`` items (empty when the function can be built)."""
    checker = _Checker(view, mod)
    for param in view.func.params:
        if not isinstance(param.struct_info, TensorStructInfo):
            checker.add("input", param.name_hint, f"param of type {param.struct_info}")
    for _, binding in view.bindings:
        checker.binding(binding)
    return checker.items
