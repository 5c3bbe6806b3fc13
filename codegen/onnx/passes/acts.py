"""More single-op re-fusions (see codegen/onnx/passes/ops.py), run after those: activations and
normalizations importers spell with their parts, and TopK sliced to a run-time k.

- ``Elu(x) * gamma`` -> ``Selu``; ``Where(x > alpha, x, 0)`` -> ``ThresholdedRelu``;
- ``Clip(x * alpha + beta, 0, 1)`` -> ``HardSigmoid``, ``x * HardSigmoid(x, 1/6, 1/2)`` ->
  ``HardSwish``;
- ``IsInf(x) and x < 0`` (``> 0``) -> ``IsInf`` of one sign;
- ``Where(n == 0, 0, x / n)``, n = ReduceL1 / ReduceL2 over one axis -> ``LpNormalization``;
- both outputs of a full ``TopK`` sliced to ``k`` (a graph input) -> ``TopK(x, k)``;
- a Concat of every element of a 1-D tensor, one Gather each -> the tensor; ``Expand`` of a
  scalar constant -> ``ConstantOfShape``; the Reshape / Transpose / Reshape of
  ``SpaceToDepth`` -> ``SpaceToDepth``.
"""

from __future__ import annotations

import numpy as np

from ..node import OnnxNode
from .ops import fold_single_ops
from .walk import Walk

__all__ = ["fold_activations"]

_FLOATS = ("float16", "float32", "float64")


def _selu(w: Walk, node: OnnxNode) -> None:
    elu = w.back(node.inputs[0], "Elu")
    gamma = w.scalar(node.inputs[1])
    if elu is not None and gamma is not None and w.const(node.inputs[1]).ndim == 0:
        w.rewrite(node, [elu], op_type="Selu", inputs=[elu.inputs[0]],
                  attrs={"alpha": elu.attrs.get("alpha", 1.0), "gamma": gamma})


def _thresholded(w: Walk, node: OnnxNode) -> None:
    test = w.back(node.inputs[0], "Greater")
    x = node.inputs[1]
    alpha = test and w.scalar(test.inputs[1])
    if test is None or alpha is None or test.inputs[0] != x or \
            w.scalar(node.inputs[2]) != 0 or w.dtypes.get(x) not in _FLOATS:
        return
    w.rewrite(node, [test], op_type="ThresholdedRelu", inputs=[x], attrs={"alpha": alpha})


def _hard_sigmoid(w: Walk, node: OnnxNode) -> None:
    shift = w.back(node.inputs[0], "Add")
    scale = shift and w.back(shift.inputs[0], "Mul")
    if not scale or len(node.inputs) != 3:
        return
    alpha, beta = w.scalar(scale.inputs[1]), w.scalar(shift.inputs[1])
    if alpha is None or beta is None or w.scalar(node.inputs[1]) != 0 or \
            w.scalar(node.inputs[2]) != 1:
        return
    w.rewrite(node, [scale, shift], op_type="HardSigmoid", inputs=[scale.inputs[0]],
              attrs={"alpha": alpha, "beta": beta})


def _hard_swish(w: Walk, node: OnnxNode) -> None:
    gate = w.back(node.inputs[1], "HardSigmoid")
    alpha, beta = (gate.attrs["alpha"], gate.attrs["beta"]) if gate else (0, 0)
    if gate is None or gate.inputs[0] != node.inputs[0] or \
            np.float32(alpha) != np.float32(1 / 6) or beta != 0.5:
        return
    w.rewrite(node, [gate], op_type="HardSwish", inputs=[node.inputs[0]], attrs={})


def _one_sided_inf(w: Walk, node: OnnxNode) -> None:
    inf = w.back(node.inputs[0], "IsInf")
    side = inf and next((w.back(node.inputs[1], op) for op in ("Less", "Greater")
                         if w.back(node.inputs[1], op)), None)
    if not side or side.inputs[0] != inf.inputs[0] or w.scalar(side.inputs[1]) != 0 \
            or inf.attrs:
        return
    drop = "detect_positive" if side.op_type == "Less" else "detect_negative"
    w.rewrite(node, [inf, side], op_type="IsInf", inputs=[inf.inputs[0]], attrs={drop: 0})


def _lp_norm(w: Walk, node: OnnxNode) -> None:
    test, ratio = w.back(node.inputs[0], "Equal"), w.back(node.inputs[2], "Div")
    norm = ratio and w.made.get(ratio.inputs[1])
    if not norm or test is None or norm.op_type not in ("ReduceL1", "ReduceL2") or \
            test.inputs[0] != norm.outputs[0] or w.scalar(test.inputs[1]) != 0 or \
            w.scalar(node.inputs[1]) != 0 or len(w.users.get(norm.outputs[0], [])) != 2:
        return
    x, shape = ratio.inputs[0], w.shape(ratio.inputs[0])
    axes = norm.attrs.get("axes")
    if axes is None and len(norm.inputs) > 1:
        data = w.const(norm.inputs[1])
        axes = None if data is None else data.reshape(-1).tolist()
    if norm.inputs[0] != x or not shape or axes is None or len(axes) != 1 or \
            not norm.attrs.get("keepdims", 1) or w.dtypes.get(x) not in _FLOATS:
        return
    w.rewrite(node, [test, ratio, norm], op_type="LpNormalization", inputs=[x],
              attrs={"axis": int(axes[0]) % len(shape),
                     "p": 1 if norm.op_type == "ReduceL1" else 2})


def _top_k(w: Walk, node: OnnxNode) -> None:
    """TopK(x, all) with both outputs sliced [0:k[0]] along its axis -> TopK(x, k)."""
    x, shape = node.inputs[0], w.shape(node.inputs[0])
    axis = node.attrs.get("axis", -1)
    if shape is None or w.scalar(node.inputs[1]) != shape[axis] or \
            not node.attrs.get("sorted", 1):
        return
    cuts = [_cut(w, out, axis % len(shape), len(shape)) for out in node.outputs]
    if any(c is None for c in cuts) or cuts[0][1] is not cuts[1][1]:
        return
    k = cuts[0][1].inputs[0]
    if w.shape(k) != [1] or w.dtypes.get(k) != "int64":
        return
    w.rewrite(node, [cuts[0][1], *(c[0] for c in cuts)], inputs=[x, k],
              outputs=[c[0].outputs[0] for c in cuts])


def _cut(w: Walk, value: str, axis: int, rank: int):
    """(Slice, Gather of its end) of a Slice(value, 0, Gather(k, [0]), [axis], [1])."""
    readers = w.users.get(value, [])
    if len(readers) != 1 or value in w.keep or readers[0].op_type != "Slice" or \
            len(readers[0].inputs) != 5:
        return None
    cut = readers[0]
    starts, axes, steps = (w.const(cut.inputs[i]) for i in (1, 3, 4))
    gather = w.made.get(cut.inputs[2])
    index = gather and gather.op_type == "Gather" and w.const(gather.inputs[1])
    if any(a is None or a.size != 1 for a in (starts, axes, steps)) or index is None or \
            index is False or index.reshape(-1).tolist() != [0] or \
            int(starts.reshape(-1)[0]) != 0 or int(steps.reshape(-1)[0]) != 1 or \
            int(axes.reshape(-1)[0]) % rank != axis:
        return None
    return cut, gather


def _whole(w: Walk, node: OnnxNode) -> None:
    """Concat(Gather(x, [0]), ..., Gather(x, [n - 1])) of a 1-D x of n elements -> x."""
    parts = [w.back(v, "Gather") for v in node.inputs]
    if not parts or any(p is None for p in parts) or node.attrs.get("axis", 0) != 0 or \
            node.outputs[0] in w.keep:
        return
    x = parts[0].inputs[0]
    picks = [w.const(p.inputs[1]) for p in parts]
    if w.shape(x) != [len(parts)] or any(p.inputs[0] != x or p.attrs.get("axis", 0)
                                         for p in parts) or \
            any(i is None or i.shape != (1,) for i in picks) or \
            [int(i[0]) for i in picks] != list(range(len(parts))):
        return
    w.graph.replace_uses(node.outputs[0], x)
    w.graph.remove(node, *parts)


def _constant_of_shape(w: Walk, node: OnnxNode) -> None:
    """Expand(scalar constant, shape) -> ConstantOfShape(shape, value)."""
    from onnx import numpy_helper

    fill, shape = w.const(node.inputs[0]), w.shape(node.inputs[1])
    if fill is None or fill.size != 1 or not shape or len(shape) != 1 or \
            (fill.ndim and shape[0] < 1) or w.consts.get(node.inputs[1]) is not None:
        return
    w.rewrite(node, op_type="ConstantOfShape", inputs=[node.inputs[1]],
              attrs={"value": numpy_helper.from_array(fill.reshape(1))})


def _space_to_depth(w: Walk, node: OnnxNode) -> None:
    """Reshape(Transpose(Reshape(x, [n, c, h/b, b, w/b, b]), [0, 3, 5, 1, 2, 4]),
    [n, c*b*b, h/b, w/b]) -> SpaceToDepth(x, b) (DCR, the only mode before opset 28)."""
    turn = w.back(node.inputs[0], "Transpose")
    split = turn and turn.attrs.get("perm") == [0, 3, 5, 1, 2, 4] and \
        w.back(turn.inputs[0], "Reshape")
    inner, outer = (w.const(split.inputs[1]), w.const(node.inputs[1])) if split else \
        (None, None)
    x_shape = split and w.shape(split.inputs[0])
    if inner is None or outer is None or not x_shape or len(x_shape) != 4 or inner.size != 6:
        return
    n, c, h, width = x_shape
    b = int(inner[3])
    if inner.tolist() != [n, c, h // b, b, width // b, b] or inner[5] != b or h % b or \
            width % b or outer.tolist() != [n, c * b * b, h // b, width // b]:
        return
    w.rewrite(node, [turn, split], op_type="SpaceToDepth", inputs=[split.inputs[0]],
              attrs={"blocksize": b})


RULES = {
    "Mul": (_selu, _hard_swish), "Where": (_thresholded, _lp_norm),
    "Clip": (_hard_sigmoid,), "And": (_one_sided_inf,), "TopK": (_top_k,),
    "Concat": (_whole,), "Expand": (_constant_of_shape,), "Reshape": (_space_to_depth,),
}


def fold_activations(w: Walk) -> None:
    fold_single_ops(w, RULES)
