"""What every view draws: one record per joint (label, family, tensors, details) and the groups.

The SVG, the HTML page and the Model Explorer export all read a ``Scene``, so they show the
same names, colors and groups.

    >>> scene = Scene.of(graph, weights)                 # doctest: +SKIP
    >>> scene.joints[1]["family"], scene.root.items[:2]  # doctest: +SKIP
    ('conv', [0, <Group ...>])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..progress import progress
from ..relax.op import OPS
from .groups import Group, group_joints

__all__ = ["FAMILY_COLORS", "Scene", "family_of", "tensor_text"]

# Optypes of graph-only joints (not ops of the table) -> family.
_GRAPH_FAMILIES = {"input": "io", "constant": "const", "get_item": "tuple", "tuple": "tuple"}

# Fill colors by op family (light, so the black labels stay readable); unknown -> "other".
FAMILY_COLORS = {
    "io": "#e8e8e8", "const": "#f2f2f2", "tuple": "#f5f5f5",
    "conv": "#a6cee3", "linalg": "#9ecae1", "relay": "#9ecae1", "msc": "#8fb9f0",
    "attention": "#c6b3e6", "norm": "#b2df8a", "pool": "#c7e9c0",
    "unary": "#fdd9a8", "activation": "#fdbf6f", "binary": "#fbe3a6", "compare": "#f9eec0",
    "reduce": "#fbb4ae", "manipulate": "#e5d8bd", "reshape": "#e5d8bd", "index": "#decbe4",
    "create": "#f0f0d0", "shape": "#f0f0d0", "image": "#ccebc5", "quant": "#f4cae4",
    "special": "#d9d9d9", "loss": "#fddaec", "sort": "#e0ecf4", "scan": "#e0ecf4",
    "search": "#e0ecf4", "pad": "#e5d8bd", "other": "#ffffff",
}


def family_of(optype: str) -> str:
    """The op family of an optype (from the op table; graph-only joints by table)."""
    op = OPS.get(optype)
    family = op.family if op is not None else _GRAPH_FAMILIES.get(optype, "other")
    return family if family in FAMILY_COLORS else "other"


def tensor_text(tensor) -> str:
    """``1x64x56x56 float32 NCHW``: shape (symbolic dims by name), dtype, layout."""
    dims = "x".join(str(d) for d in tensor.get_shape(with_prims=True)) or "scalar"
    layout = str(tensor.layout)
    return f"{dims} {tensor.dtype}" + (f" {layout}" if layout else "")


def _stats(array: Any) -> dict:
    data = np.asarray(array)
    if data.size == 0 or not np.issubdtype(data.dtype, np.number):
        return {}
    # float64 accumulators, no float64 copy of a big weight
    return {"min": float(data.min()), "max": float(data.max()),
            "mean": float(data.mean(dtype=np.float64)), "std": float(data.std(dtype=np.float64))}


def _weights(joint, weights: Mapping[str, Any]) -> list[dict]:
    rows = []
    for role, tensor in joint.weights.items():
        row = {"role": role, "name": tensor.name, "shape": tensor_text(tensor)}
        if tensor.name in weights:
            row.update(_stats(weights[tensor.name]))
        rows.append(row)
    return rows


def _record(joint, weights: Mapping[str, Any]) -> dict:
    outputs = [tensor_text(t) for t in joint.get_outputs()]
    return {"name": joint.name, "optype": joint.optype, "family": family_of(joint.optype),
            "scope": "/".join(joint.scope),
            "shape": outputs[0] if outputs else "", "outputs": outputs,
            "inputs": [t.name for t in joint.get_inputs()], "attrs": dict(joint.attrs),
            "weights": _weights(joint, weights),
            "parents": [p.index for p in joint.parents],
            "in_edges": [(p.index, k) for p, k in joint.input_pairs()],
            "tensors": [{"name": t.name, "dtype": t.dtype, "layout": str(t.layout),
                         "shape": t.get_shape(with_prims=True)} for t in joint.get_outputs()]}


class Scene:
    """Joint records (index = joint index) plus the group tree of a graph."""

    def __init__(self, name: str, joints: list[dict], root: Group):
        self.name = name
        self.joints = joints
        self.root = root
        self.edges = [(p, j) for j, rec in enumerate(joints) for p in rec["parents"]]

    @classmethod
    def of(cls, graph, weights: Mapping[str, Any] | None = None) -> Scene:
        nodes = list(graph.get_nodes())
        joints = [_record(joint, weights or {})
                  for joint in progress(nodes, desc="view: joints", unit="joint")]
        edges = [(p, j) for j, rec in enumerate(joints) for p in rec["parents"]]
        root = group_joints([j.name for j in nodes], edges, [j.scope for j in nodes])
        return cls(graph.name, joints, root)

    def groups(self) -> list[Group]:
        """Every group, by gid (root first)."""
        return list(self.root.walk())

    def level_edges(self) -> dict[int, set[tuple[int, int]]]:
        """gid -> edges between the positions of its items. A joint edge belongs to the
        innermost group holding both ends (their lowest common ancestor)."""
        chain: dict[int, list] = {}  # joint i or group -1-gid -> [(gid, position)...] from root
        for group in self.root.walk():
            base = chain.get(-1 - group.gid, [])
            for pos, item in enumerate(group.items):
                key = -1 - item.gid if isinstance(item, Group) else item
                chain[key] = [*base, (group.gid, pos)]
        out: dict[int, set] = {}
        for src, dst in self.edges:
            a, b = chain[src], chain[dst]
            k = 0
            while k + 1 < min(len(a), len(b)) and a[k + 1][0] == b[k + 1][0]:
                k += 1
            if a[k][1] != b[k][1]:
                out.setdefault(a[k][0], set()).add((a[k][1], b[k][1]))
        return out

    def namespace(self, index: int, groups_of: dict[int, Group] | None = None) -> list[str]:
        """Labels of the groups holding joint ``index``, outermost first."""
        groups_of = groups_of or self.joint_groups()
        path, group = [], groups_of[index]
        while group is not None and group.parent is not None:
            path.append(group.label)
            group = group.parent
        return path[::-1]

    def joint_groups(self) -> dict[int, Group]:
        """Joint index -> the innermost group that lists it."""
        owner = {}
        for group in self.root.walk():
            owner.update((i, group) for i in group.items if not isinstance(i, Group))
        return owner
