"""What a converter sees: the node (inputs as Relax exprs, attrs with defaults) and a context
that emits through the BlockBuilder, folding shape subgraphs on the way.

    def convert_gemm(g: Context, node: OnnxNode):
        a, b, c = node.inputs                  # optional inputs missing -> None
        y = g.emit(relax.op.matmul(a, b))      # struct info inferred by the BlockBuilder
        return y if c is None else g.emit(relax.op.add(y, c))
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from msc import relax
from msc.errors import UnsupportedOpError
from msc.limits import JointBudget
from msc.relax.expr import Call, Constant, Expr, Tuple, TupleGetItem
from msc.relax.struct_info import ShapeStructInfo, TensorStructInfo, TupleStructInfo
from msc.tir import expr as tir

from . import shape_fold
from .unroll_size import graph_size

__all__ = ["Context", "OnnxNode"]

_NESTED = (Call, Tuple, TupleGetItem)


@dataclass
class OnnxNode:
    """One ONNX node, normalized for its converter."""

    op_type: str
    name: str
    domain: str
    opset: int
    inputs: list  # Relax exprs; missing optional inputs are None (padded to the schema)
    attrs: dict  # every schema attribute: given value, default, or None
    num_outputs: int
    output_names: list = field(default_factory=list)

    def unsupported(self, why: str) -> UnsupportedOpError:
        """The error a converter raises for a case it cannot express (collected per node)."""
        return UnsupportedOpError(why, items=[{"op": self.op_type, "opset": self.opset,
                                               "node": self.name, "reason": why}])


class Context:
    """Emits converter output through the BlockBuilder; folds constants and shape values."""

    def __init__(self, bb: relax.BlockBuilder, subgraph=None, lookup=None,
                 budget: JointBudget | None = None):
        self.bb = bb
        self.budget = budget or JointBudget()  # joints emitted, against msc.limits
        self.subgraph = subgraph  # fn(GraphProto) -> outputs, converting it in place
        self.lookup = lookup  # fn(ONNX value name) -> its expr in scope, or None
        self.known: dict = {}  # var -> object array of PrimExprs (values of shape tensors)
        self._count = 0  # symbolic values bound at run time (runtime_ints)
        self.sizes: set = set()  # names of the vars that are dims (>= 0): the inputs' dims

    # ---- emitting -------------------------------------------------------------------------
    def emit(self, expr: Expr) -> Expr:
        """Bind ``expr`` (nested calls first), folding it when its inputs are known."""
        if isinstance(expr, Call):
            return self._emit_call(expr)
        if isinstance(expr, Tuple):
            return relax.Tuple([self.emit(f) for f in expr.fields])
        if isinstance(expr, TupleGetItem):
            inner = self.emit(expr.tuple_value)
            if isinstance(inner, Tuple):
                return inner.fields[expr.index]
            return self.bb.emit(TupleGetItem(inner, expr.index))
        return expr

    def _emit_call(self, call: Call) -> Expr:
        args = [self.emit(a) if isinstance(a, _NESTED) else a for a in call.args]
        if call.span is not None or any(a is not b for a, b in zip(args, call.args)):
            call = Call(call.op, args, call.attrs, call.sinfo_args)
        call = self.bb.normalize(call)
        folded = shape_fold.fold_constant_call(call)
        if folded is not None:
            return folded
        values = [shape_fold.as_known(a, self.known) for a in call.args]
        known = shape_fold.fold_symbolic_call(call, values, self.sizes)
        if known is not None and shape_fold.is_fully_const(known):
            return shape_fold.to_constant(known, call.struct_info.dtype)
        self.budget.spend(1, "converting the model")
        var = self.bb.emit(call)
        if known is not None:
            self.known[var] = known
        return var

    def emit_known(self, expr: Expr, values) -> Expr:
        """Emit an int tensor whose element values are known PrimExprs."""
        values = np.asarray(values, dtype=object)
        if shape_fold.is_fully_const(values):
            return shape_fold.to_constant(values, "int64")
        var = self.emit(expr)
        self.known[var] = values
        return var

    def reserve_unroll(self, node: OnnxNode, steps: int, body=None, per_step: int = 1):
        """Refuse unrolling ``node`` ``steps`` times when the copies would pass the joint
        limit, before building any (``body``: the GraphProto copied per step)."""
        if body is not None:
            per_step = graph_size(body, self._outer_int)
        self.budget.reserve(steps * max(per_step, 1), f"unrolling {node.op_type} {node.name!r} "
                            f"({steps} steps of {per_step} joints)", node=node.name)

    def _outer_int(self, name: str):
        expr = self.lookup(name) if self.lookup else None
        data = self.value(expr)
        return int(np.ravel(data)[0]) if data is not None and np.size(data) == 1 and \
            data.dtype.kind in "iu" else None

    # ---- reading values -------------------------------------------------------------------
    def value(self, expr) -> np.ndarray | None:
        """The numpy value of a constant input, else None."""
        return expr.data if isinstance(expr, Constant) else None

    def ints(self, expr) -> list | None:
        """A constant int input (scalar or 1-D) as a list of Python ints, else None."""
        data = self.value(expr)
        return None if data is None else [int(v) for v in np.ravel(data)]

    def known_values(self, expr) -> list | None:
        """A shape-like input's values as PrimExprs / ints (symbolic allowed), else None."""
        values = shape_fold.as_known(expr, self.known)
        if values is None:
            return None
        return [shape_fold.plain(v) for v in np.ravel(np.asarray(values, dtype=object))]

    def runtime_ints(self, expr, hint: str = "v") -> list | None:
        """A small int tensor's values: known ones, else symbolic vars bound at run time
        (``R.match_cast(R.tensor_to_shape(t), R.Shape([v0, v1]))``); None when its length
        is not static."""
        known = self.known_values(expr)
        if known is not None:
            return known
        sinfo = self.sinfo(expr)
        if sinfo.dtype not in ("int64", "int32") or sinfo.ndim > 1 or (
                sinfo.ndim == 1 and not sinfo.is_static):
            return None
        count = 1 if sinfo.ndim == 0 else int(sinfo.values[0])
        flat = relax.op.reshape(expr, [count]) if sinfo.ndim == 0 else expr
        if sinfo.dtype != "int64":
            flat = relax.op.astype(flat, "int64")
        shape = self.bb.emit(relax.op.tensor_to_shape(self.emit(flat)))
        names = [self._fresh(hint) for _ in range(count)]
        dims = [tir.Var(n, "int64") for n in names]
        self.bb.match_cast(shape, ShapeStructInfo(dims))
        if isinstance(expr, relax.Var):
            self.known[expr] = np.asarray(dims, dtype=object).reshape(
                () if sinfo.ndim == 0 else (count,))
        return dims

    def _fresh(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    # ---- struct info ----------------------------------------------------------------------
    @staticmethod
    def sinfo(expr) -> TensorStructInfo:
        sinfo = expr.struct_info
        if isinstance(sinfo, TupleStructInfo):
            raise UnsupportedOpError("expected a tensor, got a tuple value")
        return sinfo

    def ndim(self, expr) -> int:
        return self.sinfo(expr).ndim

    def dtype(self, expr) -> str:
        return self.sinfo(expr).dtype

    def shape(self, expr) -> tuple | None:
        """The input's dims (PrimExprs) from its struct info, or None when unknown."""
        return self.sinfo(expr).values

    @staticmethod
    def const(value, dtype: str | None = None) -> Constant:
        return relax.const(value, dtype)
