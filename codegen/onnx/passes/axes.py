"""A reduction over axes given at run time, back to one ``Reduce*(x, axes)`` node (and a
Reshape to dims computed from run-time axes, back to ``Unsqueeze`` / ``Squeeze``).

The importer reduces over axes known only at run time by reshaping ``x`` to interleaved
(kept, reduced) dim pairs computed from the axes (``frontends/onnx/runtime_axes.py``), reducing
the odd axes, and (keepdims=0) reshaping to the dims not reduced. Here the shape arithmetic is
checked, not trusted: the subgraph computing each shape is run (onnx's reference evaluator)
for every valid value of the axes input, and only when it gives the interleaved dims (and the
kept dims) for all of them does the spelling become ``Reduce*(x, axes, keepdims)``.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..node import OnnxNode
from .walk import Walk

__all__ = ["fold_runtime_axes"]

_REDUCES = {"ReduceMax", "ReduceMin", "ReduceSum", "ReduceMean", "ReduceProd", "ReduceL1",
            "ReduceL2", "ReduceLogSum", "ReduceSumSquare"}
_MAX_CASES = 4096  # axes values to try; a larger domain stays spelled out


def fold_runtime_axes(w: Walk) -> None:
    for node in w.nodes():
        if node.op_type in _REDUCES and not node.domain:
            _fold_at(w, node)
    for node in w.nodes():
        if node.op_type == "Reshape" and not node.domain:
            _squeeze_at(w, node)


def _squeeze_at(w: Walk, node: OnnxNode) -> None:
    """Reshape(x, dims computed from the axes) -> Unsqueeze(x, axes) or Squeeze(x, axes),
    whichever the dims are for every valid axes value."""
    shape = w.shape(node.inputs[0])
    axes = shape and not any(d < 0 for d in shape) and axes_input(w, node.inputs[1])
    if not axes:
        return
    rank, count = len(shape), w.shape(axes)[0]
    grown = domain_of(rank + count, count)
    if grown and computes(w, node.inputs[1], axes, grown, rank + count,
                           lambda a: _unsqueezed(shape, a)):
        w.rewrite(node, op_type="Unsqueeze", inputs=[node.inputs[0], axes], attrs={})
        return
    ones = [v for v in domain_of(rank, count) or () if all(shape[a % rank] == 1 for a in v)]
    if ones and computes(w, node.inputs[1], axes, ones, rank,
                          lambda a: [d for i, d in enumerate(shape) if i not in a]):
        w.rewrite(node, op_type="Squeeze", inputs=[node.inputs[0], axes], attrs={})


def _unsqueezed(shape: list[int], axes: set) -> list[int]:
    dims = iter(shape)
    return [1 if i in axes else next(dims) for i in range(len(shape) + len(axes))]


def odd_axes(w: Walk, node: OnnxNode) -> list[int] | None:
    axes = node.attrs.get("axes")
    if axes is None and len(node.inputs) > 1:
        data = w.const(node.inputs[1])
        axes = None if data is None else data.reshape(-1).tolist()
    return axes


def _fold_at(w: Walk, node: OnnxNode) -> None:
    view = w.back(node.inputs[0], "Reshape")
    x = view and view.inputs[0]
    shape = x and w.shape(x)
    if not shape or any(d < 0 for d in shape) or node.attrs.get("keepdims", 1) or \
            odd_axes(w, node) != list(range(1, 2 * len(shape), 2)) or \
            (w.opset < 18 and node.op_type != "ReduceSum"):
        return
    axes = axes_input(w, view.inputs[1])
    if axes is None:
        return
    rank = len(shape)
    domain = domain_of(rank, w.shape(axes)[0])
    if domain is None or not computes(w, view.inputs[1], axes, domain, rank,
                                       lambda a: interleaved(shape, a)):
        return
    end, keepdims = node, 1
    tail = _only_reader(w, node.outputs[0], "Reshape")
    if tail is not None and computes(w, tail.inputs[1], axes, domain, rank,
                                      lambda a: [d for i, d in enumerate(shape) if i not in a]):
        end, keepdims = tail, 0
    w.rewrite(end, [view, node], op_type=node.op_type, inputs=[x, axes], domain="",
              attrs={"keepdims": keepdims})


def _only_reader(w: Walk, value: str, op_type: str) -> OnnxNode | None:
    readers = w.users.get(value, [])
    if value in w.keep or len(readers) != 1 or readers[0].op_type != op_type:
        return None
    return readers[0]


def interleaved(shape: list[int], axes: set) -> list[int]:
    return [d for i, n in enumerate(shape) for d in ((1, n) if i in axes else (n, 1))]


def domain_of(rank: int, count: int) -> list[tuple] | None:
    """Every valid axes value: ``count`` distinct axes in [-rank, rank)."""
    if count < 1 or count > rank or (2 * rank) ** count > _MAX_CASES:
        return None
    values = itertools.product(range(-rank, rank), repeat=count)
    return [v for v in values if len({a % rank for a in v}) == count]


def axes_input(w: Walk, value: str) -> str | None:
    """The one non-constant graph value the shape ``value`` is computed from: a 1-D int64
    of static length (the axes)."""
    leaves = graph_leaves(w, [value])
    if leaves is None or len(leaves) != 1:
        return None
    axes = leaves.pop()
    shape = w.shape(axes)
    return axes if shape and len(shape) == 1 and w.dtypes.get(axes) == "int64" else None


def graph_leaves(w: Walk, values: list) -> set | None:
    """The non-constant graph values (inputs or values made outside the written nodes) that
    ``values`` are computed from; None when a custom-domain node lies on the way."""
    leaves, stack, seen = set(), list(values), set()
    while stack:
        v = stack.pop()
        if v in seen or not v:
            continue
        seen.add(v)
        node = w.made.get(v)
        if node is None:
            if w.const(v) is None:
                leaves.add(v)
        elif node.domain:
            return None
        else:
            stack.extend(node.inputs)
    return leaves


def computes(w: Walk, value: str, axes: str, domain: list, rank: int, want) -> bool:
    """Whether the subgraph making ``value`` gives ``want(axes wrapped into [0, rank))`` for
    every axes value of ``domain``."""
    run = evaluator(w, value, axes)
    if run is None:
        return False
    for values in domain:
        try:
            got = run(np.asarray(values, dtype=np.int64))
        except Exception:  # noqa: BLE001 - a subgraph the evaluator cannot run stays as is
            return False
        if np.asarray(got).reshape(-1).tolist() != want({a % rank for a in values}):
            return False
    return True


def evaluator(w: Walk, value: str, axes: str):
    """``f(axes array) -> value`` by onnx's reference evaluator over the nodes making it."""
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    order, stack, seen = [], [value], set()
    while stack:
        v = stack.pop()
        node = w.made.get(v)
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        order.append(node)
        stack.extend(i for i in node.inputs if i)
    order.sort(key=w.graph.position)
    used = {i for n in order for i in n.inputs if i}
    inits = [numpy_helper.from_array(np.asarray(w.const(v)), v) for v in sorted(used)
             if w.const(v) is not None]
    try:
        graph = helper.make_graph(
            [helper.make_node(n.op_type, n.inputs, n.outputs, **n.attrs)
             for n in order], "shape",
            [helper.make_tensor_value_info(axes, TensorProto.INT64, None)],
            [helper.make_tensor_value_info(value, TensorProto.UNDEFINED, None)], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", w.opset)])
        session = ReferenceEvaluator(model)
    except Exception:  # noqa: BLE001 - then the shape stays unproven
        return None
    return lambda values: session.run(None, {axes: values})[0]
