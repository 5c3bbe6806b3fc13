"""Constant folding of shape subgraphs while the ONNX graph is converted.

Exported CNNs compute their reshape targets at run time (``Shape -> Gather -> Unsqueeze ->
Concat -> Reshape``). Two folds make those targets static, or symbolic over named dims:

* a call whose arguments are all constants is evaluated with the ops' numpy facts;
* a call on *known values* (int tensors whose elements are known PrimExprs, e.g. the result of
  ``Shape`` on a ``(n, 3, 224, 224)`` tensor is ``[n, 3, 224, 224]``) is evaluated on numpy
  object arrays of PrimExprs; shape-manipulation ops and integer arithmetic only.

    fold_constant_call(call)                       # Constant or None
    fold_symbolic_call(call, [values_or_None...])  # object array or None

Only folds of shape-like values happen here; frontends compute no other shapes.
"""

from __future__ import annotations

import numpy as np

from msc.relax.expr import Call, Constant, PrimValue, ShapeExpr, Tuple, Var
from msc.relax.op.facts import load_facts
from msc.relax.op.registry import Op
from msc.relax.struct_info import TensorStructInfo
from msc.tir import expr as tir

__all__ = ["as_known", "fold_constant_call", "fold_symbolic_call", "is_fully_const"]

# A folded constant may be larger than its inputs only up to this many elements
# (ConstantOfShape of a huge shape stays a runtime op).
_MAX_CREATED = 1 << 20


def _numpy_ref():
    load_facts("numpy")
    from msc.relax.op import numpy_ref  # its evaluation helpers; loaded on first use

    return numpy_ref


def _leaf_value(expr):
    """Compile-time value of a constant-like argument, else raises NotConstant."""
    return _numpy_ref().expr_value(expr)


def _numel(sinfo) -> int | None:
    if not isinstance(sinfo, TensorStructInfo) or not sinfo.is_static:
        return None
    return int(np.prod([int(d) for d in sinfo.values], dtype=np.int64))


def _foldable_op(call: Call) -> bool:
    if not isinstance(call.op, Op):
        return False
    load_facts("numpy")
    return "numpy" in call.op.op_def.facts


def fold_constant_call(call: Call) -> Constant | None:
    """Evaluate a normalized call whose arguments are all constants; None if it cannot."""
    if not _foldable_op(call) or not isinstance(call.struct_info, TensorStructInfo):
        return None
    if any(isinstance(a, Var) for a in call.args):
        return None  # the usual case, decided without raising NotConstant
    numpy_ref = _numpy_ref()
    try:
        values = [_leaf_value(a) for a in call.args]
    except numpy_ref.NotConstant:
        return None
    numel = _numel(call.struct_info)
    if numel is None or numel > max(_MAX_CREATED, _args_numel(values)):
        return None
    try:
        value = numpy_ref.evaluate_call(call, values)
    except Exception:  # noqa: BLE001 - an unfoldable call simply stays a runtime op
        return None
    if np.shape(value) != tuple(int(d) for d in call.struct_info.values):
        return None
    return Constant(np.asarray(value, order="C"))


def _args_numel(values) -> int:
    return sum(np.size(v) for v in values if isinstance(v, np.ndarray))


# --------------------------------------------------------------------------------------------
# Known values: int tensors whose elements are PrimExprs.

def as_known(expr, known: dict):
    """Known values of an argument: a small int Constant's data, a recorded var's values, a
    ShapeExpr / PrimValue, a tuple of known values; None when unknown."""
    if isinstance(expr, Constant):
        data = expr.data
        return data if data.dtype.kind in "iub" and data.size <= 64 else None
    if isinstance(expr, Tuple):
        fields = [as_known(f, known) for f in expr.fields]
        return None if any(f is None for f in fields) else tuple(fields)
    if isinstance(expr, (ShapeExpr, PrimValue)):
        try:
            return _leaf_value(expr)
        except _numpy_ref().NotConstant:
            return tuple(expr.values) if isinstance(expr, ShapeExpr) else None
    return known.get(expr)


def is_fully_const(values) -> bool:
    return all(tir.as_int(tir.convert(v)) is not None for v in np.ravel(values))


def fold_symbolic_call(call: Call, arg_values: list, sizes=frozenset()):
    """Evaluate a shape-manipulation / integer call on known values; None if unsupported.
    ``sizes``: names of the symbolic vars known to be sizes (>= 0), which decide
    comparisons such as ``seq == -1`` (False)."""
    if not isinstance(call.op, Op) or any(v is None for v in arg_values):
        return None
    name = call.op.op_def.name
    if name not in _SYMBOLIC and name not in _COMPARE:
        return None
    sinfo = call.struct_info
    if not isinstance(sinfo, TensorStructInfo) or not _exact_dtype(name, sinfo.dtype):
        return None
    try:
        if name in _COMPARE:
            out = _compare(_COMPARE[name], arg_values, sizes)
        else:
            out = _SYMBOLIC[name](call, arg_values)
    except Exception:  # noqa: BLE001 - not foldable symbolically: stays a runtime op
        return None
    return None if out is None else np.asarray(out, dtype=object)


def _exact_dtype(op: str, dtype: str) -> bool:
    """Known values stay exact integers: int results, ints cast to float (Range bounds), or
    the booleans of a decided comparison."""
    return dtype in ("int64", "int32") or (op == "astype" and dtype.startswith("float")) or (
        op in _COMPARE and dtype == "bool")


def _arith(fn):
    """An integer binary op on PrimExpr elements."""
    def evaluate(call: Call, values: list):
        a, b = (_objects(v) for v in values)
        return np.vectorize(fn, otypes=[object])(a, b)

    return evaluate


def _astype(call: Call, values: list):
    return np.asarray(values[0], dtype=object)


def _concat(call: Call, values: list):
    fact = call.op.op_def.facts["numpy"]
    return fact([tuple(_objects(t) for t in values[0])], call.attrs)


def _moved(call: Call, values: list):
    """An op that only moves or picks elements: its numpy fact works on PrimExprs too."""
    return call.op.op_def.facts["numpy"]([_objects(values[0]), *values[1:]], call.attrs)


def _where(call: Call, values: list):
    """``where`` over a decided condition picks known values (the -1 -> 1 step of torch's
    exported ``expand``: ``Where(Equal(shape, -1), 1, shape)``)."""
    cond = np.asarray(values[0])
    if cond.dtype == object or cond.dtype.kind not in "bi":
        return None
    return np.where(cond.astype(bool), _objects(values[1]), _objects(values[2]))


# Ops folded over PrimExpr elements (all of them move or combine integers exactly) -> how.
# Not an op fact: the ops this folder's own symbolic evaluator implements.
_SYMBOLIC = {
    "add": _arith(lambda a, b: a + b), "subtract": _arith(lambda a, b: a - b),
    "multiply": _arith(lambda a, b: a * b), "divide": _arith(tir.floordiv),
    "floor_divide": _arith(tir.floordiv),
    "maximum": _arith(tir.max), "minimum": _arith(tir.min),
    "astype": _astype, "concat": _concat,
    "take": _moved, "expand_dims": _moved, "squeeze": _moved, "reshape": _moved,
    "strided_slice": _moved, "permute_dims": _moved, "broadcast_to": _moved, "where": _where,
}


# Comparisons of known values -> what the difference's sign must satisfy.
_COMPARE = {"equal": lambda d: d == 0, "not_equal": lambda d: d != 0,
            "less": lambda d: d < 0, "less_equal": lambda d: d <= 0,
            "greater": lambda d: d > 0, "greater_equal": lambda d: d >= 0}


def _compare(test, values: list, sizes) -> np.ndarray | None:
    """Element-wise comparison, decided when every pair's difference is a constant, or
    when one side is a size (>= 0) and the other a negative constant (a dim is never -1).
    None when some pair cannot be decided."""
    a, b = np.broadcast_arrays(_objects(values[0]), _objects(values[1]))
    out = np.empty(a.shape, dtype=bool)
    for k, (x, y) in enumerate(zip(a.flat, b.flat)):
        decided = _decide(test, tir.convert(x), tir.convert(y), sizes)
        if decided is None:
            return None
        out.flat[k] = decided
    return out


def _decide(test, x, y, sizes) -> bool | None:
    diff = tir.sub(x, y)
    if diff.is_const:
        return bool(test(diff.value))
    for size, const, sign in ((x, y, 1), (y, x, -1)):
        if const.is_const and const.value < 0 and is_size(size, sizes):
            # size - const > 0: every test on a sign of a positive difference is decided
            return bool(test(sign))
    return None


def is_size(e, sizes) -> bool:
    """``e`` is provably >= 0: non-negative constants and size vars under +, *, floordiv,
    min and max."""
    if isinstance(e, tir.IntImm):
        return e.value >= 0
    if isinstance(e, tir.Var):
        return e.name in sizes
    if isinstance(e, tir.BinaryOp) and e.op in ("Add", "Mul", "FloorDiv", "Min"):
        return is_size(e.a, sizes) and is_size(e.b, sizes)
    if isinstance(e, tir.BinaryOp) and e.op == "Max":
        return is_size(e.a, sizes) or is_size(e.b, sizes)
    return False


def _objects(values) -> np.ndarray:
    """Values as an object array of Python ints / PrimExprs (numpy ints would overflow)."""
    arr = np.asarray(values)
    return arr.astype(object) if arr.dtype != object else arr


def plain(value):
    """A known element as a Python int when constant, else its PrimExpr."""
    if isinstance(value, (int, np.integer)):
        return int(value)
    expr = tir.convert(value)
    return expr.value if expr.is_const else expr


def to_constant(values, dtype: str) -> Constant:
    """Fully constant known values as an int Constant."""
    flat = [tir.as_int(tir.convert(v)) for v in np.ravel(values)]
    return Constant(np.asarray(flat, dtype=dtype).reshape(np.shape(values)))
