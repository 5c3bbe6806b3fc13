"""Pooling: max / avg pool 1d-3d and adaptive avg pool 1d-3d, any layout whose spatial letters
are plain (NCHW, NHWC...). Padding is read in place (``T.if_then_else`` on the window position)
instead of through a padded copy: the compiler splits the output-width loop so its main range
loads without checks and vectorizes."""

from __future__ import annotations

from ...errors import UnsupportedOpError
from ...tir import expr as E
from . import te
from .common import acc_dtype, all_of, attrs, float_of, in_bounds, inputs, output, rule
from .te import cast, idx

SPATIAL = {1: "W", 2: "HW", 3: "DHW"}


def _per_dim(value, nd: int) -> list[int]:
    v = [int(value)] if isinstance(value, int) else [int(x) for x in value]
    return v * nd if len(v) == 1 else v


def _pads(padding, nd: int):
    p = _per_dim(padding if padding is not None else 0, nd)
    p = p * 2 if len(p) == nd else p
    return p[:nd], p[nd:]


def _spatial_axes(a, nd: int) -> list[int]:
    layout = a.get("layout") or "NC" + SPATIAL[nd]
    if (a.get("out_layout") or layout) != layout or not layout.isupper():
        raise UnsupportedOpError(f"pooling from {layout} to {a.get('out_layout')} has no "
                                 "legalization", op="pool")
    return [layout.index(c) for c in SPATIAL[nd]]


class Window:
    """Input positions of a pooling window: ``o * stride + r * dilation - pad``."""

    def __init__(self, b, x, out, a, nd: int):
        self.x, self.axes = x, _spatial_axes(a, nd)
        self.kernel = _per_dim(a["pool_size"], nd)
        self.strides = _per_dim(a["strides"], nd)
        self.dilation = _per_dim(a["dilation"], nd)
        self.before, self.after = _pads(a["padding"], nd)
        self.rvars = [b.reduce_axis(k, f"rv{j}") for j, k in enumerate(self.kernel)]
        self.checked = [self._may_leave(j, out.values[ax]) for j, ax in enumerate(self.axes)]

    def _may_leave(self, j: int, out_dim) -> bool:
        size, o = self.x.shape[self.axes[j]], out_dim
        if self.before[j] or not (isinstance(size, E.IntImm) and isinstance(o, E.IntImm)):
            return True
        last = (o.value - 1) * self.strides[j] + (self.kernel[j] - 1) * self.dilation[j]
        return last >= size.value

    def start(self, j: int, o: E.PrimExpr) -> E.PrimExpr:
        return E.sub(E.mul(o, self.strides[j]), self.before[j])

    def read(self, i, fill):
        """``x`` at the window element for output index ``i``, ``fill`` outside the input."""
        index, conds = list(i), []
        for j, ax in enumerate(self.axes):
            pos = E.add(self.start(j, i[ax]), E.mul(self.rvars[j], self.dilation[j]))
            index[ax] = pos
            if self.checked[j]:
                conds.append(in_bounds(pos, self.x.shape[ax]))
        value = self.x[tuple(index)]
        cond = all_of(conds)
        return value if cond is None else te.if_then_else(cond, value, fill)

    def count(self, i, include_pad: bool) -> E.PrimExpr:
        """How many window elements an average divides by (at least 1)."""
        total = idx(1)
        for j, ax in enumerate(self.axes):
            k, d = self.kernel[j], self.dilation[j]
            if not self.checked[j]:
                total = E.mul(total, k)
                continue
            lo, hi = (-self.before[j], E.add(self.x.shape[ax], self.after[j])) if include_pad \
                else (0, self.x.shape[ax])
            base = self.start(j, i[ax])
            first = E.max(E.floordiv(E.add(E.sub(lo, base), d - 1), d), 0)
            stop = E.min(E.floordiv(E.add(E.sub(hi, base), d - 1), d), k)
            total = E.mul(total, E.max(E.sub(stop, first), 0))
        return E.max(total, 1)


def _max_pool(nd: int):
    def legalize(call):
        b, (x,) = inputs(call)
        out, a = output(call), attrs(call)
        win = Window(b, x, out, a, nd)
        low = te.min_value(x.dtype)
        y = b.compute(out.values, lambda *i: te.reduce_max(win.read(i, low), win.rvars),
                      "pool_max", attrs={"schedule_rule": "meta_schedule.pool_max"})
        return b.prim_func([y], f"max_pool{nd}d")
    return legalize


def _avg_pool(nd: int):
    def legalize(call):
        b, (x,) = inputs(call)
        out, a = output(call), attrs(call)
        win = Window(b, x, out, a, nd)
        dt = acc_dtype(x.dtype)
        total = b.compute(out.values, lambda *i: te.sum(cast(win.read(i, te.const(0, x.dtype)),
                                                             dt), win.rvars),
                          "pool_sum", dtype=dt)
        include = bool(a["count_include_pad"])
        y = b.compute(out.values, lambda *i: E.BinaryOp(
            "Div", total[i], float_of(win.count(i, include), dt)), "pool_avg", dtype=out.dtype,
            attrs={"schedule_rule": "meta_schedule.pool_avg"})
        return b.prim_func([y], f"avg_pool{nd}d")
    return legalize


def _adaptive_avg_pool(nd: int):
    """PyTorch's bins: [floor(o * n / size), ceil((o + 1) * n / size)); equal bins when the
    size divides n, else a window of the widest bin, masked."""
    def legalize(call):
        b, (x,) = inputs(call)
        out, a = output(call), attrs(call)
        axes = _spatial_axes(a, nd)
        dt = acc_dtype(x.dtype)
        bins = [_bins(x.shape[ax], out.values[ax]) for ax in axes]
        rvars = [b.reduce_axis(w, f"rv{j}") for j, (_, _, w) in enumerate(bins)]

        def read(i):
            index, conds = list(i), []
            for (first, stop, _), ax, r in zip(bins, axes, rvars):
                index[ax] = E.add(first(i[ax]), r)
                if stop is not None:
                    conds.append(E.BinaryOp("LT", index[ax], stop(i[ax])))
            value = cast(x[tuple(index)], dt)
            cond = all_of(conds)
            return value if cond is None else te.if_then_else(cond, value, te.const(0, dt))

        def count(i):
            total = idx(1)
            for (first, stop, w), ax in zip(bins, axes):
                total = E.mul(total, w if stop is None else E.sub(stop(i[ax]), first(i[ax])))
            return total
        total = b.compute(out.values, lambda *i: te.sum(read(i), rvars), "adaptive_pool_sum",
                          dtype=dt)
        y = b.compute(out.values, lambda *i: E.BinaryOp("Div", total[i], float_of(count(i), dt)),
                      "adaptive_pool_avg", dtype=out.dtype,
                      attrs={"schedule_rule": "meta_schedule.adaptive_pool_avg"})
        return b.prim_func([y], f"adaptive_avg_pool{nd}d")
    return legalize


def _bins(n, size):
    """(first(o), stop(o) or None when every bin has the same width, window width)."""
    if isinstance(n, E.IntImm) and isinstance(size, E.IntImm) and n.value % size.value == 0:
        w = n.value // size.value
        return (lambda o: E.mul(o, w)), None, idx(w)
    if not (isinstance(n, E.IntImm) and isinstance(size, E.IntImm)):
        raise UnsupportedOpError("adaptive pooling of a symbolic size needs equal bins",
                                 op="adaptive_avg_pool")
    n, size = n.value, size.value
    width = -(-n // size) + (1 if n % size else 0)
    return (lambda o: E.floordiv(E.mul(o, n), size),
            lambda o: E.floordiv(E.add(E.mul(o, n), n + size - 1), size), idx(width))


for _nd in (1, 2, 3):
    rule(f"nn.max_pool{_nd}d")(_max_pool(_nd))
    rule(f"nn.avg_pool{_nd}d")(_avg_pool(_nd))
    rule(f"nn.adaptive_avg_pool{_nd}d")(_adaptive_avg_pool(_nd))
