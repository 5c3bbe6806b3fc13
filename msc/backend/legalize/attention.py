"""Rules for attention: nn.attention / attention_bias (b, s, h, d), msc.attention (b, h, s, d)
and nn.attention_var_len (sequences packed along one axis), all on one softmax(q k^T) v builder.
Scores are max-subtracted and 16-bit floats accumulate in float32; grouped-query attention maps
each query head to its key / value head.
"""

from __future__ import annotations

import math

from ...errors import UnsupportedOpError
from ...tir import expr as E
from . import te
from .common import (
    acc_dtype,
    attrs,
    broadcast,
    clip_index,
    div,
    inputs,
    output,
    prim_call,
    rule,
)
from .te import cast, const, idx


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
    ex = b.compute((bn, heads, s, t_len), lambda n, hh, i, j: prim_call(
        "exp", score(n, hh, i, j) - mx[n, hh, i]), "T_exp")
    tot = b.compute((bn, heads, s), lambda n, hh, i: te.sum(ex[n, hh, i, rt[1]], rt[1]),
                    "T_expsum")

    def pv(n, hh, i, e):
        vv = v[_at(kv_layout, b=n, s=rt[2], h=kvh(hh), d=e)]
        return te.sum(ex[n, hh, i, rt[2]] * cast(vv, dt), rt[2])
    acc = b.compute((bn, heads, s, v.shape[3]), pv, "T_pv", dtype=dt)

    def normalize(*o):
        n, i, hh, e = (dict(zip(layout, o))[c] for c in "bshd")
        return cast(div(acc[n, hh, i, e], tot[n, hh, i]), out.dtype)
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


@rule("nn.attention", "nn.attention_bias")
def _attention(call):
    """q (B, S, H, D), k (B, T, H, D), v (B, T, H, Dv): softmax(q k^T * scale + bias) v."""
    b, (q, k, v, *bias) = inputs(call)
    out, a = output(call), attrs(call)
    keep = causal_keep(a, q.shape[1], k.shape[1], "nn.attention")
    y = attention(b, q, k, v, out, "bshd", a, keep=keep, bias=bias[0] if bias else None,
                  op="nn.attention")
    return b.prim_func([y], "attention")


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
            seq = clip_index(E.sub(seg_q[i], idx(1)), count)
            at = seq if mode == "TopLeft" else E.add(seq, idx(1))  # sequence start / end
            return E.add(E.sub(i, cast(starts_q[at], "int64")), cast(starts_k[at], "int64"))
        last = b.compute((q.shape[1],), limit, "T_last_k", dtype="int64")

    def keep(n, hh, i, j):
        same = E.BinaryOp("EQ", seg_k[j], own_q[i])
        return same if mode is None else E.BinaryOp("And", same, E.BinaryOp("LE", j, last[i]))
    y = attention(b, q, k, v, out, "bshd", a, keep=keep, op=op)
    return b.prim_func([y], "attention_var_len")
