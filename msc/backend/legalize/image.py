"""Rules for image.resize3d / grid_sample / affine_grid and the attention variants
msc.attention and nn.attention_var_len.

Interpolation runs on tap tables: per spatial axis a small stage holds, for each output
position and tap, the source index (clamped into the input) and its weight (zero for a tap
outside the input); the gather stage then only loads and multiplies. Coordinates are float64,
in the numpy fact's operation order, so floor / round pick the same taps. Coordinates read
from data (grid_sample) are bounded in float64 before they become indices: LLVM's fptosi of
NaN, inf or 1e30 is poison, and a clamp of poison is no clamp.
"""

from __future__ import annotations

import itertools
import math

from ...errors import UnsupportedOpError
from ...tir import expr as E
from . import te
from .common import acc_dtype, attrs, broadcast, float_of, in_bounds, inputs, output, rule
from .te import cast, const, idx

F64 = "float64"
SPATIAL = {2: "HW", 3: "DHW"}


def _f(value) -> E.PrimExpr:
    return const(value, F64)


def _div(a, b) -> E.PrimExpr:
    return E.binary("Div", a, b)


def _call(name: str, *args) -> E.PrimExpr:
    return E.PrimCall(name, list(args), args[0].dtype)


def _clip(k: E.PrimExpr, n) -> E.PrimExpr:
    """An int64 index clamped into ``[0, n)``."""
    return E.min(E.max(k, idx(0)), E.sub(idx(n), idx(1)))


def _positions(layout: str, letters: str, op: str) -> list[int]:
    if sorted(layout) != sorted(letters):
        raise UnsupportedOpError(f"layout {layout!r} has no legalization", op=op)
    return [layout.index(c) for c in letters]


# ------------------------------------------------------------------------------ resize3d
# Input coordinate of output position o (float64) on an axis of n inputs and m outputs.
_COORD = {
    "half_pixel": lambda o, n, m: _div((o + _f(0.5)) * _f(n), _f(m)) - _f(0.5),
    "pytorch_half_pixel": lambda o, n, m: (
        _div((o + _f(0.5)) * _f(n), _f(m)) - _f(0.5) if m > 1 else _f(0)),
    "align_corners": lambda o, n, m: _div(o * _f(n - 1), _f(m - 1)) if m > 1 else _f(0),
    "asymmetric": lambda o, n, m: _div(o * _f(n), _f(m)),
    "tf_half_pixel_for_nn": lambda o, n, m: _div((o + _f(0.5)) * _f(n), _f(m)),
}


def _floor(c: E.PrimExpr) -> E.PrimExpr:
    return _call("floor", c)


def _ceil(c: E.PrimExpr) -> E.PrimExpr:
    return _call("ceil", c)


_ROUND = {
    "round": lambda c: te.select(E.BinaryOp("GE", c, _f(0)), _floor(c + _f(0.5)),
                                 _ceil(c - _f(0.5))),  # half away from zero
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
        mode = a.get("coordinate_transformation_mode", "half_pixel")
        method = a.get("method", "linear")
        self.taps = _TAPS[method]
        coord = b.compute((m,), lambda o: _COORD[mode](E.Cast(F64, o), n, m),
                          f"T_coord_{letter}", dtype=F64)
        if method == "nearest_neighbor":
            rounding = a.get("rounding_method") or (
                "round" if mode == "align_corners" else "floor")
            rnd = _ROUND[rounding]
            self.index = b.compute((m, 1), lambda o, t: _clip(E.Cast("int64", rnd(coord[o])), n),
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
        index = b.compute((m, 2), lambda o, t: _clip(E.Cast("int64", lo(o)) + t, n),
                          f"T_index_{letter}", dtype="int64")

        def weight(o, t):
            frac = E.max(coord[o], _f(0)) - lo(o)
            return te.select(E.BinaryOp("EQ", t, idx(0)), _f(1) - frac, frac)
        return index, b.compute((m, 2), weight, f"T_weight_{letter}", dtype=dt)

    @staticmethod
    def _cubic(b, a, coord, letter: str, n: int, m: int, dt: str):
        alpha, exclude = float(a.get("cubic_alpha", -0.75)), bool(a.get("cubic_exclude", 0))

        def tap(o, t):
            return E.Cast("int64", _floor(coord[o])) + t - idx(1)
        index = b.compute((m, 4), lambda o, t: _clip(tap(o, t), n), f"T_index_{letter}",
                          dtype="int64")

        def raw(o, t):
            w = _cubic_weight(_call("fabs", coord[o] - E.Cast(F64, tap(o, t))), alpha)
            return te.select(in_bounds(tap(o, t), n), w, _f(0)) if exclude else w
        if not exclude:
            return index, b.compute((m, 4), raw, f"T_weight_{letter}", dtype=dt)
        w = b.compute((m, 4), raw, f"T_cubic_{letter}", dtype=F64)
        r = b.reduce_axis(4, "r" + letter.lower())
        total = b.compute((m,), lambda o: te.sum(w[o, r], r), f"T_cubic_sum_{letter}")
        return index, b.compute((m, 4), lambda o, t: _div(w[o, t], total[o]),
                                f"T_weight_{letter}", dtype=dt)


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
    mode, method = a.get("coordinate_transformation_mode", "half_pixel"), a.get("method",
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
        return _div(g + _f(1), _f(2)) * (size - _f(1))
    return _div((g + _f(1)) * size - _f(1), _f(2))


def _reflect(c: E.PrimExpr, lo: E.PrimExpr, hi: E.PrimExpr) -> E.PrimExpr:
    """``c`` folded back and forth into [lo, hi] (0 when the span is empty)."""
    span = hi - lo
    dist = _call("fabs", c - lo)
    flips = _floor(_div(dist, span))
    extra = _call("fmod", dist, span)
    even = E.BinaryOp("EQ", _call("fmod", flips, _f(2)), _f(0))
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
            return E.Cast("int64", _call("round", safe))
        return E.Cast("int64", _floor(safe)) + t
    index = b.compute(shape, lambda *i: _clip(tap(*i), size), f"T_index_{letter}",
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
    method, padding = a.get("method", "bilinear"), a.get("padding_mode", "zeros")
    if nd not in SPATIAL or method not in ("bilinear", "nearest") or \
            padding not in ("zeros", "border", "reflection") or not te.is_float(x.dtype):
        raise UnsupportedOpError(f"grid_sample {method}/{padding} of {x.dtype} in {layout!r} "
                                 "has no legalization", op=op)
    npos, _, *pos = _positions(layout, "NC" + SPATIAL[nd], op)
    align = bool(a.get("align_corners", False))
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
        return _div(vf * _f(2) + _f(1), s) - _f(1)
    last = E.BinaryOp("EQ", v, E.sub(idx(size), idx(1)))  # linspace ends exactly at 1
    inner = vf * _div(_f(2), E.max(s - _f(1), _f(1))) - _f(1)
    return te.select(E.BinaryOp("GT", s, _f(1)), te.select(last, _f(1), inner), _f(0))


@rule("image.affine_grid")
def _affine_grid(call):
    """grid[n, i, h, w] = theta[n, i, 0] * x(w) + theta[n, i, 1] * y(h) + theta[n, i, 2]."""
    b, (theta,) = inputs(call)
    out = output(call)
    align = bool(attrs(call).get("align_corners", True))
    _, _, height, width = out.values

    def value(n, i, h, w):
        xs, ys = _base_coord(w, width, align), _base_coord(h, height, align)
        t = [cast(theta[n, i, idx(j)], F64) for j in range(3)]
        return cast(t[0] * xs + t[1] * ys + t[2], out.dtype)
    y = b.compute(out.values, value, "T_affine_grid", dtype=out.dtype)
    return b.prim_func([y], "affine_grid")


# ----------------------------------------------------------------------------- attention

def _at(layout: str, **index) -> tuple:
    """An index tuple in ``layout`` (letters b batch, s sequence, h head, d head dim)."""
    return tuple(index[c] for c in layout)


def _kv_head(heads, kv_heads):
    """Query head -> key/value head (grouped-query attention: consecutive groups share)."""
    if isinstance(kv_heads, E.IntImm) and kv_heads.value == 1:
        return lambda hh: idx(0)
    if heads == kv_heads:
        return lambda hh: hh
    return lambda hh: E.floordiv(hh, E.floordiv(idx(heads), idx(kv_heads)))


def attention(b, q, k, v, out, layout: str, a, *, keep=None, bias=None, op: str):
    """softmax(q k^T * scale + bias, masked where ``keep(n, h, i, j)`` is false) v, in
    ``layout`` ("bshd" or "bhsd"); max-subtracted, 16-bit floats accumulated in float32."""
    if a.get("window_size") is not None:
        raise UnsupportedOpError("sliding-window attention has no legalization", op=op)
    dims, kdims = dict(zip(layout, q.shape)), dict(zip(layout, k.shape))
    bn, s, heads, d, t_len = dims["b"], dims["s"], dims["h"], dims["d"], kdims["s"]
    scale = a.get("scale")
    if scale is None:
        if not isinstance(d, E.IntImm):
            raise UnsupportedOpError("attention over a symbolic head dim", op=op)
        scale = 1 / math.sqrt(d.value)
    dt, kvh = acc_dtype(out.dtype), _kv_head(heads, kdims["h"])
    kv_layout = layout
    if layout != "bhsd":  # head-major copies: one head's keys then sit in L1, not 2 KB apart
        k, v = (b.compute(_at("bhsd", **dict(zip(layout, t.shape))), lambda n, hh, j, e, t=t: (
            t[_at(layout, b=n, s=j, h=hh, d=e)]), name) for t, name in ((k, "T_k"), (v, "T_v")))
        kv_layout = "bhsd"
    rd = b.reduce_axis(d, "rd")
    qk = b.compute((bn, heads, s, t_len), lambda n, hh, i, j: te.sum(
        cast(q[_at(layout, b=n, s=i, h=hh, d=rd)], dt)
        * cast(k[_at(kv_layout, b=n, s=j, h=kvh(hh), d=rd)], dt), rd), "T_qk", dtype=dt)

    def score(n, hh, i, j):
        val = qk[n, hh, i, j] * const(scale, dt)
        if bias is not None:
            val = val + cast(broadcast(bias, (n, hh, i, j)), dt)
        return val if keep is None else te.select(keep(n, hh, i, j), val, te.min_value(dt))
    rt = [b.reduce_axis(t_len, f"rt{r}") for r in range(3)]
    mx = b.compute((bn, heads, s), lambda n, hh, i: te.reduce_max(score(n, hh, i, rt[0]), rt[0]),
                   "T_max")
    ex = b.compute((bn, heads, s, t_len), lambda n, hh, i, j: _call(
        "exp", score(n, hh, i, j) - mx[n, hh, i]), "T_exp")
    tot = b.compute((bn, heads, s), lambda n, hh, i: te.sum(ex[n, hh, i, rt[1]], rt[1]),
                    "T_expsum")

    def pv(n, hh, i, e):
        vv = v[_at(kv_layout, b=n, s=rt[2], h=kvh(hh), d=e)]
        return te.sum(ex[n, hh, i, rt[2]] * cast(vv, dt), rt[2])
    acc = b.compute((bn, heads, s, v.shape[3]), pv, "T_pv", dtype=dt)

    def normalize(*o):
        n, i, hh, e = (dict(zip(layout, o))[c] for c in "bshd")
        return cast(_div(acc[n, hh, i, e], tot[n, hh, i]), out.dtype)
    return b.compute(out.values, normalize, "T_attention", dtype=out.dtype)


def _causal(a, op: str):
    mode = a.get("causal_mask")
    if mode not in (None, "TopLeft", "BottomRight"):
        raise UnsupportedOpError(f"causal_mask {mode!r} has no legalization", op=op)
    return mode


def causal_keep(a, s_len, t_len, op: str):
    """``keep(n, h, i, j)`` of the ``causal_mask`` attr over s queries and t keys (None:
    no mask): key j is seen by query i when j <= i (TopLeft) or j <= i + t - s."""
    mode = _causal(a, op)
    if mode is None:
        return None
    offset = idx(0) if mode == "TopLeft" else E.sub(idx(t_len), idx(s_len))
    return lambda n, hh, i, j: E.BinaryOp("LE", j, E.add(i, offset))


@rule("msc.attention")
def _msc_attention(call):
    """q / k / v [batch, heads, seq, dim], an optional bias [b|1, h|1, s|1, seq_kv]."""
    op = "msc.attention"
    b, (q, k, v, *bias) = inputs(call)
    out, a = output(call), attrs(call)
    keep = causal_keep(a, q.shape[2], k.shape[2], op)
    y = attention(b, q, k, v, out, "bhsd", a, keep=keep, bias=bias[0] if bias else None, op=op)
    return b.prim_func([y], "msc_attention")


def _segment_of(b, starts, length, name: str):
    """seg[i] = #{r : starts[r] <= i}: position i lies in sequence seg - 1 when
    1 <= seg <= len(starts) - 1 (the bounds are data: nothing is indexed by them unclamped)."""
    r = b.reduce_axis(starts.shape[0], "r" + name[-1])
    return b.compute((length,), lambda i: te.sum(te.select(
        E.BinaryOp("LE", cast(starts[r], "int64"), i), idx(1), idx(0)), r), name,
        dtype="int64")


@rule("nn.attention_var_len")
def _attention_var_len(call):
    """Sequences packed along dim 1 of [1, total, heads, dim]: a query attends to the keys of
    its own sequence (seqstart_q / seqstart_k bounds), causal within it."""
    op = "nn.attention_var_len"
    b, (q, k, v, starts_q, starts_k, *_) = inputs(call)
    out, a = output(call), attrs(call)
    mode = _causal(a, op)
    count = E.sub(idx(starts_q.shape[0]), idx(1))
    seg_q = _segment_of(b, starts_q, q.shape[1], "T_seg_q")
    seg_k = _segment_of(b, starts_k, k.shape[1], "T_seg_k")

    def own(i):  # the query's sequence, -1 outside every sequence
        c = seg_q[i]
        valid = E.BinaryOp("And", E.BinaryOp("GE", c, idx(1)), E.BinaryOp("LE", c, count))
        return te.select(valid, c, idx(-1))
    own_q = b.compute((q.shape[1],), own, "T_own_q", dtype="int64")
    if mode is not None:
        def limit(i):  # the last key position query i may see
            seq = _clip(E.sub(seg_q[i], idx(1)), count)
            at = seq if mode == "TopLeft" else E.add(seq, idx(1))  # sequence start / end
            return E.add(E.sub(i, cast(starts_q[at], "int64")), cast(starts_k[at], "int64"))
        last = b.compute((q.shape[1],), limit, "T_last_k", dtype="int64")

    def keep(n, hh, i, j):
        same = E.BinaryOp("EQ", seg_k[j], own_q[i])
        return same if mode is None else E.BinaryOp("And", same, E.BinaryOp("LE", j, last[i]))
    y = attention(b, q, k, v, out, "bshd", a, keep=keep, op=op)
    return b.prim_func([y], "attention_var_len")
