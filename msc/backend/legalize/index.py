"""Indexing and scans: gather_elements, gather_nd, one_hot, cumsum / cumprod, collapse_sum_to
/ collapse_sum_like. Indices read from data are normalized (negative counts from the end) and
the compiler clamps them into the buffer, so no index can read out of bounds."""

from __future__ import annotations

from ...tir import expr as E
from . import te
from .common import acc_dtype, attrs, inputs, output, rule
from .create import const_arg
from .manipulate import _unravel
from .te import cast, const, idx


def _wrap_negative(k: E.PrimExpr, n) -> E.PrimExpr:
    k = cast(k, "int64")
    return te.select(E.BinaryOp("LT", k, idx(0)), E.add(k, n), k)


@rule("gather_elements")
def _gather_elements(call):
    b, (data, indices) = inputs(call)
    out = output(call)
    axis = int(attrs(call).get("axis", 0)) % data.ndim

    def value(*i):
        k = _wrap_negative(indices[i], data.shape[axis])
        return data[tuple(k if d == axis else v for d, v in enumerate(i))]
    y = b.compute(out.values, value, "T_gather_elements")
    return b.prim_func([y], "gather_elements")


@rule("gather_nd")
def _gather_nd(call):
    """TVM / ONNX layout: indices (batch..., Y..., M); out[batch..., Y..., rest...] =
    data[batch..., indices[batch..., Y..., 0], ..., indices[..., M-1], rest...]."""
    b, (data, indices) = inputs(call)
    out = output(call)
    batch = int(attrs(call).get("batch_dims", 0))
    m = int(indices.shape[-1])
    lead = indices.ndim - 1  # batch and Y dims of the output

    def value(*i):
        index = list(i[:batch])
        for j in range(m):
            index.append(_wrap_negative(indices[(*i[:lead], idx(j))], data.shape[batch + j]))
        return data[tuple(index) + i[lead:]]
    y = b.compute(out.values, value, "T_gather_nd")
    return b.prim_func([y], "gather_nd")


@rule("one_hot")
def _one_hot(call):
    b, (indices,) = inputs(call)
    out = output(call)
    on, off = const_arg(call, 1), const_arg(call, 2)
    axis = int(attrs(call).get("axis", -1)) % out.ndim

    def value(*i):
        at = tuple(v for d, v in enumerate(i) if d != axis)
        hot = E.BinaryOp("EQ", cast(indices[at], "int64"), i[axis])
        return te.select(hot, const(on, out.dtype), const(off, out.dtype))
    y = b.compute(out.values, value, "T_one_hot")
    return b.prim_func([y], "one_hot")


def _scan(kind: str):
    """out[i] = out[i - 1] (+ or *) x[i] along the axis, in loop order (i - 1 is computed
    before i); ``exclusive`` shifts by one. axis=None scans the flattened input."""
    def legalize(call):
        b, (x,) = inputs(call)
        out = output(call)
        a = attrs(call)
        dt = out.dtype
        identity = const(0 if kind == "Add" else 1, dt)
        flat = a.get("axis") is None
        axis = 0 if flat else int(a["axis"]) % x.ndim
        y = b.output(out.values, dt, "T_" + ("cumsum" if kind == "Add" else "cumprod"))

        def load(i, shift: int):
            pos = E.sub(i[axis], shift) if shift else i[axis]
            at = tuple(pos if d == axis else v for d, v in enumerate(i))
            if flat:
                return cast(x[_unravel(x.shape, out.values, at)], dt)
            return cast(x[at], dt)

        def value(*i):
            prev = y[tuple(E.sub(v, 1) if d == axis else v for d, v in enumerate(i))]
            first = E.BinaryOp("EQ", i[axis], idx(0))
            if a.get("exclusive", False):
                return te.if_then_else(first, identity, E.BinaryOp(kind, prev, load(i, 1)))
            return te.if_then_else(first, load(i, 0), E.BinaryOp(kind, prev, load(i, 0)))
        b.store(y, out.values, lambda *i: i, value, y.name)
        return b.prim_func([y], y.name.removeprefix("T_"))
    return legalize


rule("cumsum")(_scan("Add"))
rule("cumprod")(_scan("Mul"))


@rule("collapse_sum_to", "collapse_sum_like")
def _collapse_sum(call):
    """Sum over the leading dims and over the dims the target keeps as 1."""
    b, ts = inputs(call)
    x, out = ts[0], output(call)
    lead = x.ndim - out.ndim
    reduced = [d for d in range(x.ndim) if d < lead or (
        isinstance(out.values[d - lead], E.IntImm) and out.values[d - lead].value == 1
        and not (isinstance(x.shape[d], E.IntImm) and x.shape[d].value == 1))]
    rvars = {d: b.reduce_axis(x.shape[d], f"k{d}") for d in reduced}
    dt = acc_dtype(out.dtype)

    def value(*i):
        at = tuple(rvars[d] if d in rvars else i[d - lead] for d in range(x.ndim))
        return te.sum(cast(x[at], dt), list(rvars.values()))
    y = b.compute(out.values, value, "x_red", dtype=dt)
    if dt != out.dtype:
        y = b.compute(out.values, lambda *i: cast(y[i], out.dtype), "T_cast")
    return b.prim_func([y], "collapse_sum")
