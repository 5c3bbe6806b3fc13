"""The ``attn_mask`` of an ``Attention`` spelled out (see onnx_refuse_attention.py): the scores
plus a bias, and the guard that gives fully masked rows zeros, as ONNX specifies:

    p = Where(IsInf[detect_positive=0](ReduceMax(bias, [-1], keepdims=1)), 0, Softmax(s + bias))

``bias`` is the mask as given (float, the inputs' dtype), a boolean mask as
``Where(mask, 0, -inf)``, either plus the constant causal bias (``is_causal``). The mask must
already span every key (the importer pads a shorter one; a padded mask is read as it is).
"""

from __future__ import annotations

import numpy as np

from .onnx_refuse_ops import _Walk

__all__ = ["masked_guard", "split_bias"]


def masked_guard(w: _Walk, value: str):
    """(softmax output, bias, nodes) of the fully-masked-row guard making ``value``."""
    where = w.back(value, "Where")
    if where is None or len(where["inputs"]) != 3 or w.scalar(where["inputs"][1]) != 0.0:
        return None
    test = w.back(where["inputs"][0], "IsInf")
    if test is None or test["attrs"].get("detect_positive", 1) != 0 or \
            test["attrs"].get("detect_negative", 1) != 1:
        return None
    peak = w.back(test["inputs"][0], "ReduceMax")
    bias = peak and peak["inputs"][0]
    shape = bias and w.shape(bias)
    if not shape or peak["attrs"].get("keepdims", 1) != 1 or _axes(w, peak) not in (
            [-1], [len(shape) - 1]):
        return None
    return where["inputs"][2], bias, [where, test, peak]


def _axes(w: _Walk, node: dict) -> list | None:
    axes = node["attrs"].get("axes")
    if axes is None and len(node["inputs"]) > 1:
        data = w.const(node["inputs"][1])
        axes = None if data is None else data.reshape(-1).tolist()
    return axes


def split_bias(w: _Walk, bias: str, q: str, k: str, causal) -> tuple | None:
    """(attn_mask, attrs, nodes) of a guarded bias read by the scores' Add and the guard's
    ReduceMax; ``causal(value)`` tells a constant causal bias."""
    attrs, parts = {}, []
    made = w.back(bias, "Add", uses=2)
    if made is not None and causal(made["inputs"][1]):
        attrs["is_causal"], parts = 1, [made]
        bias = made["inputs"][0]
        mask = _boolean(w, bias, q, uses=1)
    else:
        mask = _boolean(w, bias, q, uses=2)
    if mask is not None:
        parts.append(w.made[bias])
        bias = mask
    elif w.dtypes.get(bias) != w.dtypes.get(q):
        return None
    shape, keys, queries = w.shape(bias), w.shape(k), w.shape(q)
    if shape is None or keys is None or queries is None or not 2 <= len(shape) <= 4 or \
            shape[-1] != keys[-2] or shape[-2] not in (1, queries[-2]):
        return None
    return bias, attrs, parts


def _boolean(w: _Walk, value: str, q: str, uses: int) -> str | None:
    """The boolean mask of ``Where(mask, 0, -inf)`` making ``value``, else None."""
    where = w.back(value, "Where", uses)
    if where is None or w.dtypes.get(where["inputs"][0]) != "bool" or \
            w.dtypes.get(value) != w.dtypes.get(q):
        return None
    zero, low = (w.scalar(v) for v in where["inputs"][1:])
    return where["inputs"][0] if zero == 0.0 and low is not None and np.isneginf(low) else None


def split_past(w: _Walk, k: str, v: str) -> tuple | None:
    """((new k, new v), (past_key, past_value), the two Concats) when the keys and values
    read are ``Concat([past, new], axis=2)`` of 4-D past tensors: ONNX Attention's
    present_key / present_value, which it then writes itself."""
    found = []
    for value in (k, v):
        node = w.made.get(value)
        past = node and node["op_type"] == "Concat" and not node["domain"] and \
            len(node["inputs"]) == 2 and node["inputs"][0]
        shape = past and w.shape(past)
        if not shape or len(shape) != 4 or node["attrs"].get("axis") not in (2, -2):
            return None
        found.append(node)
    news = tuple(n["inputs"][1] for n in found)
    if any(len(w.shape(x) or []) not in (3, 4) for x in news):
        return None
    return news, tuple(n["inputs"][0] for n in found), found


def split_softcap(w: _Walk, scores: str) -> tuple:
    """(raw scores, {"softcap": c}, nodes) of ``Mul(Tanh(Div(s, c)), c)``, else (scores, {},
    [])."""
    mul = w.back(scores, "Mul")
    tanh = mul and w.back(mul["inputs"][0], "Tanh")
    div = tanh and w.back(tanh["inputs"][0], "Div")
    cap = div and w.scalar(div["inputs"][1])
    if not cap or cap <= 0 or w.scalar(mul["inputs"][1]) != cap:
        return scores, {}, []
    return div["inputs"][0], {"softcap": cap}, [mul, tanh, div]


def unrepeat(w: _Walk, value: str) -> tuple | None:
    """(kv, groups, nodes) of ``Reshape(Tile(Unsqueeze(kv, [2]), [1, 1, g, 1, 1]),
    [b, h * g, s, d])``: each kv head read by g query heads in a row (grouped heads)."""
    view = w.back(value, "Reshape")
    tile = view and w.back(view["inputs"][0], "Tile")
    grow = tile and w.back(tile["inputs"][0], "Unsqueeze")
    axes = grow and w.const(grow["inputs"][1]) if grow and len(grow["inputs"]) > 1 else None
    reps, dims = (w.const(tile["inputs"][1]), w.const(view["inputs"][1])) if axes is not None \
        else (None, None)
    kv = grow and grow["inputs"][0]
    shape = kv and w.shape(kv)
    if reps is None or dims is None or not shape or len(shape) != 4 or \
            axes.reshape(-1).tolist() not in ([2], [-3]) or reps.size != 5:
        return None
    groups = int(reps[2])
    b, h, s, d = shape
    if reps.tolist() != [1, 1, groups, 1, 1] or dims.tolist() != [b, h * groups, s, d]:
        return None
    return kv, groups, [view, tile, grow]
