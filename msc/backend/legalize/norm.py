"""Normalizations: layer_norm, instance_norm, group_norm, rms_norm (two-pass statistics, 16-bit
floats accumulated in float32) and batch_norm (inference; training mode uses batch stats and
updates the moving ones, as TVM does)."""

from __future__ import annotations

from ...relax.op.registry import attrs_with_defaults
from ...tir import expr as E
from . import te
from .common import acc_dtype, axes_of, float_of, inputs, outputs, rule, size_of
from .te import cast


def _call(name: str, x: E.PrimExpr) -> E.PrimExpr:
    return E.PrimCall(name, [x], x.dtype)


class Stats:
    """Mean and variance of ``x`` over ``axes``, per index of the other dims (``group``:
    channel ``c`` of ``C`` belongs to group ``c // (C / groups)``)."""

    def __init__(self, b: te.Builder, x: te.Tensor, axes: list, group=None):
        self.b, self.x, self.axes, self.group = b, x, axes, group
        self.dt = acc_dtype(x.dtype)
        keep = [d for d in range(x.ndim) if d not in axes and d != (group or (None,))[0]]
        self.shape = [x.shape[d] for d in keep] + ([group[1]] if group else [])
        self.rvars = [b.reduce_axis(x.shape[d], f"k{d}") for d in axes]
        if group:
            channel, groups = group
            self.per_group = E.floordiv(x.shape[channel], groups)
            self.rvars.insert(0, b.reduce_axis(self.per_group, "kc"))
        sizes = [x.shape[d] for d in axes] + ([self.per_group] if group else [])
        self.count = float_of(size_of(sizes), self.dt)

    def source(self, ivars) -> tuple:
        """x's index for a stats index and the reduce vars."""
        out, r, index = iter(ivars), iter(self.rvars), []
        channel = self.group[0] if self.group else None
        kc = next(r) if self.group else None
        for d in range(self.x.ndim):
            if d == channel:
                index.append(None)
            else:
                index.append(next(r) if d in self.axes else next(out))
        if self.group:
            index[channel] = E.add(E.mul(ivars[-1], self.per_group), kc)
        return tuple(index)

    def at(self, xvars) -> tuple:
        keep = [v for d, v in enumerate(xvars) if d not in self.axes and d != self._channel]
        if self.group:
            keep.append(E.floordiv(xvars[self.group[0]], self.per_group))
        return tuple(keep)

    @property
    def _channel(self):
        return self.group[0] if self.group else None

    def value(self, i) -> E.PrimExpr:
        return cast(self.x[i], self.dt)

    def mean_sum(self, square: bool = False) -> te.Tensor:
        def total(*i):
            v = self.value(self.source(i))
            return te.sum(E.BinaryOp("Mul", v, v) if square else v, self.rvars)
        return self.b.compute(self.shape, total, self.x.name + ("_sq_sum" if square else "_sum"))

    def mean(self, total: te.Tensor, xvars) -> E.PrimExpr:
        return E.BinaryOp("Div", total[self.at(xvars)], self.count)

    def var_sum(self, total: te.Tensor) -> te.Tensor:
        def dev(*i):
            src = self.source(i)
            d = E.BinaryOp("Sub", self.value(src), self.mean(total, src))
            return te.sum(E.BinaryOp("Mul", d, d), self.rvars)
        return self.b.compute(self.shape, dev, self.x.name + "_var_sum")

    def inv_std(self, var_sum: te.Tensor, xvars, eps: float) -> E.PrimExpr:
        var = E.BinaryOp("Div", var_sum[self.at(xvars)], self.count)
        return _call("rsqrt", E.BinaryOp("Add", var, te.const(eps, self.dt)))


def _affine(y, a, gamma, beta, index, dt):
    if gamma is not None and a["scale"]:
        y = E.BinaryOp("Mul", y, cast(gamma[index], dt))
    if beta is not None and a["center"]:
        y = E.BinaryOp("Add", y, cast(beta[index], dt))
    return y


def _standardize(call, axes_fn, param_index, group_fn=None, name="layer_norm"):
    b, (x, gamma, beta) = inputs(call)
    a, out = attrs_with_defaults(call), outputs(call)[0]
    st = Stats(b, x, axes_fn(a, x.ndim), group_fn(a, x.ndim) if group_fn else None)
    total = st.mean_sum()
    var_sum = st.var_sum(total)
    eps = float(a["epsilon"])

    def norm(*i):
        y = E.BinaryOp("Mul", E.BinaryOp("Sub", st.value(i), st.mean(total, i)),
                       st.inv_std(var_sum, i, eps))
        return _affine(y, a, gamma, beta, param_index(a, st, i), st.dt)
    y = b.compute(out.values, norm, "T_" + name, dtype=out.dtype)
    return b.prim_func([y], name)


@rule("nn.layer_norm")
def _layer_norm(call):
    return _standardize(call, lambda a, n: axes_of(a["axes"], n),
                        lambda a, st, i: tuple(i[d] for d in st.axes))


@rule("nn.instance_norm")
def _instance_norm(call):
    return _standardize(call, lambda a, n: axes_of(a["axes"], n),
                        lambda a, st, i: (i[int(a["channel_axis"]) % len(i)],),
                        name="instance_norm")


@rule("nn.group_norm")
def _group_norm(call):
    def axes(a, n):
        channel = int(a["channel_axis"]) % n
        return [d for d in axes_of(a["axes"], n) if d != channel]
    return _standardize(call, axes,
                        lambda a, st, i: (i[st.group[0]],),
                        lambda a, n: (int(a["channel_axis"]) % n, int(a["num_groups"])),
                        name="group_norm")


@rule("nn.rms_norm")
def _rms_norm(call):
    b, (x, weight) = inputs(call)
    a, out = attrs_with_defaults(call), outputs(call)[0]
    st = Stats(b, x, axes_of(a["axes"], x.ndim))
    sq = st.mean_sum(square=True)
    eps = te.const(float(a["epsilon"]), st.dt)

    def norm(*i):
        rms = _call("rsqrt", E.BinaryOp("Add", E.BinaryOp("Div", sq[st.at(i)], st.count), eps))
        w = cast(weight[tuple(i[d] for d in st.axes)], st.dt)
        return E.BinaryOp("Mul", E.BinaryOp("Mul", st.value(i), rms), w)
    y = b.compute(out.values, norm, "T_rms_norm", dtype=out.dtype)
    return b.prim_func([y], "rms_norm")


@rule("nn.batch_norm")
def _batch_norm(call):
    b, (x, gamma, beta, mean, var) = inputs(call)
    a = attrs_with_defaults(call)
    outs = outputs(call)
    axis, eps = int(a["axis"]) % x.ndim, float(a["epsilon"])
    dt = acc_dtype(x.dtype)
    if a["training"]:
        st = Stats(b, x, [d for d in range(x.ndim) if d != axis])
        total = st.mean_sum()
        var_sum = st.var_sum(total)
        center = lambda i: st.mean(total, i)
        scale = lambda i: st.inv_std(var_sum, i, eps)
        m = float(a["momentum"])

        def moving(t, stat):
            return lambda c: E.BinaryOp("Add", E.BinaryOp("Mul", cast(t[(c,)], dt),
                                                          te.const(1 - m, dt)),
                                        E.BinaryOp("Mul", stat((c,)), te.const(m, dt)))
        new_mean = moving(mean, lambda c: E.BinaryOp("Div", total[c], st.count))
        new_var = moving(var, lambda c: E.BinaryOp("Div", var_sum[c], st.count))
    else:
        center = lambda i: cast(mean[(i[axis],)], dt)
        scale = lambda i: _call("rsqrt", E.BinaryOp("Add", cast(var[(i[axis],)], dt),
                                                    te.const(eps, dt)))
        new_mean, new_var = (lambda c: cast(mean[(c,)], dt)), (lambda c: cast(var[(c,)], dt))

    def norm(*i):
        y = E.BinaryOp("Mul", E.BinaryOp("Sub", cast(x[i], dt), center(i)), scale(i))
        return _affine(y, a, gamma, beta, (i[axis],), dt)
    y = b.compute(outs[0].values, norm, "T_batch_norm", dtype=outs[0].dtype)
    ym = b.compute(outs[1].values, new_mean, "T_moving_mean", dtype=outs[1].dtype)
    yv = b.compute(outs[2].values, new_var, "T_moving_var", dtype=outs[2].dtype)
    return b.prim_func([y, ym, yv], "batch_norm")
