"""What the pattern rules of the passes read: the one ``OnnxGraph`` (who makes and who reads
each value) and, beside it, the facts the writer knows (constants, static shapes and dtypes,
the opset). ``passes/pipeline.py`` makes one ``Walk`` and hands it to every pass in order."""

from __future__ import annotations

import numpy as np

from ..node import OnnxNode
from .graph import OnnxGraph

__all__ = ["Walk"]


class Walk:
    """The graph with what the rules read beside it. ``made`` / ``users`` / ``keep`` are the
    graph's own (kept in step by its methods), not copies."""

    def __init__(self, graph: OnnxGraph, consts: dict, shapes: dict, dtypes: dict,
                 opset: int):
        self.graph, self.opset = graph, opset
        self.made, self.users, self.keep = graph.made, graph.users, graph.keep
        self.consts, self.shapes, self.dtypes = consts, shapes, dtypes

    @classmethod
    def of(cls, nodes: list[OnnxNode], consts: dict, keep: set, shapes: dict, dtypes: dict,
           opset: int) -> Walk:
        """A Walk over a new graph of ``nodes`` (``keep``: the graph outputs)."""
        return cls(OnnxGraph(nodes, keep), consts, shapes, dtypes, opset)

    def nodes(self):
        """The graph's nodes in order, skipping those removed on the way."""
        return self.graph.walk()

    def rewrite(self, node: OnnxNode, drop=(), **fields) -> None:
        """``node`` becomes the op ``fields`` say; the nodes of ``drop`` go (OnnxGraph.rewrite)."""
        self.graph.rewrite(node, drop, **fields)

    def back(self, value: str, op_type: str, uses: int = 1) -> OnnxNode | None:
        """The node of ``op_type`` making ``value`` when ``value`` has ``uses`` readers and is
        no graph output."""
        node = self.made.get(value)
        if node is None or node.op_type != op_type or node.domain or \
                value in self.keep or len(self.users.get(value, [])) != uses:
            return None
        return node

    def const(self, value: str) -> np.ndarray | None:
        data = self.consts.get(value)
        return None if data is None else np.asarray(data)

    def scalar(self, value: str) -> float | None:
        data = self.const(value)
        return None if data is None or data.size != 1 else float(data.reshape(-1)[0])

    def shape(self, value: str) -> list | None:
        data = self.const(value)
        return list(data.shape) if data is not None else self.shapes.get(value)
