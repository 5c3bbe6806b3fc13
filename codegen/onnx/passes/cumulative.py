"""A CumSum / CumProd over an axis given at run time, back to one node ``CumSum(x, axis)``.

The importer computes the op along every axis and picks one by the wrapped axis value:
``Where(Equal(wrap(axis), 0), CumSum(x, 0), Where(..., CumSum(x, 1), ...))``. Here the choice
is checked, not trusted: every condition is run (onnx's reference evaluator) for every valid
axis value in [-rank, rank), and only when each picks the op along that axis (the same x and
attrs in every branch) does the spelling become one node reading the axis input.
"""

from __future__ import annotations

import numpy as np

from ..node import OnnxNode
from .axes import evaluator, graph_leaves
from .walk import Walk

__all__ = ["fold_runtime_cumulative"]

_OPS = ("CumSum", "CumProd")


def fold_runtime_cumulative(w: Walk) -> None:
    inner = {v for n in w.graph.nodes if n.op_type == "Where" for v in n.inputs[1:]}
    for node in w.nodes():
        if node.op_type == "Where" and not node.domain and \
                node.outputs[0] not in inner:  # the outermost Where of a chain
            _fold_at(w, node)


def _branches(w: Walk, node: OnnxNode, conds: list, leaves: list) -> bool:
    """Collects the conditions and the per-axis ops of a Where chain; False when it is not
    one."""
    for value in node.inputs[1:]:
        made = w.made.get(value)
        if made is None:
            return False
        if made.op_type == "Where" and len(made.inputs) == 3 and not made.domain:
            if not _branches(w, made, conds, leaves):
                return False
        elif made.op_type in _OPS and not made.domain:
            leaves.append(made)
        else:
            return False
    conds.append(node)
    return True


def _leaf_axis(w: Walk, leaf: OnnxNode) -> int | None:
    data = w.const(leaf.inputs[1])
    return None if data is None or data.size != 1 else int(data.reshape(-1)[0])


def _choose(node: OnnxNode, picks: dict) -> OnnxNode | None:
    """The op a Where chain yields given each condition's value."""
    while node is not None and node.op_type == "Where":
        node = picks["where"][id(node)][picks["cond"][id(node)]]
    return node


def _fold_at(w: Walk, node: OnnxNode) -> None:
    conds, leaves = [], []
    if not _branches(w, node, conds, leaves) or len(leaves) < 2:
        return
    first = leaves[0]
    x, rank = first.inputs[0], len(w.shape(first.inputs[0]) or [])
    axes = [_leaf_axis(w, n) for n in leaves]
    if rank < 2 or any(a is None for a in axes) or any(
            n.op_type != first.op_type or n.inputs[0] != x or
            n.attrs != first.attrs for n in leaves):
        return
    axis = _single_input(w, [c.inputs[0] for c in conds])
    if axis is None:
        return
    runs = [evaluator(w, c.inputs[0], axis) for c in conds]
    if any(r is None for r in runs):
        return
    branch = {id(c): {True: w.made[c.inputs[1]], False: w.made[c.inputs[2]]}
              for c in conds}
    dtype = np.int32 if w.dtypes.get(axis) == "int32" else np.int64
    shape = w.shape(axis)
    for value in range(-rank, rank):
        given = np.asarray(value, dtype).reshape(shape)
        try:
            picked = {id(c): bool(np.asarray(r(given)).reshape(-1)[0])
                      for c, r in zip(conds, runs)}
        except Exception:  # noqa: BLE001 - a condition the evaluator cannot run stays spelled
            return
        chosen = _choose(node, {"where": branch, "cond": picked})
        if chosen is None or _leaf_axis(w, chosen) % rank != value % rank:
            return
    w.rewrite(node, op_type=first.op_type, inputs=[x, axis], attrs=dict(first.attrs))


def _single_input(w: Walk, values: list) -> str | None:
    """The one non-constant graph value the conditions are computed from: a scalar or
    one-element int32 / int64 (the axis)."""
    leaves = graph_leaves(w, values)
    axis = leaves.pop() if leaves is not None and len(leaves) == 1 else None
    shape = axis and w.shape(axis)
    if axis is None or shape is None or int(np.prod(shape)) != 1 or \
            w.dtypes.get(axis) not in ("int32", "int64"):
        return None
    return axis
