"""Reductions (sum, mean, max, min, prod, variance, std, argmax, argmin) and softmax /
log_softmax. A reduction is one block with an init; the compiler picks the loop order (reduce
loop innermost when it is contiguous, else the output's last axis)."""

from __future__ import annotations

from ...tir import expr as E
from ...tir.function import BufferStore, LetStmt, seq
from . import te
from .common import acc_dtype, attrs, axes_of, float_of, inputs, output, rule, size_of
from .te import cast, const


class Reduction:
    """Index bookkeeping of one reduction of ``x`` over ``axes``."""

    def __init__(self, b: te.Builder, x: te.Tensor, axes: list, keepdims: bool):
        self.x, self.axes, self.keepdims = x, axes, keepdims
        self.rvars = [b.reduce_axis(x.shape[d], f"k{d}") for d in axes]

    def source(self, ivars) -> tuple:
        """x's index for output index ``ivars`` and the reduce vars."""
        out, r, index = iter(ivars), iter(self.rvars), []
        for d in range(self.x.ndim):
            if d in self.axes:
                index.append(next(r))
                if self.keepdims:
                    next(out)
            else:
                index.append(next(out))
        return tuple(index)

    def stat(self, xvars) -> tuple:
        """Output index of the statistic at x index ``xvars``."""
        return tuple(te.idx(0) if d in self.axes else v for d, v in enumerate(xvars)
                     if self.keepdims or d not in self.axes)

    @property
    def count(self) -> E.PrimExpr:
        return size_of([self.x.shape[d] for d in self.axes])


def _setup(call):
    b, (x,) = inputs(call)
    a = attrs(call)
    red = Reduction(b, x, axes_of(a.get("axis"), x.ndim), bool(a["keepdims"]))
    return b, x, red, output(call)


def _fold(kind: str, dtype_of):
    def legalize(call):
        b, x, red, out = _setup(call)
        dt = dtype_of(out.dtype)
        combine = {"sum": te.sum, "prod": te.prod, "max": te.reduce_max,
                   "min": te.reduce_min}[kind]
        y = b.compute(out.values, lambda *i: combine(cast(x[red.source(i)], dt), red.rvars),
                      "x_red", dtype=dt)
        if dt != out.dtype:
            y = b.compute(out.values, lambda *i: cast(y[i], out.dtype), "T_cast")
        return b.prim_func([y], kind)
    return legalize


rule("sum")(_fold("sum", acc_dtype))
rule("prod")(_fold("prod", acc_dtype))
rule("max")(_fold("max", lambda d: d))
rule("min")(_fold("min", lambda d: d))


def _sum(b, x, red, out, value, name: str) -> te.Tensor:
    dt = acc_dtype(out.dtype)
    return b.compute(out.values, lambda *i: te.sum(cast(value(red.source(i)), dt), red.rvars),
                     name, dtype=dt)


def _mean_of(red, total, xvars, dtype) -> E.PrimExpr:
    return E.BinaryOp("Div", total[red.stat(xvars)], float_of(red.count, dtype))


@rule("mean")
def _mean(call):
    b, x, red, out = _setup(call)
    total = _sum(b, x, red, out, lambda i: x[i], "x_red")
    y = b.compute(out.values, lambda *i: E.BinaryOp("Div", total[i], float_of(red.count,
                                                                                total.dtype)),
                  "T_divide", dtype=out.dtype)
    return b.prim_func([y], "mean")


def _variance_stages(call):
    """(builder, variance tensor, output sinfo): two passes, sum then squared deviations."""
    b, x, red, out = _setup(call)
    total = _sum(b, x, red, out, lambda i: x[i], "x_red")
    dt = total.dtype

    def deviation(i):
        d = E.BinaryOp("Sub", cast(x[i], dt), _mean_of(red, total, i, dt))
        return E.BinaryOp("Mul", d, d)
    sq = _sum(b, x, red, out, deviation, "T_multiply_red")
    var = b.compute(out.values, lambda *i: E.BinaryOp("Div", sq[i], float_of(red.count, dt)),
                    "T_divide", dtype=dt)
    return b, var, out


@rule("variance")
def _variance(call):
    b, var, out = _variance_stages(call)
    if var.dtype != out.dtype:
        var = b.compute(out.values, lambda *i: cast(var[i], out.dtype), "T_cast")
    return b.prim_func([var], "variance")


@rule("std")
def _std(call):
    b, var, out = _variance_stages(call)
    y = b.compute(out.values, lambda *i: E.PrimCall("sqrt", [var[i]], var.dtype), "compute",
                  dtype=out.dtype, axis="i")
    return b.prim_func([y], "std")


def _arg(kind: str):
    """argmax / argmin: (index, value) pairs reduced with TVM's tie rule (lowest index)."""
    def legalize(call):
        b, x, red, out = _setup(call)
        better = "GT" if kind == "argmax" else "LT"
        start = te.min_value(x.dtype) if kind == "argmax" else te.max_value(x.dtype)

        def flat(i):
            src, pos = red.source(i), te.idx(0)
            for d in red.axes:
                pos = E.add(E.mul(pos, x.shape[d]), src[d])
            return src, pos

        def body(ivars, outs):
            idx_t, val_t = outs
            src, pos = flat(ivars)
            v, at = x[src], tuple(ivars)
            cur_i, cur_v = idx_t[at], val_t[at]
            keep = E.BinaryOp("Or", E.BinaryOp(better, cur_v, v), E.BinaryOp(
                "And", E.BinaryOp("EQ", cur_v, v), E.BinaryOp(
                    "And", E.BinaryOp("LE", const(0, "int64"), cur_i),
                    E.BinaryOp("LT", cur_i, pos))))
            n0, n1 = E.Var("v_x_red_temp_v0", "int64"), E.Var("v_x_red_temp_v1", x.dtype)
            update = seq([LetStmt(n0, te.select(keep, cur_i, pos), True),
                          LetStmt(n1, te.select(keep, cur_v, v), True),
                          BufferStore(idx_t.buffer, n0, cur_i.indices),
                          BufferStore(val_t.buffer, n1, cur_v.indices)])
            init = seq([BufferStore(idx_t.buffer, const(-1, "int64"), cur_i.indices),
                        BufferStore(val_t.buffer, start, cur_v.indices)])
            return init, update
        temp, _ = b.block("x_red_temp", out.values, [("x_red_temp_v0", "int64"),
                                                     ("x_red_temp_v1", x.dtype)], body,
                          reduce_axes=red.rvars)
        y = b.compute(out.values, lambda *i: cast(temp[i], out.dtype), "x_red")
        return b.prim_func([y], kind)
    return legalize


rule("argmax")(_arg("argmax"))
rule("argmin")(_arg("argmin"))


def _softmax_stages(call):
    """The max along the axis, and ``x - max`` at an index (in the accumulation dtype)."""
    b, (x,) = inputs(call)
    axis = int(attrs(call)["axis"]) % x.ndim
    red = Reduction(b, x, [axis], False)
    red.rvars = [b.reduce_axis(x.shape[axis], "k")]
    stat_shape = [d for k, d in enumerate(x.shape) if k != axis]
    dt = acc_dtype(x.dtype)
    mx = b.compute(stat_shape, lambda *i: te.reduce_max(x[red.source(i)], red.rvars),
                   "T_softmax_maxelem", axis="i")

    def shifted(i):
        return E.BinaryOp("Sub", cast(x[i], dt), cast(mx[red.stat(i)], dt))
    return b, x, red, stat_shape, shifted, dt


@rule("nn.softmax")
def _softmax(call):
    """exp(x - max) is computed once, into the output, then scaled by 1 / its sum."""
    b, _, red, stat_shape, shifted, dt = _softmax_stages(call)
    out = output(call)
    y = b.output(out.values, out.dtype, "T_softmax_norm")
    b.store(y, out.values, lambda *i: i, lambda *i: E.PrimCall("exp", [shifted(i)], dt),
            "T_softmax_exp", axis="i")
    total = b.compute(stat_shape, lambda *i: te.sum(cast(y[red.source(i)], dt), red.rvars),
                      "T_softmax_expsum", dtype=dt, axis="i")
    b.store(y, out.values, lambda *i: i, lambda *i: E.BinaryOp(
        "Mul", cast(y[i], dt), E.BinaryOp("Div", const(1, dt), total[red.stat(i)])),
        "T_softmax_norm", axis="i")
    return b.prim_func([y], "softmax")


@rule("nn.log_softmax")
def _log_softmax(call):
    b, _, red, stat_shape, shifted, dt = _softmax_stages(call)
    out = output(call)
    total = b.compute(stat_shape, lambda *i: te.sum(E.PrimCall(
        "exp", [shifted(red.source(i))], dt), red.rvars), "T_softmax_expsum", dtype=dt,
        axis="i")
    y = b.compute(out.values, lambda *i: E.BinaryOp(
        "Sub", shifted(i), E.PrimCall("log", [total[red.stat(i)]], total.dtype)),
        "compute", dtype=out.dtype, axis="i")
    return b.prim_func([y], "log_softmax")
