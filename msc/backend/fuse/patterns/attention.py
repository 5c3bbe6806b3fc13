"""Attention regions as one fused kernel call (kernels/attention.py), heads read in place.

Two forms are matched, both on static float32 shapes:

- ``nn.attention`` / ``nn.attention_bias`` (BSNH; what from_torch makes of SDPA);
- the decomposed form exporters write: ``matmul(q * c, k^T * c)``, optional scalar scaling,
  an optional mask ``add``, ``softmax`` over the last axis, an optional
  ``where(isnan(p), 0, p)``, ``matmul(p, v)``; every intermediate used only inside.

q, k and v are then traced back through layout ops (reshape, permute_dims, split, ...) to the
arrays they are views of (views.py), and the result forward through single-use reshapes and
permutes to the array they end in, so the fused call reads the projections' outputs and writes
the output projection's input directly: the head transposes disappear. A constant mask that is
zero on and below the diagonal and -inf (or below -1e30) above it becomes the kernel's causal
limit; an all-zero one is dropped.
"""

from __future__ import annotations

import math

import numpy as np

from ...kernels.attention import AttentionKernel, AttentionLayout, Operand
from ...runtime.program import Node
from .views import Graph, Strided

__all__ = ["fuse_attention"]

_MASKED = -1e30  # mask values at or below this make exp() exactly 0 in float32


def fuse_attention(graph: Graph) -> int:
    """Replace every matched attention region of ``graph.program``; returns how many."""
    count = 0
    for node in graph.nodes():
        if node.kind != "call" or node.site is None:
            continue
        found = _sdpa(graph, node) if node.op.startswith("nn.attention") else (
            _decomposed(graph, node) if node.op == "matmul" else None)
        if found is not None and _emit(graph, node, found):
            count += 1
    return count


# ---------------------------------------------------------------------------------------------
# Matching: each gives (q, k, v, bias) value ids, the logical dim order of each, scale, flags


def _sdpa(graph: Graph, node: Node) -> dict | None:
    site = node.site
    if site.attr("window_size") is not None or len(node.ins) not in (3, 4):
        return None
    if site.attr("causal_mask") not in (None, "TopLeft", "BottomRight"):
        return None
    q_shape = graph.shape(node.ins[0])
    if q_shape is None or len(q_shape) != 4:
        return None
    scale = site.attr("scale")
    bsnh = (0, 2, 1, 3)  # [b, s, n, h] -> [b, n, s, h]: heads lead, then rows, columns
    return {"q": (node.ins[0], bsnh), "k": (node.ins[1], bsnh), "v": (node.ins[2], bsnh),
            "bias": (node.ins[3], None) if len(node.ins) > 3 else None, "out_order": bsnh,
            "scale": 1 / math.sqrt(q_shape[3]) if scale is None else float(scale),
            "causal": site.attr("causal_mask"), "nan_to_zero": False}


def _scalar(graph: Graph, vid: int) -> float | None:
    c = graph.const(vid)
    if isinstance(c, np.ndarray) and c.size == 1 and c.dtype == np.float32:
        return float(c.reshape(-1)[0])
    return None


def _unscale(graph: Graph, vid: int) -> tuple[int, float]:
    """Strip single-use ``x * c`` / ``x / c`` (c a scalar constant) off ``vid``."""
    scale = 1.0
    while graph.single_use(vid) and (node := graph.call(vid, "multiply", "divide")):
        x, c = node.ins[:2]
        if node.op == "multiply" and _scalar(graph, x) is not None:
            x, c = c, x
        value = _scalar(graph, c)
        if value is None or value == 0.0:
            break
        scale, vid = (scale * value if node.op == "multiply" else scale / value), x
    return vid, scale


def _softmax_input(graph: Graph, p: int) -> tuple[int, bool] | None:
    """(the softmax node's output, nan_to_zero) behind ``matmul``'s first operand."""
    where = graph.call(p, "where")
    if where is None:
        return p, False
    cond, zero, x = where.ins
    isnan = graph.call(cond, "isnan")
    if (not graph.single_use(p) or isnan is None or isnan.ins[0] != x
            or _scalar(graph, zero) != 0.0 or graph.uses.get(x) != 2
            or not graph.single_use(cond)):
        return None
    return x, True


def _decomposed(graph: Graph, node: Node) -> dict | None:
    found = _softmax_input(graph, node.ins[0])
    if found is None:
        return None
    p, nan_to_zero = found
    softmax = graph.call(p, "nn.softmax")
    shape = graph.shape(p)
    if softmax is None or shape is None or (not nan_to_zero and not graph.single_use(p)):
        return None
    if int(softmax.site.attr("axis", -1)) % len(shape) != len(shape) - 1:
        return None
    x = softmax.ins[0]
    if not graph.single_use(x):
        return None
    bias, scores = None, _scores(graph, x)
    add = graph.call(x, "add")
    if scores is None and add is not None:
        for a, b in (add.ins[:2], add.ins[1::-1]):
            if (scores := _scores(graph, a)) is not None:
                bias = b
                break
    if scores is None:
        return None
    q, k, scale = scores
    lead = tuple(range(len(shape) - 2))
    return {"q": (q, None), "k": (k, lead + (len(shape) - 1, len(shape) - 2)),
            "v": (node.ins[1], None), "bias": (bias, None) if bias is not None else None,
            "out_order": None, "scale": scale, "causal": None, "nan_to_zero": nan_to_zero}


def _scores(graph: Graph, vid: int) -> tuple[int, int, float] | None:
    """(q, k^T, scale) when ``vid`` is ``matmul(q * c1, k^T * c2) * c3``, single use."""
    vid, scale = _unscale(graph, vid)
    mm = graph.call(vid, "matmul")
    if mm is None or not graph.single_use(vid):
        return None
    q, sq = _unscale(graph, mm.ins[0])
    k, sk = _unscale(graph, mm.ins[1])
    return q, k, scale * sq * sk


# ---------------------------------------------------------------------------------------------
# Layout: heads, rows and columns of each operand


def _permuted(view: Strided, order) -> Strided:
    if order is None:
        return view
    return Strided(tuple(view.shape[d] for d in order), view.offset,
                   tuple(view.strides[d] for d in order))


def _operand(view: Strided, base_shape: tuple, coords: list) -> Operand:
    """Offsets of every head (``coords``: per lead dim of the output, the head's index); a
    dim of size 1 broadcasts (its stride is 0)."""
    lead = len(view.shape) - 2
    off = np.full(len(coords[0]) if coords else 1, view.offset, np.int64)
    pad = len(coords) - lead
    for d in range(lead):
        off = off + coords[pad + d] * view.strides[d]
    return Operand(base_shape, off, view.strides[-2], view.strides[-1])


def _traced(graph: Graph, vid: int, order) -> tuple[int, Strided, tuple] | None:
    found = graph.view_of(vid)
    if found is None:
        return None
    base, view = found
    return base, _permuted(view, order), graph.shape(base)


def _emit(graph: Graph, node: Node, m: dict) -> bool:
    program = graph.program
    parts = {name: _traced(graph, *m[name]) for name in ("q", "k", "v")}
    placed = graph.placed(node.out)
    if any(p is None for p in parts.values()) or placed is None:
        return False
    if any(program.values[p[0]].sinfo.dtype != "float32" for p in parts.values()):
        return False
    end, out_view, _ = placed
    out_view = _permuted(out_view, m["out_order"])
    q, k, v = (parts[n][1] for n in ("q", "k", "v"))
    lead = out_view.shape[:-2]
    s, t, h, hv = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    if k.shape[-1] != h or v.shape[-2] != t or out_view.shape[-1] != hv or q.strides[-1] != 1:
        return False
    if out_view.strides[-1] != 1 or len(q.shape) != len(out_view.shape):
        return False
    heads = math.prod(lead)
    coords = list(np.unravel_index(np.arange(heads), lead)) if lead else []
    kv_coords = _kv_coords(coords, q.shape[:-2], k.shape[:-2])
    if q.shape[:-2] != lead or kv_coords is None or v.shape[:-2] != k.shape[:-2]:
        return False
    bias, causal = _bias(graph, m, lead, s, t, coords)
    if bias is False:
        return False
    layout = AttentionLayout(
        s, t, h, hv, _operand(q, parts["q"][2], coords), _operand(k, parts["k"][2], kv_coords),
        _operand(v, parts["v"][2], kv_coords), _operand(out_view, graph.shape(end), coords),
        bias[1] if bias else None)
    kernel = AttentionKernel(layout, m["scale"], causal or m["causal"], m["nan_to_zero"],
                             bias_const=bias[2] if bias else None, op=f"attention ({node.name})")
    ins = tuple(parts[n][0] for n in ("q", "k", "v")) + ((bias[0],) if bias and bias[0] is not None
                                                       else ())
    graph.replace(end, ins, kernel, "attention", program.values[end].name or node.name)
    return True


def _kv_coords(coords: list, q_lead: tuple, k_lead: tuple) -> list | None:
    """Head coordinates in k / v: the same, or grouped (k has fewer heads on the last lead
    dim: query head n reads key head n // group)."""
    if k_lead == q_lead or not coords:
        return coords
    if len(k_lead) != len(q_lead) or k_lead[:-1] != q_lead[:-1] or q_lead[-1] % k_lead[-1]:
        return None
    group = q_lead[-1] // k_lead[-1]
    return coords[:-1] + [coords[-1] // group]


def _bias(graph: Graph, m: dict, lead: tuple, s: int, t: int, coords: list):
    """(runtime value or None, Operand, constant or None) of the mask, None without one, and
    the causal mode a constant mask turned into; (False, None) when it cannot be read."""
    if m["bias"] is None:
        return None, None
    vid = m["bias"][0]
    const = graph.const(vid)
    if isinstance(const, np.ndarray):
        return _const_bias(const, lead, s, t, coords)
    traced = _traced(graph, vid, None)
    if traced is None or graph.values[vid].sinfo.dtype != "float32":
        return False, None
    base, view, shape = traced
    if not _broadcasts(view.shape[:-2], lead) or view.shape[-1] != t or view.strides[-1] != 1:
        return False, None
    if view.shape[-2] not in (1, s):
        return False, None
    return (base, _operand(view, shape, coords), None), None


def _broadcasts(shape: tuple, lead: tuple) -> bool:
    """Whether ``shape`` (head dims of an operand) broadcasts to ``lead`` (1s or equal)."""
    return len(shape) <= len(lead) and all(
        a in (1, b) for a, b in zip(reversed(shape), reversed(lead)))


def _const_bias(c: np.ndarray, lead: tuple, s: int, t: int, coords: list):
    if c.dtype != np.float32 or c.ndim > len(lead) + 2 or not _broadcasts(c.shape[:-2], lead):
        return False, None
    try:
        full = np.broadcast_to(c, c.shape[:-2] + (s, t)) if c.ndim >= 2 else None
    except ValueError:
        return False, None
    if full is None:
        return False, None
    if not full.any():
        return None, None
    for mode, offset in (("TopLeft", 0), ("BottomRight", t - s)):
        keep = np.arange(t)[None, :] <= np.arange(s)[:, None] + offset
        if np.all(full[..., keep] == 0) and np.all(full[..., ~keep] <= _MASKED):
            return None, mode
    data = np.ascontiguousarray(np.broadcast_to(c, c.shape[:-1] + (t,)), np.float32)
    data = data.reshape((1,) * (len(lead) + 2 - data.ndim) + data.shape)
    strides = [0] * data.ndim
    step = 1
    for d in range(data.ndim - 1, -1, -1):
        strides[d] = step if data.shape[d] > 1 else 0
        step *= data.shape[d]
    view = Strided(data.shape, 0, tuple(strides))
    return (None, _operand(view, data.shape, coords), data), None
