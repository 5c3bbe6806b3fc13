"""FoldConstant: evaluate calls whose arguments are all known, with the ops' numpy facts.

    mod = relax.transform.FoldConstant()(mod)

Arguments count as known when they are Constants, static ShapeExprs, constant PrimValues,
strings, dtypes, tuples of those, or vars bound to any of them. The result keeps the dtype the
op's inference gives (numpy would sometimes upcast). Vars bound to constants (or shapes, prim
values) are replaced by them at their uses and bindings that become unused are dropped, as
TVM does.
Never folded: ops without a numpy fact, impure ops, and runtime ops (``OpDef.runtime``: the
calls into TIR / packed functions, call_tir, call_dps_packed, ...).
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import expr as rx
from ..expr import Call, Constant, Function, PrimValue, ShapeExpr, Tuple, TupleGetItem, Var
from ..module import IRModule
from ..op.facts import load_facts
from ..op.registry import Op
from ..struct_info import PrimStructInfo, ShapeStructInfo, TensorStructInfo, TupleStructInfo
from ..visitor import ExprMutator
from .base import FunctionPass, PassContext
from .dead_code_elimination import is_impure, remove_all_unused

__all__ = ["FoldConstant", "fold_constant"]

# Struct info -> how a folded value becomes an expression again.
_TO_EXPR = {
    TensorStructInfo: lambda v, s: Constant(np.asarray(v, order="C")),  # keeps 0-d arrays
    ShapeStructInfo: lambda v, s: ShapeExpr(v),
    PrimStructInfo: lambda v, s: PrimValue(v),
    TupleStructInfo: lambda v, s: Tuple([value_to_expr(x, f) for x, f in zip(v, s.fields)]),
}


def value_to_expr(value, sinfo):
    return _TO_EXPR[type(sinfo)](value, sinfo)


def _numpy_ref():
    load_facts("numpy")
    from ..op import numpy_ref  # its evaluation helpers; loaded on first use

    return numpy_ref


def _static(sinfo) -> bool:
    """Whether a fold result of this struct info can be checked and built."""
    if isinstance(sinfo, TupleStructInfo):
        return all(_static(f) for f in sinfo.fields)
    if isinstance(sinfo, TensorStructInfo):
        return _numpy_dtype(sinfo.dtype) and (sinfo.values is None or sinfo.is_static)
    return isinstance(sinfo, (ShapeStructInfo, PrimStructInfo))


# Results above this many bytes are left to run time: folding would allocate them now (a model
# can declare a 10^12-element ConstantOfShape), and constants that large are weights, not
# shape arithmetic.
MAX_FOLD_BYTES = 1 << 30


def _small(sinfo) -> bool:
    """A static tensor result within MAX_FOLD_BYTES (tuples: every field)."""
    if isinstance(sinfo, TupleStructInfo):
        return all(_small(f) for f in sinfo.fields)
    if isinstance(sinfo, TensorStructInfo) and sinfo.values is not None and sinfo.is_static:
        count = 1
        for dim in sinfo.values:
            count *= int(dim)
        return count * np.dtype(sinfo.dtype).itemsize <= MAX_FOLD_BYTES
    return True


def _numpy_dtype(dtype: str) -> bool:
    """Only numpy's own dtypes fold: not "void" (unknown), nor bfloat16 / float8, which numpy
    lacks (ml_dtypes, when some library loads it, adds them as opaque 'V' kinds)."""
    try:
        return dtype != "void" and np.dtype(dtype).kind in "biuf"
    except TypeError:
        return False


def _matches(value, sinfo) -> bool:
    """The folded value has the shape inference promised (a wrong fact must not fold)."""
    if isinstance(sinfo, TupleStructInfo):
        return isinstance(value, tuple) and len(value) == len(sinfo.fields) and all(
            _matches(v, f) for v, f in zip(value, sinfo.fields))
    if isinstance(sinfo, TensorStructInfo) and sinfo.values is not None:
        return np.shape(value) == tuple(int(d) for d in sinfo.values)
    if isinstance(sinfo, TensorStructInfo) and sinfo.ndim >= 0:
        return np.ndim(value) == sinfo.ndim
    return True


# Known leaves replace the vars bound to them (TVM inlines constants; shapes and prim values
# inlined too keep reshape(x, R.shape([...])) in the form the graph builder reads).
_INLINED = (Constant, ShapeExpr, PrimValue)


class _Folder(ExprMutator):
    def __init__(self, mod: IRModule | None):
        super().__init__(mod)
        self.mod = mod

    def visit_var_(self, var: Var):
        new = super().visit_var_(var)
        bound = self.lookup_binding(new)
        return bound if isinstance(bound, _INLINED) else new

    def visit_tuple_getitem_(self, item: TupleGetItem):
        item = self.visit_expr_post_order(item)
        tup = self._known(item.tuple_value) if isinstance(item, TupleGetItem) else None
        if isinstance(tup, Tuple) and isinstance(tup.fields[item.index], Constant):
            return tup.fields[item.index]
        return item

    def visit_call_(self, call: Call):
        call = self.visit_expr_post_order(call)
        if not isinstance(call, Call) or not self._foldable(call):
            return call
        known = [self._known(a) for a in call.args]
        if any(isinstance(a, Var) for a in known):
            return call  # the usual case, decided without raising NotConstant
        numpy_ref = _numpy_ref()
        try:
            values = [numpy_ref.expr_value(a) for a in known]
        except numpy_ref.NotConstant:
            return call
        return self._fold(call, values, numpy_ref)

    def _fold(self, call: Call, values: list, numpy_ref):
        try:
            value = numpy_ref.evaluate_call(call, values)
        except Exception as err:  # noqa: BLE001 - a failing reference must not break a model
            warnings.warn(f"FoldConstant: {call.op.name} was not folded: {err}", stacklevel=2)
            return call
        if not _matches(value, call.struct_info):
            warnings.warn(f"FoldConstant: {call.op.name} numpy reference gave shape "
                          f"{np.shape(value)}, inference says {call.struct_info}; not folded",
                          stacklevel=2)
            return call
        return value_to_expr(value, call.struct_info)

    def _foldable(self, call: Call) -> bool:
        if not isinstance(call.op, Op):
            return False
        op_def = call.op.op_def
        load_facts("numpy")
        # runtime ops (calls into other functions, runtime objects): not the op's value
        return (not op_def.runtime and "numpy" in op_def.facts
                and not is_impure(call, self.mod) and _static(call.struct_info)
                and _small(call.struct_info))

    def _known(self, expr):
        """A var's bound value when that value is constant-like, else the expr itself."""
        if isinstance(expr, Var):
            bound = self.lookup_binding(expr)
            if isinstance(bound, (Constant, ShapeExpr, PrimValue, Tuple)):
                return bound
        if isinstance(expr, Tuple):
            fields = [self._known(f) for f in expr.fields]
            if any(a is not b for a, b in zip(fields, expr.fields)):
                return Tuple(fields)
        return expr


def fold_constant(func: Function, mod: IRModule | None = None) -> Function:
    """``func`` with its constant subexpressions evaluated (see FoldConstant)."""
    folded = func if _nothing_to_fold(func) else _Folder(mod).visit_expr(func)
    return remove_all_unused(folded, mod)


_ARG_LEAVES = (Constant, ShapeExpr, PrimValue, rx.StringImm, rx.DataTypeImm)


def _nothing_to_fold(func: Function) -> bool:
    """Whether ``_Folder`` would return ``func`` itself, decided in one pass over the bindings
    instead of a rebuilding walk (a third of the time an imported 20k-op chain spends here):
    every binding binds an op call over leaves and vars, at least one of which is a param or
    bound to another call (so no call is all known), or aliases such a var, and no var is bound
    to a leaf to inline."""
    seq = func.body
    if not isinstance(seq, rx.SeqExpr) or not isinstance(seq.body, Var):
        return False
    computed = set(func.params)
    for block in seq.blocks:
        for binding in block.bindings:
            value = binding.value
            if type(binding) is not rx.VarBinding:
                return False
            if isinstance(value, Var) and value in computed:  # an output alias: gv = lv
                computed.add(binding.var)
                continue
            if type(value) is not Call or not isinstance(value.op, Op):
                return False
            unknown = False
            for arg in value.args:
                if isinstance(arg, Var):
                    if arg not in computed:
                        return False
                    unknown = True
                elif not isinstance(arg, _ARG_LEAVES):
                    return False
            if not unknown:
                return False
            computed.add(binding.var)
    return True


class FoldConstant(FunctionPass):
    """Evaluate calls on constants at compile time (TVM's ``relax.transform.FoldConstant``)."""

    def transform_function(self, func: Function, mod: IRModule, ctx: PassContext) -> Function:
        return fold_constant(func, mod)
