"""``tvm.te`` for msc: describe a computation as tensor expressions, get a TensorIR PrimFunc.

    from msc import te
    A = te.placeholder((128, 128), "float32", name="A")
    B = te.placeholder((128, 128), "float32", name="B")
    k = te.reduce_axis((0, 128), "k")
    Y = te.compute((128, 128), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((128, 128), lambda i, j: te.max(Y[i, j], 0), name="C")
    func = te.create_prim_func([A, B, C])        # params A, B, C; Y becomes a local buffer

Tensors are descriptions: ``create_prim_func`` lays each stage out as one block (a loop nest
over the output shape; a reduction gets its init), in the order the stages feed each other.
The same builder writes the loop nests of msc's own legalization rules.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence

from .backend.legalize import te as _te
from .errors import ValidationError
from .tir import expr as E
from .tir.expr import const
from .tir.function import PrimFunc

__all__ = ["Tensor", "compute", "const", "create_prim_func", "max", "min", "placeholder",
           "reduce_axis", "sum", "var"]

_REALIZING: list = []  # (builder, {id(tensor): builder tensor}) while create_prim_func runs


class Tensor:
    """A placeholder (``fcompute`` None) or a computed stage; ``t[i, j]`` reads an element."""

    def __init__(self, shape, dtype: str, name: str, fcompute: Callable | None = None):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.name = name
        self.fcompute = fcompute

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices):
        if not _REALIZING:
            raise ValidationError(f"te tensor {self.name!r} is read outside te.compute",
                                  key=self.name, hint="index tensors inside a te.compute "
                                  "lambda; te.create_prim_func builds the loops")
        indices = indices if isinstance(indices, tuple) else (indices,)
        return _realize(self)[tuple(_var(i) for i in indices)]

    def __repr__(self) -> str:
        kind = "placeholder" if self.fcompute is None else "compute"
        return f"te.Tensor({self.name}, {self.shape}, {self.dtype}, {kind})"


class ReduceAxis:
    """A reduction variable over ``range(0, extent)`` (TVM's ``te.reduce_axis`` IterVar);
    ``axis.var`` is the index it stands for."""

    def __init__(self, name: str, extent):
        self.loop_name = name
        self.extent = extent
        self.var = E.Var("v_" + name, _te.INDEX)

    def __add__(self, o): return self.var + _var(o)
    def __radd__(self, o): return _var(o) + self.var
    def __sub__(self, o): return self.var - _var(o)
    def __rsub__(self, o): return _var(o) - self.var
    def __mul__(self, o): return self.var * _var(o)
    def __rmul__(self, o): return _var(o) * self.var
    def __floordiv__(self, o): return self.var // _var(o)
    def __mod__(self, o): return self.var % _var(o)

    def __repr__(self) -> str:
        return f"te.reduce_axis((0, {self.extent}), {self.loop_name!r})"


def _var(value):
    return value.var if isinstance(value, ReduceAxis) else value


def var(name: str = "tindex", dtype: str = "int32") -> E.Var:
    """A symbolic size (``n = te.var("n", dtype="int64")``) for shapes of placeholders and
    computes; it becomes a var of the function's signature."""
    return E.Var(name, dtype)


def placeholder(shape, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of the function."""
    return Tensor(shape, dtype, name)


def compute(shape, fcompute: Callable, name: str = "compute", tag: str = "",
            attrs: dict | None = None) -> Tensor:
    """``out[i...] = fcompute(i...)``; a ``te.sum``/``te.max``/``te.min`` value with ``axis``
    makes it a reduction."""
    return Tensor(shape, "", name, fcompute)


def reduce_axis(dom, name: str = "rv") -> ReduceAxis:
    """A reduction axis over ``dom = (0, extent)``."""
    lo, hi = dom if isinstance(dom, (tuple, list)) else (0, dom)
    if lo != 0:
        raise ValidationError(f"te.reduce_axis {name!r} starts at {lo}; msc's reductions start "
                              "at 0", key=name, hint="shift the index instead: (0, hi - lo)")
    return ReduceAxis(name, hi)


def sum(expr, axis, where=None, init=None):
    """The sum of ``expr`` over the reduce ``axis`` (one axis or a list)."""
    _no_extras("sum", where, init)
    return _te.sum(expr, _vars(axis))


def max(expr, axis=None, where=None, init=None):
    """``te.max(a, b)``: the larger of two values; ``te.max(expr, axis=k)``: a reduction."""
    if _is_axes(axis):
        _no_extras("max", where, init)
        return _te.reduce_max(expr, _vars(axis))
    return _te.max(*_same_dtype(expr, axis))


def min(expr, axis=None, where=None, init=None):
    """``te.min(a, b)`` or the minimum of ``expr`` over ``axis``."""
    if _is_axes(axis):
        _no_extras("min", where, init)
        return _te.reduce_min(expr, _vars(axis))
    return _te.min(*_same_dtype(expr, axis))


def create_prim_func(ops: Sequence[Tensor], index_dtype_override: str | None = None) -> PrimFunc:
    """The PrimFunc computing the computed tensors of ``ops`` from its placeholders: params
    in the order of ``ops``; stages not in ``ops`` become local buffers."""
    ops = list(ops)
    builder, done = _te.Builder(), {}
    _REALIZING.append((builder, done))
    try:
        for t in ops:
            if t.fcompute is None:
                done[id(t)] = builder.placeholder(t.shape, t.dtype, t.name)
                builder.inputs.append(done[id(t)])
        outputs = [_realize(t) for t in ops if t.fcompute is not None]
    finally:
        _REALIZING.pop()
    return builder.prim_func(outputs, "main")


def _realize(t: Tensor):
    builder, done = _REALIZING[-1]
    if id(t) in done:
        return done[id(t)]
    if t.fcompute is None:
        raise ValidationError(f"te.create_prim_func: placeholder {t.name!r} is read but not in "
                              "the argument list", key=t.name,
                              hint="pass every placeholder the computation reads")
    for axis in _axes_of(t):
        builder.reduce_axis(axis.extent, axis.loop_name)
    done[id(t)] = builder.compute(t.shape, t.fcompute, t.name, axis="i")
    return done[id(t)]


def _axes_of(t: Tensor) -> list:
    """The reduce axes the stage's lambda closes over (registered before it runs)."""
    cells = [c.cell_contents for c in (t.fcompute.__closure__ or ())]
    names = t.fcompute.__code__.co_names
    found = cells + [t.fcompute.__globals__.get(n) for n in names]
    # a lambda built by a helper may hold its axes in a container (topi's reductions)
    for value in list(found):
        if isinstance(value, dict):
            found += list(value.values())
        elif isinstance(value, (list, tuple)):
            found += list(value)
    return list({id(v): v for v in found if isinstance(v, ReduceAxis)}.values())


def _vars(axis) -> list:
    return [a.var for a in (axis if isinstance(axis, (list, tuple)) else [axis])]


def _is_axes(axis) -> bool:
    items = axis if isinstance(axis, (list, tuple)) else [axis]
    return bool(items) and builtins.all(isinstance(a, ReduceAxis) for a in items)


def _same_dtype(a, b) -> tuple:
    if isinstance(a, E.PrimExpr) and not isinstance(b, E.PrimExpr):
        return a, _te.const(b, a.dtype)
    if isinstance(b, E.PrimExpr) and not isinstance(a, E.PrimExpr):
        return _te.const(a, b.dtype), b
    return a, b


def _no_extras(name: str, where, init) -> None:
    if where is not None or init is not None:
        raise ValidationError(f"te.{name}: where= and init= are not supported", key=name,
                              hint="write the condition into the value with te.if_then_else")
