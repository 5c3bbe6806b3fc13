"""A small tensor-expression builder: legalization rules write loop nests as expressions.

A :class:`Builder` is made for one op call. Its placeholders are the call's tensor arguments;
``compute`` adds one s_tir block (a loop nest over the output shape) per stage, ``reduce``-style
values (:func:`sum`, :func:`max`, ...) become reduction blocks with an init; ``prim_func``
returns the PrimFunc TVM's LegalizeOps would print (``T.prim_func(private=True, s_tir=True)``,
a root block allocating the intermediate stages)::

    b = Builder.for_call(call)                       # b.inputs: placeholders for the args
    x, = b.inputs
    k = b.reduce_axis(x.shape[1], "k")
    red = b.compute((x.shape[0],), lambda i: te.sum(x[i, k], k), "x_red")
    func = b.prim_func([red], "sum")
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ...errors import UnsupportedOpError
from ...relax.expr import Var as RelaxVar
from ...relax.struct_info import PrimStructInfo, ShapeStructInfo, TensorStructInfo, TupleStructInfo
from ...tir import expr as E
from ...tir.function import (
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
    IterVar,
    LetStmt,
    PrimFunc,
    SBlock,
    expr_children,
    seq,
)

__all__ = ["Builder", "Reduce", "Tensor", "cast", "const", "idx", "if_then_else", "is_float",
           "max", "max_value", "min", "min_value", "prod", "select", "sum"]

INDEX = "int64"


def is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def idx(value) -> E.PrimExpr:
    """An index or extent as an int64 expression."""
    if isinstance(value, E.PrimExpr):
        return value if value.dtype == INDEX else E.Cast(INDEX, value)
    return E.IntImm(int(value), INDEX)


def const(value, dtype: str) -> E.PrimExpr:
    """A typed scalar constant (``T.float32(0.5)``, ``T.int8(1)``, ``T.bool(True)``)."""
    if is_float(dtype):
        return E.FloatImm(float(value), dtype)
    if dtype == "bool":
        return E.IntImm(int(bool(value)), "bool")
    return E.IntImm(int(value), dtype)


def _limits(dtype: str):
    if is_float(dtype):
        return float("-inf"), float("inf")
    if dtype == "bool":
        return 0, 1
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def min_value(dtype: str) -> E.PrimExpr:
    """The identity of max: -inf for floats, the smallest value for ints."""
    return const(_limits(dtype)[0], dtype)


def max_value(dtype: str) -> E.PrimExpr:
    return const(_limits(dtype)[1], dtype)


def cast(value: E.PrimExpr, dtype: str) -> E.PrimExpr:
    if value.dtype == dtype:
        return value
    if isinstance(value, (E.IntImm, E.FloatImm)):
        return const(value.value, dtype)
    return E.Cast(dtype, value)


def select(cond, t, f) -> E.PrimExpr:
    """``T.Select``: both sides are evaluated."""
    return E.Select(cond, t, f)


def if_then_else(cond, t, f) -> E.PrimExpr:
    """``T.if_then_else``: only the taken side is evaluated (guards out-of-range loads)."""
    if isinstance(cond, E.IntImm):
        return t if cond.value else f
    return E.PrimCall("if_then_else", [cond, t, f], t.dtype)


def max(a, b) -> E.PrimExpr:
    return E.BinaryOp("Max", a, b)


def min(a, b) -> E.PrimExpr:
    return E.BinaryOp("Min", a, b)


# ------------------------------------------------------------------------------- reductions

@dataclass(frozen=True)
class Reduce:
    """``combiner(acc, value)`` over ``axes``, starting from ``init``."""

    combiner: str  # Add | Mul | Max | Min
    value: E.PrimExpr
    axes: tuple
    init: E.PrimExpr


def _reduce(combiner: str, init: Callable[[str], E.PrimExpr]):
    def make(value: E.PrimExpr, axis) -> Reduce:
        axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
        return Reduce(combiner, value, axes, init(value.dtype))
    return make


sum = _reduce("Add", lambda d: const(0, d))
prod = _reduce("Mul", lambda d: const(1, d))
reduce_max = _reduce("Max", min_value)
reduce_min = _reduce("Min", max_value)


def combine(kind: str, acc: E.PrimExpr, value: E.PrimExpr) -> E.PrimExpr:
    return E.BinaryOp(kind, acc, value)


# ---------------------------------------------------------------------------------- tensors

class Tensor:
    """A buffer with the stage that fills it (None for inputs): ``t[i, j]`` loads."""

    __slots__ = ("buffer",)

    def __init__(self, buffer: Buffer):
        self.buffer = buffer

    @property
    def shape(self) -> tuple:
        return self.buffer.shape

    @property
    def dtype(self) -> str:
        return self.buffer.dtype

    @property
    def name(self) -> str:
        return self.buffer.name

    @property
    def ndim(self) -> int:
        return self.buffer.ndim

    def __getitem__(self, indices) -> BufferLoad:
        indices = indices if isinstance(indices, tuple) else (indices,)
        return BufferLoad(self.buffer, tuple(idx(i) for i in indices))

    def __repr__(self) -> str:
        return f"Tensor({self.name}, {self.shape}, {self.dtype})"


@dataclass
class _Stage:
    stmt: object
    outputs: tuple


@dataclass
class Builder:
    """Stages of one prim func, in the order they run."""

    inputs: list = field(default_factory=list)
    stages: list = field(default_factory=list)
    _names: set = field(default_factory=set)
    _raxes: dict = field(default_factory=dict)

    @classmethod
    def for_call(cls, call) -> Builder:
        """Placeholders for the tensor arguments of a Relax call, named after its vars."""
        b = cls()
        for i, sinfo in enumerate(tensor_args(call)):
            b.inputs.append(b.placeholder(sinfo.values, sinfo.dtype, _arg_name(call, i)))
        return b

    # -- naming ---------------------------------------------------------------------------
    def unique(self, name: str) -> str:
        base, n = name, 0
        while name in self._names:
            n += 1
            name = f"{base}_{n}"
        self._names.add(name)
        return name

    def placeholder(self, shape, dtype: str, name: str) -> Tensor:
        return Tensor(Buffer(self.unique(name), tuple(idx(d) for d in shape), dtype))

    def reduce_axis(self, extent, name: str) -> E.Var:
        """A reduction var ``v_<name>`` looping over ``range(extent)`` in loop ``<name>``."""
        var = E.Var("v_" + name, INDEX)
        self._raxes[var.name] = (name, idx(extent))
        return var

    # -- stages ---------------------------------------------------------------------------
    def compute(self, shape, fcompute: Callable, name: str, *, dtype: str | None = None,
                axis: str = "ax", attrs: dict | None = None) -> Tensor:
        """A stage ``out[i...] = fcompute(i...)``; a :class:`Reduce` value makes it a reduction.
        Loop vars are ``{axis}0, {axis}1...`` (``i`` gives TVM's ``i0, i1``)."""
        shape = tuple(idx(d) for d in shape)
        loops = [E.Var(f"{axis}{k}", INDEX) for k in range(len(shape))]
        ivars = [E.Var("v_" + v.name, INDEX) for v in loops]
        value = fcompute(*ivars)
        red = value if isinstance(value, Reduce) else None
        out_dtype = dtype or (red.value.dtype if red else value.dtype)
        block = self.unique(name)
        out = Tensor(Buffer(block, shape, out_dtype))
        store_at = out[tuple(ivars)]
        if red is None:
            body, init = BufferStore(out.buffer, cast(value, out_dtype), store_at.indices), None
            spatial = list(zip(loops, ivars, shape))
            stmt = _nest(block, spatial, [], body, None, [value], out, attrs)
        else:
            update = combine(red.combiner, store_at, cast(red.value, out_dtype))
            body = BufferStore(out.buffer, update, store_at.indices)
            init = BufferStore(out.buffer, cast(red.init, out_dtype), store_at.indices)
            stmt = _nest(block, list(zip(loops, ivars, shape)), self._ranges(red.axes), body,
                         init, [red.value], out, attrs)
        self.stages.append(_Stage(stmt, (out,)))
        return out

    def output(self, shape, dtype: str, name: str) -> Tensor:
        """A buffer that several :meth:`store` stages fill (concat, stack)."""
        return Tensor(Buffer(self.unique(name), tuple(idx(d) for d in shape), dtype))

    def store(self, out: Tensor, shape, findex: Callable, fvalue: Callable, name: str, *,
              axis: str = "ax") -> None:
        """A stage ``out[findex(i...)] = fvalue(i...)`` over ``shape`` (a slice of ``out``)."""
        shape = tuple(idx(d) for d in shape)
        loops = [E.Var(f"{axis}{k}", INDEX) for k in range(len(shape))]
        ivars = [E.Var("v_" + v.name, INDEX) for v in loops]
        at = out[tuple(findex(*ivars))]
        value = cast(fvalue(*ivars), out.dtype)
        body = BufferStore(out.buffer, value, at.indices)
        stmt = _nest(self.unique(name), list(zip(loops, ivars, shape)), [], body, None, [value],
                     out, None, write_at=at.indices)
        self.stages.append(_Stage(stmt, (out,)))

    def block(self, name: str, shape, outputs: Sequence[tuple], fbody: Callable, *,
              reduce_axes=(), axis: str = "ax", attrs: dict | None = None) -> list[Tensor]:
        """A general stage writing several outputs: ``outputs`` is ``[(name, dtype)]``;
        ``fbody(ivars, outs) -> (init stmt | None, body stmt)``, stmts built from the Tensors."""
        shape = tuple(idx(d) for d in shape)
        loops = [E.Var(f"{axis}{k}", INDEX) for k in range(len(shape))]
        ivars = [E.Var("v_" + v.name, INDEX) for v in loops]
        outs = [Tensor(Buffer(self.unique(n), shape, d)) for n, d in outputs]
        init, body = fbody(ivars, outs)
        stmt = _nest(self.unique(name), list(zip(loops, ivars, shape)),
                     self._ranges(reduce_axes), body, init, _stmt_values(body), outs, attrs)
        self.stages.append(_Stage(stmt, tuple(outs)))
        return outs

    def _ranges(self, axes) -> list:
        return [(v, *self._raxes[v.name]) for v in axes]

    # -- result ---------------------------------------------------------------------------
    def prim_func(self, outputs: Sequence[Tensor], name: str) -> PrimFunc:
        """The PrimFunc with params ``inputs + outputs``; other stages become root allocs."""
        out_names = {t.name for t in outputs}
        allocs = list({t.name: t.buffer for s in self.stages for t in s.outputs
                       if t.name not in out_names}.values())
        body = seq(s.stmt for s in self.stages)
        root = SBlock("root", body, alloc_buffers=tuple(allocs))
        params = [t.buffer for t in self.inputs] + [t.buffer for t in outputs]
        return PrimFunc(params, root, {"tirx.noalias": True}, name=name, private=True,
                        s_tir=True)


def _stmt_values(stmt) -> list:
    from ...tir.function import SeqStmt

    if isinstance(stmt, SeqStmt):
        return [v for s in stmt.stmts for v in _stmt_values(s)]
    if isinstance(stmt, (BufferStore, LetStmt)):
        return [stmt.value]
    return []


def _nest(name: str, spatial: list, raxes: list, body, init, values: list, outs, attrs,
          write_at=None):
    """Loops (spatial, then reduce) around one block."""
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    iter_vars = [IterVar(v, idx(0), ext, "spatial", loop) for loop, v, ext in spatial]
    loops = [(loop, ext) for loop, _, ext in spatial]
    for var, loop_name, extent in raxes:
        loop = E.Var(loop_name, INDEX)
        iter_vars.append(IterVar(var, idx(0), extent, "reduce", loop))
        loops.append((loop, extent))
    ivs = [iv.var for iv in iter_vars[:len(spatial)]]
    written = {o.name for o in outs}
    reads = _regions(values, exclude=written)
    at = write_at if write_at is not None else ivs
    writes = tuple(BufferRegion(o.buffer, tuple((v, None) for v in at)) for o in outs)
    stmt = SBlock(name, body, tuple(iter_vars), reads, writes, init,
                  annotations=dict(attrs or {}))
    for loop, ext in reversed(loops):
        stmt = For(loop, idx(0), ext, "serial", stmt)
    return stmt


def _loads(e, found: list) -> None:
    if isinstance(e, BufferLoad):
        found.append(e)
    for child in expr_children(e):
        _loads(child, found)


def _regions(values: list, exclude: set) -> tuple:
    """``T.reads``: each buffer once, a point when all its accesses agree, else the dims that
    differ span the whole buffer."""
    found: list = []
    for v in values:
        _loads(v, found)
    by_buffer: dict = {}
    for load in found:
        if load.buffer.name not in exclude:
            by_buffer.setdefault(load.buffer.name, []).append(load)
    regions = []
    for loads in by_buffer.values():
        buf = loads[0].buffer
        region = []
        for d, first in enumerate(loads[0].indices):
            same = all(ld.indices[d] == first for ld in loads)
            region.append((first, None) if same else (idx(0), buf.shape[d]))
        regions.append(BufferRegion(buf, tuple(region)))
    return tuple(regions)


# ------------------------------------------------------------------------ call arguments

def tensor_args(call) -> list[TensorStructInfo]:
    """Struct info of a call's tensor arguments in order (tuples of tensors flattened).
    Raises UnsupportedOpError when one has an unknown shape (nothing to loop over)."""
    out = []
    for arg in call.args:
        sinfo = arg.struct_info
        fields = sinfo.fields if isinstance(sinfo, TupleStructInfo) else [sinfo]
        for s in fields:
            if isinstance(s, TensorStructInfo):
                if s.values is None:
                    raise UnsupportedOpError("cannot legalize a tensor of unknown shape",
                                             op=call.op.name)
                out.append(s)
    return out


def _arg_name(call, i: int) -> str:
    """TVM names placeholders after the Relax vars passed (``x``, ``lv1``); else A, B, ..."""
    flat = []
    for arg in call.args:
        sinfo = arg.struct_info
        if isinstance(sinfo, TupleStructInfo):
            fields = getattr(arg, "fields", None) or [None] * len(sinfo.fields)
            flat += [f for f, s in zip(fields, sinfo.fields) if isinstance(s, TensorStructInfo)]
        elif isinstance(sinfo, TensorStructInfo):
            flat.append(arg)
    var = flat[i] if i < len(flat) and isinstance(flat[i], RelaxVar) else None
    name = re.sub(r"\W", "_", var.name_hint) if var is not None else ""
    return name if name and not name[0].isdigit() else "ABCDEFGHIJ"[i % 10]


def shape_arg(call, i: int) -> tuple | None:
    """Values of a shape (or tuple-of-prim) argument, from its struct info."""
    s = call.args[i].struct_info
    if isinstance(s, ShapeStructInfo):
        return s.values
    if isinstance(s, TupleStructInfo) and all(isinstance(f, PrimStructInfo) for f in s.fields):
        values = tuple(f.value for f in s.fields)
        return None if any(v is None for v in values) else values
    return None


def prim_arg(call, i: int):
    """A constant PrimValue argument as a Python number (None when symbolic / absent)."""
    if i >= len(call.args):
        return None
    s = call.args[i].struct_info
    v = s.value if isinstance(s, PrimStructInfo) else None
    return v.value if isinstance(v, (E.IntImm, E.FloatImm)) else None
