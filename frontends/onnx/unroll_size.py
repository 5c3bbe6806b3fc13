"""How many joints unrolling a subgraph makes, estimated before any step is built.

Loop, Scan and SequenceMap are unrolled (the body copied once per step), so a small file can
declare millions of joints: a Loop of 4,096 steps whose body is another such Loop is 16
million. ``graph_size`` counts a body's nodes with the constant trip counts of the Loops inside
it (an unknown count counts once; the importer's per-joint budget still bounds it), so the
converter can refuse the whole unrolling up front (msc.limits)::

    g.reserve_unroll(node, steps=4096, body=node.attrs["body"])  # ResourceLimitError or None
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

__all__ = ["MAX_UNROLL", "graph_size"]

MAX_UNROLL = 4096  # Loop steps inlined at most (each step copies the body into main)


def graph_size(graph: onnx.GraphProto, outer=lambda name: None) -> int:
    """Nodes the graph expands to; ``outer(name)`` gives an int constant from outer scopes."""
    consts = _constants(graph)

    def lookup(name: str):
        return consts[name] if name in consts else outer(name)

    total = 0
    for node in graph.node:
        total += 1
        subs = [a.g for a in node.attribute if a.HasField("g")] + \
            [g for a in node.attribute for g in a.graphs]
        inner = sum(graph_size(sub, lookup) for sub in subs)
        total += _trips(node, lookup) * inner
    return total


def _trips(node: onnx.NodeProto, lookup) -> int:
    """Steps a Loop with a constant trip count makes (capped like the converter); else 1."""
    if node.op_type != "Loop" or not node.input or not node.input[0]:
        return 1
    trips = lookup(node.input[0])
    return 1 if trips is None else max(0, min(int(trips), MAX_UNROLL))


def _constants(graph: onnx.GraphProto) -> dict:
    """Scalar int constants of the graph: initializers and Constant nodes."""
    found = {}
    for tensor in graph.initializer:
        if not tensor.external_data and len(tensor.dims) <= 1 and np.prod(tensor.dims) == 1:
            found[tensor.name] = _scalar(numpy_helper.to_array, tensor)
    for node in graph.node:
        if node.op_type == "Constant" and node.output:
            for attr in node.attribute:
                if attr.name == "value" and attr.HasField("t"):
                    found[node.output[0]] = _scalar(numpy_helper.to_array, attr.t)
    return {k: v for k, v in found.items() if v is not None}


def _scalar(read, tensor):
    try:
        value = np.ravel(read(tensor))
    except (ValueError, TypeError):
        return None
    return int(value[0]) if value.size == 1 and value.dtype.kind in "iu" else None
