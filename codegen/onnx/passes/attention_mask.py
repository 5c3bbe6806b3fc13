"""The ``attn_mask`` of an ``Attention`` spelled out (see codegen/onnx/passes/attention.py): the scores
plus a bias, and the guard that gives fully masked rows zeros, as ONNX specifies:

    p = Where(IsInf[detect_positive=0](ReduceMax(bias, [-1], keepdims=1)), 0, Softmax(s + bias))

``bias`` is the mask as given (float, the inputs' dtype), a boolean mask as
``Where(mask, 0, -inf)``, either plus the constant causal bias (``is_causal``). The mask must
already span every key (the importer pads a shorter one; a padded mask is read as it is).
"""

from __future__ import annotations

import numpy as np

from ..node import OnnxNode
from .walk import Walk

__all__ = ["masked_guard", "split_bias"]


def masked_guard(w: Walk, value: str):
    """(softmax output, bias, nodes) of the fully-masked-row guard making ``value``."""
    where = w.back(value, "Where")
    if where is None or len(where.inputs) != 3 or w.scalar(where.inputs[1]) != 0.0:
        return None
    test = w.back(where.inputs[0], "IsInf")
    if test is None or test.attrs.get("detect_positive", 1) != 0 or \
            test.attrs.get("detect_negative", 1) != 1:
        return None
    peak = w.back(test.inputs[0], "ReduceMax")
    bias = peak and peak.inputs[0]
    shape = bias and w.shape(bias)
    if not shape or peak.attrs.get("keepdims", 1) != 1 or _axes(w, peak) not in (
            [-1], [len(shape) - 1]):
        return None
    return where.inputs[2], bias, [where, test, peak]


def _axes(w: Walk, node: OnnxNode) -> list | None:
    axes = node.attrs.get("axes")
    if axes is None and len(node.inputs) > 1:
        data = w.const(node.inputs[1])
        axes = None if data is None else data.reshape(-1).tolist()
    return axes


def split_bias(w: Walk, bias: str, q: str, k: str) -> tuple | None:
    """(attn_mask, attrs, nodes) of a guarded bias read by the scores' Add and the guard's
    ReduceMax: the mask plus constant 2-D band biases (is_causal / window sizes)."""
    parts, band, uses = [], None, 2
    while True:
        made = w.back(bias, "Add", uses)
        data = made and w.const(made.inputs[1])
        if data is None or data.ndim != 2:
            break
        band = data if band is None else band + data
        parts.append(made)
        bias, uses = made.inputs[0], 1
    attrs = {} if band is None else {"_band": band}
    mask = _boolean(w, bias, q, uses)
    if mask is not None:
        parts.append(w.made[bias])
        bias = mask
    elif w.dtypes.get(bias) != w.dtypes.get(q):
        return None
    shape, keys, queries = w.shape(bias), w.shape(k), w.shape(q)
    if shape is None or keys is None or queries is None or not 1 <= len(shape) <= 4 or \
            shape[-1] != keys[-2] or len(shape) > 1 and shape[-2] != queries[-2]:
        return None
    return bias, attrs, parts


def _boolean(w: Walk, value: str, q: str, uses: int) -> str | None:
    """The boolean mask of ``Where(mask, 0, -inf)`` making ``value``, else None."""
    where = w.back(value, "Where", uses)
    if where is None or w.dtypes.get(where.inputs[0]) != "bool" or \
            w.dtypes.get(value) != w.dtypes.get(q):
        return None
    zero, low = (w.scalar(v) for v in where.inputs[1:])
    return where.inputs[0] if zero == 0.0 and low is not None and np.isneginf(low) else None


def split_past(w: Walk, k: str, v: str) -> tuple | None:
    """((new k, new v), (past_key, past_value), the two Concats) when the keys and values
    read are ``Concat([past, new], axis=2)`` of 4-D past tensors: ONNX Attention's
    present_key / present_value, which it then writes itself."""
    found = []
    for value in (k, v):
        node = w.made.get(value)
        past = node and node.op_type == "Concat" and not node.domain and \
            len(node.inputs) == 2 and node.inputs[0]
        shape = past and w.shape(past)
        if not shape or len(shape) != 4 or node.attrs.get("axis") not in (2, -2):
            return None
        found.append(node)
    news = tuple(n.inputs[1] for n in found)
    if any(len(w.shape(x) or []) not in (3, 4) for x in news):
        return None
    return news, tuple(n.inputs[0] for n in found), found


def split_softcap(w: Walk, scores: str) -> tuple:
    """(raw scores, {"softcap": c}, nodes) of ``Mul(Tanh(Div(s, c)), c)``, else (scores, {},
    [])."""
    mul = w.back(scores, "Mul")
    tanh = mul and w.back(mul.inputs[0], "Tanh")
    div = tanh and w.back(tanh.inputs[0], "Div")
    cap = div and w.scalar(div.inputs[1])
    if not cap or cap <= 0 or w.scalar(mul.inputs[1]) != cap:
        return scores, {}, []
    return div.inputs[0], {"softcap": cap}, [mul, tanh, div]


def unrepeat(w: Walk, value: str) -> tuple | None:
    """(kv, groups, nodes) of ``Reshape(Tile(Unsqueeze(kv, [2]), [1, 1, g, 1, 1]),
    [b, h * g, s, d])``: each kv head read by g query heads in a row (grouped heads)."""
    view = w.back(value, "Reshape")
    tile = view and w.back(view.inputs[0], "Tile")
    grow = tile and w.back(tile.inputs[0], "Unsqueeze")
    axes = grow and w.const(grow.inputs[1]) if grow and len(grow.inputs) > 1 else None
    reps, dims = (w.const(tile.inputs[1]), w.const(view.inputs[1])) if axes is not None \
        else (None, None)
    kv = grow and grow.inputs[0]
    shape = kv and w.shape(kv)
    if reps is None or dims is None or not shape or len(shape) != 4 or \
            axes.reshape(-1).tolist() not in ([2], [-3]) or reps.size != 5:
        return None
    groups = int(reps[2])
    b, h, s, d = shape
    if reps.tolist() != [1, 1, groups, 1, 1] or dims.tolist() != [b, h * groups, s, d]:
        return None
    return kv, groups, [view, tile, grow]


def band_attrs(data, opset: int, offset: int = 0) -> OnnxNode | None:
    """Attention attrs of a constant [q, kv] 0 / -inf bias that allows key j for query i
    iff (is_causal: j <= i), (left_window_size l: i - j <= l), (right_window_size r:
    j - i <= r), else None (window sizes from opset 25 on); query i is i + ``offset``."""
    data = None if data is None else np.asarray(data)
    if data is None or data.ndim != 2 or not np.all((data == 0) | np.isneginf(data)):
        return None
    allowed = data == 0
    diff = np.subtract(*np.indices(data.shape)) + offset  # i - j, i after the past keys
    if not allowed.any():
        return None
    found = {"is_causal": int(diff[allowed].min() >= 0),
             "left_window_size": int(diff[allowed].max()),
             "right_window_size": int(-diff[allowed].min())}
    if found["is_causal"]:
        found["right_window_size"] = -1
    for key in ("left_window_size", "right_window_size"):  # unbounded when that fits too
        if np.array_equal(_band(diff, {**found, key: -1}), allowed):
            found[key] = -1
    if not np.array_equal(_band(diff, found), allowed):
        return None
    attrs = {k: v for k, v in found.items() if v > 0 or v == 0 and k != "is_causal"}
    if opset < 25 and set(attrs) - {"is_causal"}:
        return None
    return attrs


def _band(diff, attrs: dict):
    allowed = np.ones(diff.shape, bool)
    if attrs.get("is_causal"):
        allowed &= diff >= 0
    if attrs.get("left_window_size", -1) >= 0:
        allowed &= diff <= attrs["left_window_size"]
    if attrs.get("right_window_size", -1) >= 0:
        allowed &= -diff <= attrs["right_window_size"]
    return allowed
