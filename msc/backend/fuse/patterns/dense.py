"""``act(matmul(x, W) + b)`` as one dense call with the activation as its epilogue.

A matmul with a constant 2-D weight, an optional constant bias ``add`` along the last axis and
a single-input activation (``nn.gelu``, ``nn.gelu_tanh``, ``nn.silu`` or an ``elementwise``
expression of one input, from elementwise.py), each result used only by the next, becomes one
:class:`~msc.backend.kernels.dense_act.DenseActKernel` call: the weight is packed here, once,
and the activation runs on each chunk of output columns while it is in cache.
"""

from __future__ import annotations

import numpy as np

from ...kernels.activation import ACTIVATION_EXPRS, UNARY_EXPR, ExprKernel
from ...kernels.dense import DenseFact, GemmRunner
from ...kernels.dense_act import DenseActKernel
from ...runtime.program import Node
from .views import Graph

__all__ = ["fuse_dense_act"]

_MATMUL = DenseFact("KN")


def _activation(node: Node) -> tuple | None:
    """The one-input expression a node computes, or None."""
    if node.kind != "call":
        return None
    if node.site is not None and node.op in ACTIVATION_EXPRS:
        return UNARY_EXPR[node.op] if node.site.tensor(0).dtype == "float32" else None
    fn = node.fn
    if node.op == "elementwise" and isinstance(fn, ExprKernel) and fn.inputs == (0,):
        return fn.expr
    return None


def _bias(graph: Graph, add: Node, n: int) -> np.ndarray | None:
    consts = [c for v in add.ins if (c := graph.const(v)) is not None]
    c = consts[0] if len(consts) == 1 else None
    if not isinstance(c, np.ndarray) or c.dtype != np.float32 or c.size != n:
        return None
    return c.reshape(-1) if c.shape[-1] == n else None


def _unview(graph: Graph, vid: int) -> int:
    """``vid`` before any single-use reshapes that keep the last dim (rows regrouped)."""
    while graph.single_use(vid) and (node := graph.call(vid, "reshape")) is not None:
        before, after = graph.shape(node.ins[0]), graph.shape(vid)
        if before is None or after is None or not before or not after or (
                before[-1] != after[-1]):
            break
        vid = node.ins[0]
    return vid


def fuse_dense_act(graph: Graph) -> int:
    count = 0
    for node in graph.nodes():
        expr = _activation(node)
        if expr is None or not graph.single_use(node.ins[0]):
            continue
        y, bias = _unview(graph, node.ins[0]), None
        add = graph.call(y, "add")
        if add is not None:
            y = next((_unview(graph, v) for v in add.ins
                      if graph.call(_unview(graph, v), "matmul") is not None), None)
            if y is None or not graph.single_use(y):
                continue
        mm = graph.call(y, "matmul")
        w = graph.const(mm.ins[1]) if mm is not None else None
        if w is None or not _MATMUL.match(mm.site) or w.ndim != 2 or w.dtype != np.float32:
            continue
        if add is not None and (bias := _bias(graph, add, w.shape[1])) is None:
            continue
        kernel = DenseActKernel(GemmRunner(w, bias, relu=False), expr,
                                op=f"dense+act ({node.name})")
        graph.replace(node.out, (mm.ins[0],), kernel, "dense+act", node.name)
        count += 1
    return count
