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

from ..graph.base import bulk_objects
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


def _tensor(tensor, texts: dict) -> dict:
    """One output's row; its text is shared by every tensor of the same shape, dtype and
    layout (a big model repeats a few dozen of them), so each is formatted once."""
    shape, dtype, layout = tensor.get_shape(with_prims=True), tensor.dtype, str(tensor.layout)
    key = (dtype, layout, *shape)
    text = texts.get(key)
    if text is None:
        dims = "x".join(map(str, shape)) or "scalar"
        text = texts[key] = f"{dims} {dtype}" + (f" {layout}" if layout else "")
    return {"name": tensor.name, "dtype": dtype, "layout": layout, "shape": shape, "text": text}


def _record(joint, weights: Mapping[str, Any], texts: dict) -> dict:
    tensors = [_tensor(t, texts) for t in joint.get_outputs()]
    outputs = [t["text"] for t in tensors]
    return {"name": joint.name, "optype": joint.optype, "family": family_of(joint.optype),
            "scope": "/".join(joint.scope),
            "shape": outputs[0] if outputs else "", "outputs": outputs,
            "attrs": dict(joint.attrs),
            "weights": _weights(joint, weights) if joint.weights else [],
            "parents": [p.index for p in joint.parents],
            "in_edges": [(p.index, k) for p, k in joint.input_pairs()], "tensors": tensors}


def _common(up: dict, src: int, dst: int) -> tuple[int, int, int]:
    """(gid, position of src's side, position of dst's side) at the innermost group holding
    both joints; ``up`` is ``Scene._slots()``."""
    seen, key = {}, src
    while key in up:  # the root is listed by no group
        gid, pos = up[key]
        seen[gid] = pos
        key = -1 - gid
    key = dst
    while True:
        gid, pos = up[key]
        if gid in seen:
            return gid, seen[gid], pos
        key = -1 - gid


class Scene:
    """Joint records (index = joint index) plus the group tree of a graph."""

    def __init__(self, name: str, joints: list[dict], root: Group):
        self.name = name
        self.joints = joints
        self.root = root
        self.edges = [(p, j) for j, rec in enumerate(joints) for p in rec["parents"]]
        self._up: dict[int, tuple[int, int]] | None = None
        self._owners: dict[int, Group] | None = None

    @classmethod
    def of(cls, graph, weights: Mapping[str, Any] | None = None) -> Scene:
        # tens of thousands of small records, none of them garbage: no GC passes over them
        with bulk_objects():
            nodes = list(graph.get_nodes())
            texts: dict = {}
            joints = [_record(joint, weights or {}, texts)
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
        up = self._slots()
        out: dict[int, set] = {}
        for src, dst in self.edges:
            (ga, pa), (gb, pb) = up[src], up[dst]
            if ga != gb:  # climb to the lowest common ancestor (most edges stay in a group)
                ga, pa, pb = _common(up, src, dst)
            if pa != pb:
                out.setdefault(ga, set()).add((pa, pb))
        return out

    def _slots(self) -> dict[int, tuple[int, int]]:
        """Joint i or group -1-gid -> (gid of the group listing it, position there)."""
        if self._up is None:
            self._up = {-1 - item.gid if isinstance(item, Group) else item: (group.gid, pos)
                        for group in self.root.walk() for pos, item in enumerate(group.items)}
        return self._up

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
        if self._owners is None:
            self._owners = {i: group for group in self.root.walk()
                            for i in group.items if not isinstance(i, Group)}
        return self._owners
