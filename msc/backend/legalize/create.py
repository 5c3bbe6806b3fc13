"""Tensor creation: full / ones / zeros (and their ``_like`` forms), tril / triu, arange,
eye / eye_like, hamming_window. One stage each, a constant or index expression per element."""

from __future__ import annotations

from ...errors import UnsupportedOpError
from ...tir import expr as E
from . import te
from .common import (
    inputs,
    op_name,
    output,
    rule,
)
from .te import cast, const, idx, prim_arg


def const_arg(call, i: int, default=None):
    """PrimValue argument ``i`` as a Python number, ``default`` when the call has no such
    argument. A symbolic value (``R.tril(x, k)`` with ``k`` read from a tensor at run time)
    raises UnsupportedOpError: the kernel's params are the tensors only, so the value could
    not reach it, and the op stays on its numpy fact instead of computing with a guess."""
    if i >= len(call.args):
        return default
    value = prim_arg(call, i)
    if value is None:
        raise UnsupportedOpError(f"argument {i} is not a constant (it is known only at run "
                                 "time); the kernel takes tensors only", op=op_name(call))
    return value


def _fill(value_of):
    def legalize(call):
        b, ts = inputs(call)
        out = output(call)
        y = b.compute(out.values, lambda *i: cast(value_of(call, ts, out.dtype), out.dtype),
                      "T_full")
        return b.prim_func([y], "full")
    return legalize


rule("full", "full_like")(_fill(lambda call, ts, dt: ts[-1][()]))
rule("ones", "ones_like")(_fill(lambda call, ts, dt: const(1, dt)))
rule("zeros", "zeros_like")(_fill(lambda call, ts, dt: const(0, dt)))


def _trilu(upper: bool):
    def legalize(call):
        b, (x,) = inputs(call)
        out = output(call)
        k = const_arg(call, 1, 0)

        def value(*i):
            diag = E.sub(i[-1], i[-2])  # j - i
            keep = E.BinaryOp("GE" if upper else "LE", diag, idx(k))
            return te.select(keep, x[i], const(0, x.dtype))
        y = b.compute(out.values, value, "trilu", axis="i")
        return b.prim_func([y], "triu" if upper else "tril")
    return legalize


rule("tril")(_trilu(False))
rule("triu")(_trilu(True))


@rule("arange")
def _arange(call):
    b, _ = inputs(call)
    out = output(call)
    start, step = const_arg(call, 0), const_arg(call, 2, 1)
    dt = "float64" if te.is_float(out.dtype) else "int64"

    def value(i):
        return E.BinaryOp("Add", const(start, dt), E.BinaryOp("Mul", cast(i, dt),
                                                               const(step, dt)))
    y = b.compute(out.values, value, "T_arange", dtype=out.dtype)
    return b.prim_func([y], "arange")


def _eye(k_arg: int):
    def legalize(call):
        b, _ = inputs(call)
        out = output(call)
        k = const_arg(call, k_arg, 0)
        y = b.compute(out.values, lambda i, j: te.select(
            E.BinaryOp("EQ", E.sub(j, i), idx(k)), const(1, out.dtype), const(0, out.dtype)),
            "T_eye", axis="i")
        return b.prim_func([y], "eye")
    return legalize


rule("eye")(_eye(2))
rule("eye_like")(_eye(1))


@rule("hamming_window")
def _hamming_window(call):
    """alpha - beta * cos(2 pi i / N) in float64, N = size (periodic) or size - 1; a window of
    one element is 1."""
    b, _ = inputs(call)
    out = output(call)
    periodic, alpha, beta = (prim_arg(call, k) for k in (1, 2, 3))
    if None in (periodic, alpha, beta):
        raise UnsupportedOpError("hamming_window needs constant periodic / alpha / beta",
                                 op="hamming_window")
    size = out.values[0]
    f64 = "float64"
    n = E.Cast(f64, idx(size) if periodic else E.sub(idx(size), 1))

    def value(i):
        angle = E.BinaryOp("Div", E.BinaryOp("Mul", const(6.283185307179586, f64),
                                             E.Cast(f64, i)), n)
        w = E.BinaryOp("Sub", const(alpha, f64), E.BinaryOp(
            "Mul", const(beta, f64), E.PrimCall("cos", [angle], f64)))
        one = E.BinaryOp("EQ", idx(size), idx(1))
        return cast(te.select(one, const(1, f64), w), out.dtype)
    y = b.compute(out.values, value, "T_hamming_window", dtype=out.dtype)
    return b.prim_func([y], "hamming_window")

