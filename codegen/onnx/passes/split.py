"""A Split to sizes given at run time, back to one ``Split(x, split, axis)`` node.

The importer cuts part k as ``Slice(x, end(k - 1), end(k), [axis], [1])`` with ``end(-1) = 0``
and ``end(k) = Add(end(k - 1), Gather(split, [k]))`` (``end(0) = Gather(split, [0])``). When all
the parts of a 1-D int64 ``split`` of static length are there, in order, they are Split's
outputs for every ``split`` Split accepts (its sizes sum to the axis' dim).
"""

from __future__ import annotations

from ..node import OnnxNode
from .walk import Walk

__all__ = ["fold_runtime_split"]


def fold_runtime_split(w: Walk) -> None:
    for node in w.nodes():
        if node.op_type == "Slice" and not node.domain and len(node.inputs) == 5:
            _split_at(w, node)


def _size(w: Walk, value: str, split: str | None, k: int) -> str | None:
    """``split`` of ``Gather(split, [k])`` (axis 0) making ``value``, else None."""
    node = w.made.get(value)
    index = node and node.op_type == "Gather" and w.const(node.inputs[1])
    if index is None or index is False or node.attrs.get("axis", 0) != 0 or \
            index.shape != (1,) or int(index[0]) != k or \
            split is not None and node.inputs[0] != split:
        return None
    return node.inputs[0]


def _cut(w: Walk, node: OnnxNode, x: str, axis: int) -> bool:
    axes, steps = (w.const(v) for v in node.inputs[3:5])
    return node.inputs[0] == x and axes is not None and steps is not None and \
        axes.reshape(-1).tolist() == [axis] and steps.reshape(-1).tolist() == [1]


def _next_part(w: Walk, x: str, axis: int, end: str, split: str, k: int):
    """(slice node, its end) of part k, which starts at ``end``, else None."""
    for add in w.users.get(end, []):
        if add.op_type != "Add" or add.domain or add.inputs[0] != end or \
                _size(w, add.inputs[1], split, k) is None:
            continue
        for cut in w.users.get(add.outputs[0], []):
            if cut.op_type == "Slice" and len(cut.inputs) == 5 and \
                    cut.inputs[1:3] == [end, add.outputs[0]] and _cut(w, cut, x, axis):
                return cut, add.outputs[0]
    return None


def _split_at(w: Walk, first: OnnxNode) -> None:
    x, start, end = first.inputs[:3]
    shape, begin, axes = w.shape(x), w.const(start), w.const(first.inputs[3])
    split = _size(w, end, None, 0)
    length = split and w.shape(split)
    if not shape or begin is None or begin.reshape(-1).tolist() != [0] or axes is None or \
            axes.size != 1 or not length or len(length) != 1 or length[0] < 1 or \
            w.dtypes.get(split) != "int64":
        return
    axis = int(axes.reshape(-1)[0])
    if not _cut(w, first, x, axis):
        return
    parts = [first]
    for k in range(1, length[0]):
        found = _next_part(w, x, axis, end, split, k)
        if found is None:
            return
        parts.append(found[0])
        end = found[1]
    outputs = [p.outputs[0] for p in parts]
    w.rewrite(first, parts[1:], op_type="Split", inputs=[x, split], outputs=outputs,
              attrs={"axis": axis})
