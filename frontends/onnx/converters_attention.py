"""Sequence-model ONNX ops of opsets 23+ (Attention, RotaryEmbedding, TensorScatter,
CausalConvWithState, SwiGLU), decomposed onto matmul / softmax / conv / scatter.

Attention masks are built from ``arange`` comparisons; with static sequence lengths they fold
to constants. Fully masked rows give zeros, as ONNX specifies.
"""

from __future__ import annotations

import math

import numpy as np

from msc import relax
from msc.tir import expr as tir

from .common import call, scalar
from .context import Context, OnnxNode
from .converters_manipulate import need_const

_NEG_INF = -math.inf


def _static(node: OnnxNode, g: Context, x) -> list:
    dims = [tir.as_int(d) for d in need_const(node, g.shape(x), "the input shape")]
    if any(d is None for d in dims):
        raise node.unsupported("attention needs static shapes")
    return dims


def _heads_first(g: Context, x, heads: int, dims: list):
    """(B, S, H*D) -> (B, H, S, D)."""
    y = call("reshape", x, [dims[0], dims[1], heads, dims[2] // heads])
    return g.emit(call("permute_dims", y, [0, 2, 1, 3]))


# --------------------------------------------------------------------------------------------
# Attention.

def convert_attention(g: Context, node: OnnxNode):
    q, k, v, mask, past_k, past_v = node.inputs[:6]
    nonpad = node.inputs[6] if len(node.inputs) > 6 else None
    at = node.attrs
    rank3 = g.ndim(q) == 3
    if rank3:
        q_dims = _static(node, g, q)
        q = _heads_first(g, q, at["q_num_heads"], q_dims)
        k = _heads_first(g, k, at["kv_num_heads"], _static(node, g, k))
        v = _heads_first(g, v, at["kv_num_heads"], _static(node, g, v))
    if past_k is not None:
        k, v = (g.emit(call("concat", [p, x], 2)) for p, x in ((past_k, k), (past_v, v)))
    present_k, present_v = k, v
    batch, q_heads, q_len, head = _static(node, g, q)
    kv_heads, kv_len = _static(node, g, k)[1:3]
    bias = _attention_bias(g, node, q, mask, past_k, nonpad, (batch, q_len, kv_len))
    if q_heads != kv_heads:
        k, v = (g.emit(call("repeat", x, q_heads // kv_heads, 1)) for x in (k, v))
    scale = at["scale"] if at["scale"] is not None else 1 / math.sqrt(head)
    root = scalar(g, math.sqrt(scale), q)
    kt = call("permute_dims", call("multiply", k, root), [0, 1, 3, 2])
    qk = g.emit(call("matmul", call("multiply", q, root), kt))
    if at["softcap"]:
        cap = scalar(g, at["softcap"], q)
        qk = g.emit(call("multiply", call("tanh", call("divide", qk, cap)), cap))
    scores = qk if bias is None else g.emit(call("add", qk, bias))
    probs = _safe_softmax(g, node, scores, bias, g.dtype(q))
    y = g.emit(call("matmul", probs, v))
    if rank3:
        y = g.emit(call("reshape", call("permute_dims", y, [0, 2, 1, 3]), [batch, q_len, -1]))
    mode = at["qk_matmul_output_mode"] or 0
    qk_out = {0: qk, 1: qk, 2: scores, 3: probs}[mode]
    return [y, present_k, present_v, qk_out]


def _attention_bias(g: Context, node: OnnxNode, q, mask, past_k, nonpad, sizes):
    """The additive bias (0 / -inf, plus float masks) or None."""
    batch, q_len, kv_len = sizes
    at = node.attrs
    if mask is not None:
        mask = _pad_mask(g, mask, kv_len)
        mask = _additive(g, mask, q) if g.dtype(mask) == "bool" else mask
    offset = _offset(g, past_k, nonpad, q_len)
    bias = mask
    if at["is_causal"]:
        bias = _add(g, bias, _band(g, q, offset, q_len, kv_len, 0, -1, batch))
    left, right = at.get("left_window_size"), at.get("right_window_size")
    left, right = (-1 if w is None else w for w in (left, right))
    if left >= 0 or right >= 0:
        bias = _add(g, bias, _band(g, q, offset, q_len, kv_len, right, left, batch))
    if nonpad is not None:
        keys = call("arange", 0, kv_len, 1, "int64")
        valid = call("less", keys, call("reshape", nonpad, [-1, 1]))
        bias = _add(g, bias, call("reshape", _additive(g, valid, q), [batch, 1, 1, kv_len]))
    return None if bias is None else g.emit(bias)


def _pad_mask(g: Context, mask, kv_len: int):
    width = kv_len - tir.as_int(g.shape(mask)[-1])
    if width <= 0:
        return mask
    pads = [0] * (2 * g.ndim(mask) - 1) + [width]
    fill = 0.0 if g.dtype(mask) == "bool" else _NEG_INF
    return g.emit(call("nn.pad", mask, pads, fill, "constant"))


def _additive(g: Context, allowed, like):
    """A boolean "may attend" mask as an additive 0 / -inf bias of ``like``'s dtype."""
    return call("where", allowed, scalar(g, 0, like), scalar(g, _NEG_INF, like))


def _offset(g: Context, past_k, nonpad, q_len: int):
    """Where a query block starts among the keys: past length, per-batch, or 0."""
    if past_k is not None:
        return tir.as_int(g.shape(past_k)[2])
    if nonpad is not None:
        return g.emit(call("subtract", call("reshape", nonpad, [-1, 1, 1]),
                           relax.const(q_len, g.dtype(nonpad))))
    return 0


def _band(g: Context, q, offset, q_len, kv_len, ahead: int, behind: int, batch: int):
    """Bias allowing key j for query i iff -behind <= (i + offset) - j <= ahead (-1: no
    bound on that side); causal is ahead=0, behind=-1."""
    i = call("reshape", call("arange", 0, q_len, 1, "int64"), [q_len, 1])
    j = call("reshape", call("arange", 0, kv_len, 1, "int64"), [1, kv_len])
    pos = i if isinstance(offset, int) and offset == 0 else call("add", i, offset)
    diff = call("subtract", pos, j)
    allowed = None
    if ahead >= 0:
        allowed = call("greater_equal", diff, relax.const(-ahead, "int64"))
    if behind >= 0:
        near = call("less_equal", diff, relax.const(behind, "int64"))
        allowed = near if allowed is None else call("logical_and", allowed, near)
    bias = _additive(g, allowed, q)
    return bias if isinstance(offset, int) else call("reshape", bias, [batch, 1, q_len,
                                                                         kv_len])


def _add(g: Context, bias, extra):
    return extra if bias is None else call("add", bias, extra)


def _safe_softmax(g: Context, node: OnnxNode, scores, bias, dtype: str):
    precision = node.attrs.get("softmax_precision")
    if precision:
        from .dtypes import relax_dtype

        scores = call("astype", scores, relax_dtype(precision))
    probs = g.emit(call("nn.softmax", scores, -1))
    if bias is not None:
        peak = g.emit(call("max", bias, -1, True))
        masked = call("logical_and", call("isinf", peak),
                      call("less", peak, scalar(g, 0, peak)))
        probs = g.emit(call("where", masked, scalar(g, 0, probs), probs))
    return probs if g.dtype(probs) == dtype else g.emit(call("astype", probs, dtype))


# --------------------------------------------------------------------------------------------
# RotaryEmbedding.

def convert_rotary_embedding(g: Context, node: OnnxNode):
    x, cos, sin, positions = node.inputs[:4]
    dims = _static(node, g, x)
    if len(dims) == 4:  # (B, H, S, D) -> (B, S, H, D)
        y = g.emit(call("permute_dims", x, [0, 2, 1, 3]))
    else:
        heads = node.attrs["num_heads"]
        y = g.emit(call("reshape", x, [dims[0], dims[1], heads, dims[2] // heads]))
    head = _static(node, g, y)[3]
    rot = node.attrs["rotary_embedding_dim"] or head
    if positions is not None:
        cos, sin = (call("take", c, positions, 0) for c in (cos, sin))
    cos, sin = (g.emit(call("expand_dims", c, [2])) for c in (cos, sin))
    out = _rotate(g, y, cos, sin, rot, bool(node.attrs["interleaved"]))
    if rot < head:
        rest = call("strided_slice", y, [3], [rot], [head])
        out = g.emit(call("concat", [out, rest], 3))
    if len(dims) == 4:
        return g.emit(call("permute_dims", out, [0, 2, 1, 3]))
    return g.emit(call("reshape", out, dims))


def _rotate(g: Context, y, cos, sin, rot: int, interleaved: bool):
    if interleaved:
        x1 = call("strided_slice", y, [3], [0], [rot], [2])
        x2 = call("strided_slice", y, [3], [1], [rot], [2])
    else:
        x1 = call("strided_slice", y, [3], [0], [rot // 2])
        x2 = call("strided_slice", y, [3], [rot // 2], [rot])
    x1, x2 = g.emit(x1), g.emit(x2)
    real = call("subtract", call("multiply", cos, x1), call("multiply", sin, x2))
    imag = call("add", call("multiply", sin, x1), call("multiply", cos, x2))
    if not interleaved:
        return g.emit(call("concat", [real, imag], 3))
    pair = call("stack", [real, imag], 4)
    dims = [tir.as_int(d) for d in g.shape(x1)]
    return g.emit(call("reshape", pair, dims[:3] + [rot]))


# --------------------------------------------------------------------------------------------
# KV-cache writes, causal depthwise conv with state, SwiGLU.

def convert_tensor_scatter(g: Context, node: OnnxNode):
    cache, update, where = node.inputs[:3]
    dims = _static(node, g, update)
    rank, axis = len(dims), node.attrs["axis"] % len(dims)
    if where is None:
        where = relax.const(np.zeros(dims[0], "int64"))
    start = call("reshape", call("astype", where, "int64"), [-1] + [1] * (rank - 1))
    steps = [1] * rank
    steps[axis] = dims[axis]
    pos = call("add", start, call("reshape", call("arange", 0, dims[axis], 1, "int64"), steps))
    if node.attrs["mode"] == "circular":
        pos = call("floor_mod", pos, relax.const(_static(node, g, cache)[axis], "int64"))
    index = call("broadcast_to", pos, dims)
    return g.emit(call("scatter_elements", cache, index, update, axis))


def convert_causal_conv_with_state(g: Context, node: OnnxNode):
    x, w, b, past = node.inputs[:4]
    batch, channels, _ = _static(node, g, x)
    k = _static(node, g, w)[2]
    if past is None:
        past = relax.const(np.zeros((batch, channels, k - 1), g.dtype(x)))
    padded = g.emit(call("concat", [past, x], 2))
    y = call("nn.conv1d", padded, w, groups=channels)
    if b is not None:
        y = call("add", y, call("reshape", b, [1, -1, 1]))
    y = g.emit(y)
    if (node.attrs.get("activation") or "none") in ("silu", "swish"):
        y = g.emit(call("multiply", y, call("sigmoid", y)))
    length = _static(node, g, padded)[2]
    state = g.emit(call("strided_slice", padded, [2], [length - (k - 1)], [length]))
    return [y, state]


# --------------------------------------------------------------------------------------------
# LinearAttention: the recurrence, unrolled over a static sequence (state in float32).

def convert_linear_attention(g: Context, node: OnnxNode):
    q, k, v, past, decay, beta = node.inputs[:6]
    at = node.attrs
    q_heads, kv_heads = at["q_num_heads"], at["kv_num_heads"]
    batch, steps, _ = _static(node, g, q)
    g.reserve_unroll(node, steps, per_step=8)  # the ops _linear_attention_step emits, about
    q4, k4, v4 = (_f32(g, _heads_first(g, x, h, _static(node, g, x)))
                  for x, h in ((q, q_heads), (k, kv_heads), (v, kv_heads)))
    dk, dv = _static(node, g, k4)[3], _static(node, g, v4)[3]
    decay4 = None if decay is None else _f32(g, _per_step(node, g, decay, kv_heads))
    beta4 = None if beta is None else _f32(g, _per_step(node, g, beta, None))
    state = relax.const(np.zeros((batch, kv_heads, dk, dv), "float32")) if past is None \
        else _f32(g, past)
    scale = at["scale"] or 1 / math.sqrt(dk)
    outs = []
    for i in range(steps):
        q_t, k_t, v_t = (g.emit(call("take", x, relax.const(i), 2)) for x in (q4, k4, v4))
        state = _linear_attention_step(g, state, k_t, v_t, i, decay4, beta4)
        read = state if q_heads == kv_heads else call("repeat", state, q_heads // kv_heads, 1)
        o = call("matmul", call("expand_dims", q_t, [2]), read)
        outs.append(g.emit(call("multiply", call("squeeze", o, [2]),
                                relax.const(scale, "float32"))))
    y = call("permute_dims", call("stack", outs, 2), [0, 2, 1, 3])
    y = g.emit(call("astype", call("reshape", y, [batch, steps, -1]), g.dtype(q)))
    return [y, g.emit(call("astype", state, g.dtype(past if past is not None else q)))]


def _f32(g: Context, x):
    return x if g.dtype(x) == "float32" else g.emit(call("astype", x, "float32"))


def _per_step(node: OnnxNode, g: Context, x, heads):
    """decay / beta (B, T, H or H*D) -> (B, H, T, 1 or D)."""
    b, t, last = _static(node, g, x)
    if heads is not None and last != heads:
        return _heads_first(g, x, heads, [b, t, last])
    return g.emit(call("permute_dims", call("reshape", x, [b, t, last, 1]), [0, 2, 1, 3]))


def _linear_attention_step(g: Context, state, k_t, v_t, i: int, decay4, beta4):
    if decay4 is not None:
        gate = call("exp", call("take", decay4, relax.const(i), 2))
        state = call("multiply", state, call("expand_dims", gate, [-1]))
    if beta4 is not None:
        retrieved = call("squeeze", call("matmul", call("expand_dims", k_t, [2]), state), [2])
        beta_t = call("take", beta4, relax.const(i), 2)
        v_t = call("multiply", beta_t, call("subtract", v_t, retrieved))
    outer = call("multiply", call("expand_dims", k_t, [-1]), call("expand_dims", v_t, [-2]))
    return g.emit(call("add", state, outer))


def convert_swiglu(g: Context, node: OnnxNode):
    a, b = node.inputs[:2]
    alpha = node.attrs.get("alpha")
    scaled = a if alpha in (None, 1.0) else call("multiply", a, scalar(g, alpha, a))
    return g.emit(call("multiply", call("multiply", a, call("sigmoid", scaled)), b))


CONVERTERS = {
    "Attention": {23: convert_attention},
    "RotaryEmbedding": {23: convert_rotary_embedding},
    "TensorScatter": {24: convert_tensor_scatter},
    "CausalConvWithState": {27: convert_causal_conv_with_state},
    "SwiGLU": {28: convert_swiglu}, "LinearAttention": {27: convert_linear_attention},
}
