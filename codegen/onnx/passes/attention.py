"""ONNX ``Attention`` (opset 23) from the way importers spell it, on the pipeline's graph:

    MatMul(Softmax(MatMul(Mul(Q, s), Transpose(Mul(K, s), [0, 1, 3, 2]))), V)

with ``s = sqrt(scale)`` on both operands, optionally a constant causal mask added before the
Softmax (``is_causal``; the all-false Where of the fully-masked-row guard after it), and for
3-D inputs the Reshape / Transpose into heads around it (``q_num_heads`` /
``kv_num_heads``); a mask given as an input with its fully-masked-row guard
(codegen/onnx/passes/attention_mask.py), past keys / values, grouped heads, softcap, window sizes.
"""

from __future__ import annotations

import numpy as np

from ..node import OnnxNode
from .attention_mask import (
    band_attrs,
    masked_guard,
    split_bias,
    split_past,
    split_softcap,
    unrepeat,
)
from .walk import Walk

__all__ = ["fold_attention"]

_TYPES = ("float16", "float32", "float64")
_HEADS = [0, 2, 1, 3]


def fold_attention(w: Walk) -> None:
    if w.opset < 23:
        return
    for node in w.nodes():
        if node.op_type == "MatMul" and not node.domain:
            _attention_at(w, node)


def _scaled(w: Walk, value: str) -> tuple[str, float] | tuple[None, None]:
    mul = w.back(value, "Mul")
    scale = mul and w.scalar(mul.inputs[1])
    return (mul.inputs[0], scale) if scale else (None, None)


def _guard(w: Walk, value: str) -> str:
    """The Softmax output under a Where(all-false constant, 0, softmax), else ``value``."""
    where = w.back(value, "Where")
    cond = where and w.const(where.inputs[0])
    if cond is None or cond.dtype != bool or cond.any() or cond.ndim > 2 or \
            w.scalar(where.inputs[1]) is None:
        return value
    return where.inputs[2]


def _core(w: Walk, node: OnnxNode):
    """(q, k, v, attrs, parts) of the 4-D spelling ending at ``node``, else None."""
    guarded = masked_guard(w, node.inputs[0])
    probs = guarded[0] if guarded else _guard(w, node.inputs[0])
    soft = w.back(probs, "Softmax")
    if soft is None or soft.attrs.get("axis", -1) not in (-1, 3):
        return None
    add, attrs, mask, more = w.back(soft.inputs[0], "Add"), {}, [], []
    scores = add.inputs[0] if add else soft.inputs[0]
    scores, capped, more = split_softcap(w, scores)
    if guarded is not None:  # a mask given at run time: Add(scores, the guarded bias)
        if add is None or add.inputs[1] != guarded[1]:
            return None
        found = _mask(w, scores, guarded)
        if found is None:
            return None
        mask, attrs, found_more = found
        more += found_more
    elif add is not None:
        band = w.const(add.inputs[1])
        if band is None or band.ndim != 2:
            return None
        attrs["_band"] = band  # read once the past length (the band's offset) is known
    qk = w.back(scores, "MatMul")
    turn = qk and w.back(qk.inputs[1], "Transpose")
    if not turn or turn.attrs.get("perm") != [0, 1, 3, 2]:
        return None
    (q, sq), (k, sk) = _scaled(w, qk.inputs[0]), _scaled(w, turn.inputs[0])
    if q is None or k is None or sq != sk:
        return None
    parts = [soft, qk, turn, w.made[qk.inputs[0]], w.made[turn.inputs[0]]]
    parts += [n for n in (add, w.made.get(node.inputs[0])) if n is not None and n
              is not soft] + more
    return q, k, node.inputs[1], {**attrs, **capped, "_s": sq, "_mask": mask}, parts


def _mask(w: Walk, scores: str, guarded: tuple):
    """([attn_mask], attrs, the guard's and bias's nodes) of the guarded bias, else None."""
    qk = w.back(scores, "MatMul")
    turn = qk and w.back(qk.inputs[1], "Transpose")
    if turn is None:
        return None
    q, k = (_scaled(w, v)[0] for v in (qk.inputs[0], turn.inputs[0]))
    found = q and k and split_bias(w, guarded[1], q, k)
    if not found:
        return None
    bias, attrs, parts = found
    return [bias], attrs, guarded[2][1:] + parts  # [0], the Where, is the core's


def _into_heads(w: Walk, value: str):
    """(3-D input, heads, its nodes) of Transpose(Reshape(x, [b, s, h, d]), [0, 2, 1, 3])."""
    turn = w.back(value, "Transpose")
    split = turn and turn.attrs.get("perm") == _HEADS and w.back(turn.inputs[0], "Reshape")
    shape = split and w.const(split.inputs[1])
    source = split and w.shape(split.inputs[0])
    if shape is None or source is None or len(source) != 3 or shape.size != 4 or \
            list(shape[:2]) != source[:2] or shape[2] * shape[3] != source[2]:
        return None
    return split.inputs[0], int(shape[2]), [turn, split]


def _next(w: Walk, value: str, op_type: str) -> OnnxNode | None:
    readers = w.users.get(value, [])
    if value in w.keep or len(readers) != 1 or readers[0].op_type != op_type:
        return None
    return readers[0]


def _three_d(w: Walk, node: OnnxNode, q: str, k: str, v: str):
    """(end node, head attrs, 3-D inputs, nodes folded) around a 4-D core, else None."""
    turn = _next(w, node.outputs[0], "Transpose")
    merge = turn and turn.attrs.get("perm") == _HEADS and \
        _next(w, turn.outputs[0], "Reshape")
    shape = merge and w.const(merge.inputs[1])
    found = [_into_heads(w, x) for x in (q, k, v)]
    if shape is None or shape.size != 3 or any(f is None for f in found):
        return None
    heads = {"q_num_heads": found[0][1], "kv_num_heads": found[1][1]}
    parts = [turn, node] + [n for f in found for n in f[2]]
    return merge, heads, tuple(f[0] for f in found), parts


def _scale_attr(head: int, s: float, dtype: str) -> dict:
    """No ``scale`` when s is sqrt(1 / sqrt(head size)) in the inputs' dtype (the default)."""
    default = np.asarray(np.sqrt(1 / np.sqrt(head)), dtype=dtype)
    return {} if float(default) == s else {"scale": float(s) ** 2}


def _attention_at(w: Walk, node: OnnxNode) -> None:
    found = _core(w, node)
    if found is None:
        return
    q, k, v, attrs, parts = found
    s, mask, band = attrs.pop("_s"), attrs.pop("_mask"), attrs.pop("_band", None)
    end, heads, head = node, {}, 0
    grouped = [unrepeat(w, x) for x in (k, v)]
    if grouped[0] is not None and grouped[1] is not None and \
            grouped[0][1] == grouped[1][1]:  # grouped heads: Attention repeats kv itself
        (k, _, one), (v, _, two) = grouped
        parts += one + two
    elif grouped[0] is not None or grouped[1] is not None:
        return
    past = split_past(w, k, v)
    if past is not None:  # keys and values after the past ones: present_key / _value
        (k, v), past_kv, concats = past
        parts += concats
    around = _three_d(w, node, q, k, v)
    if around is not None:  # 3-D inputs split into heads and merged back
        end, heads, (q, k, v), more = around
        parts += more
        head = w.shape(q)[2] // heads["q_num_heads"]
    elif w.shape(q) is not None and len(w.shape(q)) == 4:
        head = w.shape(q)[3]
    dtype = w.dtypes.get(q)
    if dtype not in _TYPES or any(w.shape(x) is None for x in (q, k, v)) or head <= 0:
        return
    if past is not None and len(w.shape(k)) != len(w.shape(q)):
        return
    if band is not None:  # is_causal / windows count query i as i + the past length
        found = band_attrs(band, w.opset, w.shape(past_kv[0])[2] if past else 0)
        if found is None:
            return
        attrs.update(found)
    inputs, outputs = [q, k, v, *mask], list(end.outputs)
    if past is not None:
        inputs = [q, k, v, *(mask or [""]), *past_kv]
        outputs += [n.outputs[0] for n in concats]
    w.rewrite(end, parts, op_type="Attention", inputs=inputs, outputs=outputs, domain="",
              attrs={**attrs, **heads, **_scale_attr(head, s, dtype)})
