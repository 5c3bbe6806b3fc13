"""Rules for the image ops: image.resize2d / resize3d, grid_sample and affine_grid.

Interpolation runs on tap tables: per spatial axis a small stage holds, for each output
position and tap, the source index (clamped into the input) and its weight (zero for a tap
outside the input); the gather stage then only loads and multiplies. Coordinates are float64,
in the numpy fact's operation order, so floor / round pick the same taps. Coordinates read
from data (grid_sample) are bounded in float64 before they become indices: LLVM's fptosi of
NaN, inf or 1e30 is poison, and a clamp of poison is no clamp.
"""

from __future__ import annotations

import itertools

from ...errors import UnsupportedOpError
from ...tir import expr as E
from . import te
from .common import (
    acc_dtype,
    attrs,
    clip_index,
    div,
    float_of,
    in_bounds,
    inputs,
    output,
    prim_call,
    rule,
)
from .te import cast, const, idx

F64 = "float64"
SPATIAL = {2: "HW", 3: "DHW"}


def _f(value) -> E.PrimExpr:
    return const(value, F64)


def _positions(layout: str, letters: str, op: str) -> list[int]:
    if sorted(layout) != sorted(letters):
        raise UnsupportedOpError(f"layout {layout!r} has no legalization", op=op)
    return [layout.index(c) for c in letters]


# ------------------------------------------------------------------------------ resize
# Input coordinate of output position o (float64) on an axis of n inputs and m outputs.
_COORD = {
    "half_pixel": lambda o, n, m: div((o + _f(0.5)) * _f(n), _f(m)) - _f(0.5),
    "pytorch_half_pixel": lambda o, n, m: (
        div((o + _f(0.5)) * _f(n), _f(m)) - _f(0.5) if m > 1 else _f(0)),
    "align_corners": lambda o, n, m: div(o * _f(n - 1), _f(m - 1)) if m > 1 else _f(0),
    "asymmetric": lambda o, n, m: div(o * _f(n), _f(m)),
    "tf_half_pixel_for_nn": lambda o, n, m: div((o + _f(0.5)) * _f(n), _f(m)),
}


def _floor(c: E.PrimExpr) -> E.PrimExpr:
    return prim_call("floor", c)


def _ceil(c: E.PrimExpr) -> E.PrimExpr:
    return prim_call("ceil", c)


_ROUND = {
    "round": lambda c: prim_call("round", c),  # halves to even (llvm.roundeven), as TVM
    "round_prefer_floor": lambda c: _ceil(c - _f(0.5)),
    "round_prefer_ceil": lambda c: _floor(c + _f(0.5)),
    "floor": _floor,
    "ceil": _ceil,
}
_TAPS = {"nearest_neighbor": 1, "linear": 2, "cubic": 4}


def _cubic_weight(d: E.PrimExpr, a: float) -> E.PrimExpr:
    """Keys' cubic kernel at distance ``d`` (float64) with ``cubic_alpha`` a."""
    near = ((_f(a + 2) * d - _f(a + 3)) * d) * d + _f(1)
    far = ((_f(a) * d - _f(5 * a)) * d + _f(8 * a)) * d - _f(4 * a)
    return te.select(E.BinaryOp("LE", d, _f(1)), near,
                     te.select(E.BinaryOp("LT", d, _f(2)), far, _f(0)))


class _ResizeAxis:
    """The tap tables of one axis: ``index[o, t]`` and (linear / cubic) ``weight[o, t]``."""

    def __init__(self, b, a, letter: str, n: int, m: int, dt: str):
        mode = a["coordinate_transformation_mode"]
        method = a["method"]
        self.taps = _TAPS[method]
        coord = b.compute((m,), lambda o: _COORD[mode](E.Cast(F64, o), n, m),
                          f"T_coord_{letter}", dtype=F64)
        if method == "nearest_neighbor":
            rounding = a.get("rounding_method") or (
                "round" if mode == "align_corners" else "floor")
            rnd = _ROUND[rounding]
            self.index = b.compute(
                (m, 1), lambda o, t: clip_index(E.Cast("int64", rnd(coord[o])), n),
                f"T_index_{letter}", dtype="int64")
            self.weight = None
            return
        if method == "linear":
            self.index, self.weight = self._linear(b, coord, letter, n, m, dt)
        else:
            self.index, self.weight = self._cubic(b, a, coord, letter, n, m, dt)

    @staticmethod
    def _linear(b, coord, letter: str, n: int, m: int, dt: str):
        def lo(o):
            return _floor(E.max(coord[o], _f(0)))
        index = b.compute((m, 2), lambda o, t: clip_index(E.Cast("int64", lo(o)) + t, n),
                          f"T_index_{letter}", dtype="int64")

        def weight(o, t):
            frac = E.max(coord[o], _f(0)) - lo(o)
            return te.select(E.BinaryOp("EQ", t, idx(0)), _f(1) - frac, frac)
        return index, b.compute((m, 2), weight, f"T_weight_{letter}", dtype=dt)

    @staticmethod
    def _cubic(b, a, coord, letter: str, n: int, m: int, dt: str):
        alpha, exclude = float(a["cubic_alpha"]), bool(a["cubic_exclude"])

        def tap(o, t):
            return E.Cast("int64", _floor(coord[o])) + t - idx(1)
        index = b.compute((m, 4), lambda o, t: clip_index(tap(o, t), n), f"T_index_{letter}",
                          dtype="int64")

        def raw(o, t):
            w = _cubic_weight(prim_call("fabs", coord[o] - E.Cast(F64, tap(o, t))), alpha)
            return te.select(in_bounds(tap(o, t), n), w, _f(0)) if exclude else w
        if not exclude:
            return index, b.compute((m, 4), raw, f"T_weight_{letter}", dtype=dt)
        w = b.compute((m, 4), raw, f"T_cubic_{letter}", dtype=F64)
        r = b.reduce_axis(4, "r" + letter.lower())
        total = b.compute((m,), lambda o: te.sum(w[o, r], r), f"T_cubic_sum_{letter}")
        return index, b.compute((m, 4), lambda o, t: div(w[o, t], total[o]),
                                f"T_weight_{letter}", dtype=dt)


@rule("image.resize2d")
def _resize2d(call):
    return resize(call, 2)


@rule("image.resize3d")
def _resize3d(call):
    return resize(call, 3)


def resize(call, nd: int):
    """image.resize{nd}d of any layout, method, coordinate mode and rounding of the numpy fact
    (static spatial sizes; linear / cubic of float data)."""
    op = f"image.resize{nd}d"
    b, (x,) = inputs(call)
    out, a = output(call), attrs(call)
    letters = SPATIAL[nd]
    pos = _positions(a.get("layout") or "NC" + letters, "NC" + letters, op)[2:]
    mode, method = a["coordinate_transformation_mode"], a.get("method",
                                                                               "linear")
    rounding = a.get("rounding_method") or ""
    if mode not in _COORD or method not in _TAPS or (rounding and rounding not in _ROUND):
        raise UnsupportedOpError(f"resize {method}/{mode}/{rounding!r} has no legalization",
                                 op=op)
    if method != "nearest_neighbor" and not te.is_float(x.dtype):
        raise UnsupportedOpError(f"{method} resize of {x.dtype} data", op=op)
    sizes = [x.shape[p] for p in pos] + [out.values[p] for p in pos]
    if not all(isinstance(v, E.IntImm) for v in sizes):
        raise UnsupportedOpError("resize of symbolic spatial sizes", op=op)
    dt = acc_dtype(out.dtype) if te.is_float(out.dtype) else F64
    axes = [_ResizeAxis(b, a, c, x.shape[p].value, out.values[p].value, dt)
            for c, p in zip(letters, pos)]
    if method == "nearest_neighbor":
        def nearest(*i):
            src = list(i)
            for ax, p in zip(axes, pos):
                src[p] = ax.index[i[p], 0]
            return x[tuple(src)]
        y = b.compute(out.values, nearest, "T_resize", dtype=out.dtype)
        return b.prim_func([y], f"resize{nd}d")
    cur = x
    for ax, p, c in zip(axes, pos, letters):  # separable, one axis at a time (as the fact)
        cur = _resize_axis(b, cur, ax, p, out.values[p], dt, c)
    if cur.dtype != out.dtype:
        cur = b.compute(out.values, lambda *i: cast(cur[i], out.dtype), "T_cast")
    return b.prim_func([cur], f"resize{nd}d")


def _resize_axis(b, cur, ax: _ResizeAxis, p: int, m, dt: str, letter: str):
    r = b.reduce_axis(ax.taps, "t" + letter.lower())
    shape = list(cur.shape)
    shape[p] = m

    def value(*i):
        src = list(i)
        src[p] = ax.index[i[p], r]
        return te.sum(ax.weight[i[p], r] * cast(cur[tuple(src)], dt), r)
    return b.compute(shape, value, f"T_resize_{letter}", dtype=dt)


# --------------------------------------------------------------------------- grid_sample

def _unnormalize(g: E.PrimExpr, size: E.PrimExpr, align: bool) -> E.PrimExpr:
    """[-1, 1] grid value -> input coordinate (float64, the fact's operation order)."""
    if align:
        return div(g + _f(1), _f(2)) * (size - _f(1))
    return div((g + _f(1)) * size - _f(1), _f(2))


def _reflect(c: E.PrimExpr, lo: E.PrimExpr, hi: E.PrimExpr) -> E.PrimExpr:
    """``c`` folded back and forth into [lo, hi] (0 when the span is empty)."""
    span = hi - lo
    dist = prim_call("fabs", c - lo)
    flips = _floor(div(dist, span))
    extra = prim_call("fmod", dist, span)
    even = E.BinaryOp("EQ", prim_call("fmod", flips, _f(2)), _f(0))
    folded = te.select(even, lo + extra, hi - extra)
    return te.select(E.BinaryOp("GT", span, _f(0)), folded, _f(0))


def _source(g: E.PrimExpr, size: E.PrimExpr, align: bool, padding: str) -> E.PrimExpr:
    c = _unnormalize(g, size, align)
    if padding == "reflection":
        c = _reflect(c, _f(0), size - _f(1)) if align else \
            _reflect(c, _f(-0.5), size - _f(0.5))
    if padding in ("border", "reflection"):
        c = E.min(E.max(c, _f(0)), size - _f(1))
    return c


def _bounded(c: E.PrimExpr, size: E.PrimExpr) -> E.PrimExpr:
    """``c`` if it lies in [-2, size + 1], else the nearer end (NaN -> -2): every tap of a
    bounded coordinate that was outside stays outside, and its int cast is defined."""
    hi = size + _f(1)
    inner = te.select(E.BinaryOp("LE", c, hi), c, hi)
    return te.select(E.BinaryOp("GE", c, _f(-2)), inner, _f(-2))


def _sample_tables(b, coord, size, method: str, dt: str, letter: str):
    """index[n, t, *out] (clamped) and weight[n, t, *out] (0 for a tap outside the input;
    NaN stays NaN, as in the fact) of one spatial axis."""
    taps = 2 if method == "bilinear" else 1
    shape = (coord.shape[0], idx(taps), *coord.shape[1:])
    size_f = float_of(size, F64)

    def tap(n, t, *o):
        safe = _bounded(coord[(n, *o)], size_f)
        if method == "nearest":
            return E.Cast("int64", prim_call("round", safe))
        return E.Cast("int64", _floor(safe)) + t
    index = b.compute(shape, lambda *i: clip_index(tap(*i), size), f"T_index_{letter}",
                      dtype="int64")

    def weight(n, t, *o):
        if method == "nearest":
            return te.select(in_bounds(tap(n, t, *o), size), _f(1), _f(0))
        c = coord[(n, *o)]
        frac = c - _floor(c)
        w = te.select(E.BinaryOp("EQ", t, idx(0)), _f(1) - frac, frac)
        return te.select(in_bounds(tap(n, t, *o), size), w, w * _f(0))
    return index, b.compute(shape, weight, f"T_weight_{letter}", dtype=dt)


@rule("image.grid_sample")
def _grid_sample(call):
    """bilinear / nearest sampling of NC(D)HW-like data at grid [N, d, *out] (grid channel 0
    is x, the last spatial axis), padding zeros / border / reflection."""
    op = "image.grid_sample"
    b, (x, grid) = inputs(call)
    out, a = output(call), attrs(call)
    layout = a.get("layout") or "NCHW"
    nd = len(layout) - 2
    method, padding = a["method"], a["padding_mode"]
    if nd not in SPATIAL or method not in ("bilinear", "nearest") or \
            padding not in ("zeros", "border", "reflection") or not te.is_float(x.dtype):
        raise UnsupportedOpError(f"grid_sample {method}/{padding} of {x.dtype} in {layout!r} "
                                 "has no legalization", op=op)
    npos, _, *pos = _positions(layout, "NC" + SPATIAL[nd], op)
    align = bool(a["align_corners"])
    dt = acc_dtype(out.dtype)
    tables = []
    for j, (p, letter) in enumerate(zip(pos, SPATIAL[nd])):
        channel, size = idx(nd - 1 - j), x.shape[p]
        coord = b.compute((grid.shape[0], *grid.shape[2:]), lambda n, *o, ch=channel, s=size: (
            _source(cast(grid[(n, ch, *o)], F64), float_of(s, F64), align, padding)),
            f"T_coord_{letter}", dtype=F64)
        tables.append(_sample_tables(b, coord, size, method, dt, letter))

    def value(*i):
        n, o, total = i[npos], [i[p] for p in pos], None
        for corner in itertools.product(range(2 if method == "bilinear" else 1), repeat=nd):
            src, w = list(i), None
            for p, t, (index, weight) in zip(pos, corner, tables):
                src[p] = index[(n, idx(t), *o)]
                w = weight[(n, idx(t), *o)] if w is None else w * weight[(n, idx(t), *o)]
            term = w * cast(x[tuple(src)], dt)
            total = term if total is None else total + term
        return cast(total, out.dtype)
    y = b.compute(out.values, value, "T_grid_sample", dtype=out.dtype)
    return b.prim_func([y], "grid_sample")


# --------------------------------------------------------------------------- affine_grid

def _base_coord(v: E.PrimExpr, size, align: bool) -> E.PrimExpr:
    """Normalized [-1, 1] coordinate of pixel ``v`` on an axis of ``size`` (float64)."""
    vf, s = E.Cast(F64, v), float_of(size, F64)
    if not align:
        return div(vf * _f(2) + _f(1), s) - _f(1)
    last = E.BinaryOp("EQ", v, E.sub(idx(size), idx(1)))  # linspace ends exactly at 1
    inner = vf * div(_f(2), E.max(s - _f(1), _f(1))) - _f(1)
    return te.select(E.BinaryOp("GT", s, _f(1)), te.select(last, _f(1), inner), _f(0))


@rule("image.affine_grid")
def _affine_grid(call):
    """grid[n, i, h, w] = theta[n, i, 0] * x(w) + theta[n, i, 1] * y(h) + theta[n, i, 2]."""
    b, (theta,) = inputs(call)
    out = output(call)
    align = bool(attrs(call)["align_corners"])
    _, _, height, width = out.values

    def value(n, i, h, w):
        xs, ys = _base_coord(w, width, align), _base_coord(h, height, align)
        t = [cast(theta[n, i, idx(j)], F64) for j in range(3)]
        return cast(t[0] * xs + t[1] * ys + t[2], out.dtype)
    y = b.compute(out.values, value, "T_affine_grid", dtype=out.dtype)
    return b.prim_func([y], "affine_grid")
