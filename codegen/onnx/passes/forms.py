"""Re-fusions of what importers spell out, on the pipeline's graph (see codegen/onnx/passes/pipeline.py):

- ``MatMul`` of a transposed 2-D operand, or scaled by a constant -> ``Gemm`` with
  ``transA`` / ``transB`` / ``alpha`` (``Add`` of a scaled C then folds with ``beta``);
- ``NegativeLogLikelihoodLoss(LogSoftmax(x, axis=1), t)`` -> ``SoftmaxCrossEntropyLoss``
  (its log-probability output too when the graph returns it);
- mean / variance / rsqrt / scale / shift over trailing axes -> ``LayerNormalization``
  (opset 17; its Mean and InvStdDev outputs too when the graph returns them), and the same
  without the centering -> ``RMSNormalization`` (opset 23).
"""

from __future__ import annotations

import numpy as np

from ..node import OnnxNode
from .walk import Walk

__all__ = ["fold_cross_entropy", "fold_gemm_forms", "fold_layer_norm", "fold_rms_norm",
           "scalar_const"]

_GEMM_TYPES = {"float16", "float32", "float64", "int32", "int64", "uint32", "uint64"}


def scalar_const(consts: dict, value: str) -> float | None:
    data = consts.get(value)
    if data is None or data.size != 1 or data.dtype.kind != "f":
        return None
    return float(np.asarray(data).reshape(-1)[0])


def _only_user(users: dict, value: str, keep: set) -> bool:
    return value not in keep and len(users.get(value, [])) == 1


def _is_2d(value: str, consts: dict, shapes: dict) -> bool:
    shape = list(np.shape(consts[value])) if value in consts else shapes.get(value)
    return shape is not None and len(shape) == 2


def fold_gemm_forms(w: Walk) -> None:
    """Transposed operands and constant scales of 2-D MatMuls into Gemm attrs (the Transpose
    left unread, dropped as dead)."""
    consts, shapes, users = w.consts, w.shapes, w.users
    for node in w.nodes():
        if node.op_type not in ("MatMul", "Gemm") or node.domain or \
                w.dtypes.get(node.outputs[0]) not in _GEMM_TYPES or \
                not all(_is_2d(v, consts, shapes) for v in node.inputs[:2]):
            continue
        for i, flag in ((0, "transA"), (1, "transB")):
            inner = w.made.get(node.inputs[i])
            if inner is not None and inner.op_type == "Transpose" and \
                    inner.attrs.get("perm") == [1, 0] and \
                    _only_user(users, inner.outputs[0], w.keep):
                _as_gemm(w, node)
                w.graph.set_input(node, i, inner.inputs[0])
                w.rewrite(node, attrs={**node.attrs, flag: 1 - node.attrs.get(flag, 0)})
        _absorb_scale(w, node)


def _as_gemm(w: Walk, node: OnnxNode) -> None:
    if node.op_type == "MatMul":
        w.rewrite(node, op_type="Gemm", attrs={})


def _absorb_scale(w: Walk, node: OnnxNode) -> None:
    """``Mul(Gemm-or-MatMul(a, b), s)`` with no C yet: alpha *= s; the Gemm makes the Mul's
    output."""
    out = node.outputs[0]
    if len(node.inputs) > 2 or not _only_user(w.users, out, w.keep):
        return
    mul = w.users[out][0]
    if mul.op_type != "Mul" or mul.domain:
        return
    scale = scalar_const(w.consts, mul.inputs[1 - mul.inputs.index(out)])
    if scale is None:
        return
    _as_gemm(w, node)
    w.rewrite(node, [mul], outputs=[mul.outputs[0]],
              attrs={**node.attrs, "alpha": float(node.attrs.get("alpha", 1.0)) * scale})


def fold_cross_entropy(w: Walk) -> None:
    made, users, keep, shapes = w.made, w.users, w.keep, w.shapes
    for node in w.nodes():
        if node.op_type != "NegativeLogLikelihoodLoss" or node.domain:
            continue
        soft = made.get(node.inputs[0])
        if soft is None or soft.op_type != "LogSoftmax" or len(
                users.get(soft.outputs[0], [])) != 1:
            continue
        shape = shapes.get(soft.inputs[0])
        axis = soft.attrs.get("axis", -1)
        if not (axis == 1 or (shape is not None and axis in (-1, len(shape) - 1) and
                              len(shape) == 2)):
            continue
        log_prob = soft.outputs[0]
        w.rewrite(node, [soft], op_type="SoftmaxCrossEntropyLoss",
                  inputs=[soft.inputs[0], *node.inputs[1:]],
                  outputs=node.outputs + ([log_prob] if log_prob in keep else []))


def _axes(node: OnnxNode, consts: dict, rank: int = 0) -> list[int] | None:
    if node.op_type == "GlobalAveragePool":  # a mean over the spatial axes
        return list(range(2, rank))
    if "axes" in node.attrs:
        return list(node.attrs["axes"])
    data = consts.get(node.inputs[1]) if len(node.inputs) > 1 else None
    return None if data is None else [int(a) for a in np.asarray(data).reshape(-1)]


_MEANS = ("ReduceMean", "GlobalAveragePool")


class _Chain:
    """Walks one consumer at a time from a value, as a pattern of single-use links."""

    def __init__(self, w: Walk):
        self.w, self.users, self.keep = w, w.users, w.keep

    def next(self, value: str, op_type: str, share: int = 1) -> OnnxNode | None:
        """The one reader of ``value`` of ``op_type`` when ``value`` has ``share`` readers
        (a kept value may have more: the fused op gives it as an extra output)."""
        kinds = (op_type,) if isinstance(op_type, str) else op_type
        found = [n for n in self.users.get(value, []) if n.op_type in kinds]
        readers = self.users.get(value, [])
        if not found or (len(readers) != share and value not in self.keep):
            return None
        return found[0]


def fold_layer_norm(w: Walk) -> None:
    """mean / center / variance / rsqrt / scale / shift over trailing axes (how importers spell
    LayerNormalization with its Mean and InvStdDev outputs) -> one LayerNormalization."""
    if w.opset < 17:
        return
    chain = _Chain(w)
    for node in w.nodes():
        if node.op_type in _MEANS and not node.domain:
            _layer_norm_at(node, chain, w.consts, w.keep, w.shapes, w.dtypes)


def _layer_norm_at(mean: OnnxNode, chain: _Chain, consts: dict, keep: set, shapes: dict,
                   dtypes: dict) -> None:
    x, m = mean.inputs[0], mean.outputs[0]
    shape = shapes.get(x)
    axes = _axes(mean, consts, len(shape or ()))
    if shape is None or axes is None or dtypes.get(x) != "float32" or \
            not mean.attrs.get("keepdims", 1):
        return
    axes = sorted(a % len(shape) for a in axes)
    if axes != list(range(axes[0], len(shape))):
        return
    d = chain.next(m, "Sub")
    sq = d and d.inputs == [x, m] and chain.next(d.outputs[0], "Mul", 3)
    if not sq or sq.inputs != [d.outputs[0]] * 2:
        return
    var = chain.next(sq.outputs[0], _MEANS)
    add = var and _axes(var, consts, len(shape)) == _axes(mean, consts, len(shape)) and chain.next(
        var.outputs[0], "Add")
    eps = add and scalar_const(consts, add.inputs[1])
    root = eps is not None and add and chain.next(add.outputs[0], "Sqrt")
    inv = root and chain.next(root.outputs[0], "Reciprocal")
    norm = inv and chain.next(inv.outputs[0], "Mul")
    scaled = norm and set(norm.inputs) == {d.outputs[0], inv.outputs[0]} and \
        chain.next(norm.outputs[0], "Mul")
    if not scaled or chain.users.get(d.outputs[0], []) != [sq, sq, norm]:
        return
    scale = scaled.inputs[1 - scaled.inputs.index(norm.outputs[0])]
    shift = chain.next(scaled.outputs[0], "Add")
    last, extra = scaled, []
    if shift is not None:
        last, extra = shift, [shift.inputs[1 - shift.inputs.index(scaled.outputs[0])]]
    y, r = last.outputs[0], inv.outputs[0]
    outs = [y, m if m in keep else "", r if r in keep else ""]
    while outs[-1] == "":
        outs.pop()
    parts = [p for p in (mean, d, sq, var, add, root, inv, norm, scaled, shift) if p is not None]
    chain.w.rewrite(last, parts, op_type="LayerNormalization", inputs=[x, scale, *extra],
                    outputs=outs, attrs={"axis": axes[0], "epsilon": eps})


def fold_rms_norm(w: Walk) -> None:
    """``x / sqrt(mean(x * x) + eps) * w`` over trailing axes -> RMSNormalization (opset
    23)."""
    if w.opset < 23:
        return
    chain = _Chain(w)
    for node in w.nodes():
        if node.op_type == "Mul" and not node.domain and len(set(node.inputs)) == 1:
            _rms_norm_at(node, chain, w.consts, w.shapes, w.dtypes)


def _rms_norm_at(square: OnnxNode, chain: _Chain, consts: dict, shapes: dict, dtypes: dict) -> None:
    x = square.inputs[0]
    shape = shapes.get(x)
    if shape is None or dtypes.get(x) != "float32":
        return
    mean = chain.next(square.outputs[0], _MEANS)
    axes = mean and _axes(mean, consts, len(shape))
    if not axes or not mean.attrs.get("keepdims", 1):
        return
    axes = sorted(a % len(shape) for a in axes)
    add = axes == list(range(axes[0], len(shape))) and chain.next(mean.outputs[0], "Add")
    eps = add and scalar_const(consts, add.inputs[1])
    root = eps is not None and add and chain.next(add.outputs[0], "Sqrt")
    div = root and chain.next(root.outputs[0], "Div")
    scaled = div and div.inputs == [x, root.outputs[0]] and \
        chain.next(div.outputs[0], "Mul")
    if not scaled:
        return
    scale = scaled.inputs[1 - scaled.inputs.index(div.outputs[0])]
    chain.w.rewrite(scaled, [square, mean, add, root, div], op_type="RMSNormalization",
                    inputs=[x, scale], attrs={"axis": axes[0], "epsilon": eps})
