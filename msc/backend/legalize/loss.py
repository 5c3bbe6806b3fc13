"""Rules for the losses: nn.cross_entropy_with_logits and nn.nll_loss (reductions "none",
"sum", "mean" weighted by the picked class weights; ignore_index weighs 0)."""

from __future__ import annotations

from ...tir import expr as E
from . import te
from .common import (
    acc_dtype,
    attrs,
    float_of,
    inputs,
    output,
    rule,
)
from .te import cast, const, idx


@rule("nn.cross_entropy_with_logits")
def _cross_entropy(call):
    """-sum(x * y) / N (N = batch of a 2-d input, else 1)."""
    b, (x, y) = inputs(call)
    out = output(call)
    dt = acc_dtype(out.dtype)
    ks = [b.reduce_axis(d, f"k{j}") for j, d in enumerate(x.shape)]
    total = b.compute((), lambda: te.sum(E.BinaryOp(
        "Mul", cast(x[tuple(ks)], dt), cast(y[tuple(ks)], dt)), ks), "x_red", dtype=dt)
    n = float_of(x.shape[0], dt) if x.ndim == 2 else const(1, dt)
    z = b.compute((), lambda: cast(E.BinaryOp("Div", E.sub(const(0, dt), total[()]), n),
                                   out.dtype), "T_divide", dtype=out.dtype)
    return b.prim_func([z], "cross_entropy_with_logits")


@rule("nn.nll_loss")
def _nll_loss(call):
    b, (pred, target, *weights) = inputs(call)
    out, a = output(call), attrs(call)
    reduction = a["reduction"]
    ignore = int(a["ignore_index"])
    dt = acc_dtype(out.dtype)
    items = (pred.shape[0], *pred.shape[2:]) if pred.ndim > 1 else ()

    def parts(*i):
        """(picked prediction, weight) at item ``i`` (weight 0 where ignored)."""
        t = cast(target[tuple(i)], "int64")
        skip = E.BinaryOp("EQ", t, idx(ignore))
        safe = te.select(skip, idx(0), t)
        p = pred[(i[0], safe, *i[1:])] if pred.ndim > 1 else pred[(safe,)]
        wv = cast(weights[0][(safe,)], dt) if weights else const(1, dt)
        return cast(p, dt), te.select(skip, const(0, dt), wv)

    def loss(*i):
        p, wv = parts(*i)
        return E.BinaryOp("Mul", E.sub(const(0, dt), p), wv)
    if reduction == "none":
        y = b.compute(out.values, lambda *i: cast(loss(*i), out.dtype), "T_nll_loss",
                      dtype=out.dtype)
        return b.prim_func([y], "nll_loss")
    ks = [b.reduce_axis(d, f"k{j}") for j, d in enumerate(items)]
    total = b.compute((), lambda: te.sum(loss(*ks), ks), "nll_loss_red", dtype=dt)
    if reduction == "sum":
        y = b.compute((), lambda: cast(total[()], out.dtype), "T_nll_loss", dtype=out.dtype)
        return b.prim_func([y], "nll_loss")
    ks2 = [b.reduce_axis(d, f"j{j}") for j, d in enumerate(items)]
    wsum = b.compute((), lambda: te.sum(parts(*ks2)[1], ks2), "nll_loss_weight", dtype=dt)
    y = b.compute((), lambda: cast(E.BinaryOp("Div", total[()], wsum[()]), out.dtype),
                  "T_nll_loss", dtype=out.dtype)
    return b.prim_func([y], "nll_loss")
