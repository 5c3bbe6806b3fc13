"""Helpers shared by the legalization rules: call attributes, output struct info, broadcasting,
axes, and the registration of rules as the op fact ``"legalize"``."""

from __future__ import annotations

from collections.abc import Callable

from ...errors import UnsupportedOpError
from ...relax.expr import Attrs
from ...relax.op.registry import attach, attrs_with_defaults
from ...relax.struct_info import TensorStructInfo, TupleStructInfo
from ...tir import expr as E
from . import te
from .te import Builder, Tensor, idx

RULES: dict[str, Callable] = {}


def rule(*ops: str):
    """Decorator: ``fn(call) -> PrimFunc`` becomes the "legalize" fact of ``ops``."""
    def register(fn: Callable) -> Callable:
        for op in ops:
            attach(op, "legalize", fn)
            RULES[op] = fn
        return fn
    return register


def attrs(call) -> Attrs:
    """The call's attrs with the op's AttrDef defaults filled in: rules never repeat a default."""
    return attrs_with_defaults(call)


def op_name(call) -> str:
    return call.op.name.removeprefix("relax.")


def outputs(call) -> list[TensorStructInfo]:
    """The call's output tensors (known shapes required)."""
    sinfo = call.struct_info
    fields = sinfo.fields if isinstance(sinfo, TupleStructInfo) else [sinfo]
    if not all(isinstance(f, TensorStructInfo) and f.values is not None for f in fields):
        raise UnsupportedOpError("cannot legalize an op whose output shape is unknown",
                                 op=op_name(call))
    return list(fields)


def output(call) -> TensorStructInfo:
    return outputs(call)[0]


def inputs(call) -> tuple[Builder, list[Tensor]]:
    b = Builder.for_call(call)
    return b, b.inputs


def axes_of(axis, ndim: int) -> list[int]:
    """TVM's axis attr (None: all, an int, a list) normalized to sorted non-negative axes."""
    if axis is None:
        return list(range(ndim))
    axis = [axis] if isinstance(axis, int) else list(axis)
    return sorted({int(a) % ndim for a in axis}) if ndim else []


def broadcast(t: Tensor, ivars, out_dims=None) -> E.PrimExpr:
    """``t`` read at output position ``ivars`` under numpy broadcasting (right-aligned).

    With the output's ``out_dims``, a symbolic dim of ``t`` that is not the output's may be 1
    at run time (a mask expanded to a shape computed by the model): it is read at
    ``dim == 1 ? 0 : i``."""
    lead = len(ivars) - t.ndim
    index = []
    for k, dim in enumerate(t.shape):
        out_var = ivars[lead + k]
        if isinstance(dim, E.IntImm):
            index.append(idx(0) if dim.value == 1 else out_var)
        elif out_dims is not None and dim != out_dims[lead + k]:
            index.append(te.select(E.BinaryOp("EQ", dim, idx(1)), idx(0), out_var))
        else:
            index.append(out_var)
    return t[tuple(index)]


def acc_dtype(dtype: str) -> str:
    """Accumulators of 16-bit floats are float32 (the sum of 4096 halves would lose bits)."""
    return "float32" if dtype in ("float16", "bfloat16") else dtype


def in_bounds(index: E.PrimExpr, dim) -> E.PrimExpr:
    """``0 <= index and index < dim``, in the form the compiler's loop splitting reads."""
    lo = E.BinaryOp("LE", idx(0), index)
    return E.BinaryOp("And", lo, E.BinaryOp("LT", index, idx(dim)))


def all_of(conds: list) -> E.PrimExpr | None:
    result = None
    for c in conds:
        result = c if result is None else E.BinaryOp("And", result, c)
    return result


def size_of(shape) -> E.PrimExpr:
    total = idx(1)
    for d in shape:
        total = E.mul(total, idx(d))
    return total


def float_of(value: E.PrimExpr, dtype: str) -> E.PrimExpr:
    """An int expression as a float of ``dtype`` (a constant folds)."""
    if isinstance(value, E.IntImm):
        return te.const(value.value, dtype)
    return E.Cast(dtype, value)


def is_const(d, value: int | None = None) -> bool:
    """Whether dim ``d`` is a constant (equal to ``value`` when given)."""
    return isinstance(d, E.IntImm) and (value is None or d.value == value)


def div(a, b) -> E.PrimExpr:
    return E.binary("Div", a, b)


def prim_call(name: str, *args) -> E.PrimExpr:
    """A call of a math intrinsic (exp, floor, ...) in the dtype of its first argument."""
    return E.PrimCall(name, list(args), args[0].dtype)


def clip_index(k: E.PrimExpr, n) -> E.PrimExpr:
    """An int64 index clamped into ``[0, n)``."""
    return E.min(E.max(k, idx(0)), E.sub(idx(n), idx(1)))
