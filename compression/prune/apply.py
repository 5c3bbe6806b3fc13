"""Applying kept channels: a physically smaller graph and smaller weight arrays.

Every tensor and weight takes the size of its kept positions; attrs that count channels are
rewritten by the op's channel rule (reshape targets, conv ``groups``, split points); the graph
is rebuilt from its JSON form (prims and aliases intact) and checked.
"""

from __future__ import annotations

import numpy as np

from msc.graph import MSCGraph

from .analysis import Analysis
from .dims import size_of
from .rules import rule_of

__all__ = ["apply_keep"]


def _new_shape(analysis: Analysis, exprs: list, shape: list, keep: dict) -> list:
    out = []
    for expr, dim in zip(exprs, shape):
        touched = set(analysis.dims.index_maps(expr)) & set(keep)
        resolved = analysis.dims.resolve(expr)
        if not touched or size_of(resolved) == -1:
            out.append(dim)
        else:
            out.append(len(analysis.dims.kept(expr, keep)))
    return out


def _set_shape(tensor: dict, shape: list) -> None:
    if tensor["shape"] == shape:
        return
    prims = tensor.get("prims") or []
    if prims:  # static dims are spelled as digits in the prims
        tensor["prims"] = [str(n) if p.isdigit() else p for p, n in zip(prims, shape)]
    tensor["shape"] = shape


def apply_keep(analysis: Analysis, weights: dict, keep: dict) -> tuple[MSCGraph, dict]:
    """``(graph, weights)`` with only the kept channels (``{space id: indices}``)."""
    graph = analysis.graph
    data = graph.to_dict()
    shapes: dict[str, list] = {}
    for node in graph.get_nodes():
        for tensor in node.outputs:
            shapes[tensor.name] = _new_shape(analysis, analysis.texprs[tensor.name],
                                             tensor.shape, keep)
    for node_dict, node in zip(data["nodes"], graph.get_nodes()):
        old = {"inputs": [t.shape for t in node.get_inputs()],
               "outputs": [t.shape for t in node.outputs]}
        for tensor in node_dict["outputs"]:
            _set_shape(tensor, shapes.get(tensor["name"], tensor["shape"]))
        for tensor in node_dict["weights"].values():
            exprs = analysis.wexprs.get(tensor["name"])
            if exprs is not None:
                _set_shape(tensor, _new_shape(analysis, exprs, tensor["shape"], keep))
        new = {"inputs": [shapes.get(t.name, t.shape) for t in node.get_inputs()],
               "outputs": [t["shape"] for t in node_dict["outputs"]]}
        rewrite = rule_of(node.optype).rewrite
        if rewrite is not None and old != new:
            rewrite(node_dict, old, new)
    pruned = MSCGraph.from_dict(data)
    pruned.check()
    return pruned, prune_arrays(analysis, weights, keep)


def prune_arrays(analysis: Analysis, weights: dict, keep: dict) -> dict:
    """The weight arrays indexed down to their kept positions (others are shared as is)."""
    out = {}
    for name, array in weights.items():
        exprs = analysis.wexprs.get(name)
        if exprs is None or not any(set(analysis.dims.index_maps(e)) & set(keep)
                                    for e in exprs):
            out[name] = array
            continue
        array = np.asarray(array)
        index = [analysis.dims.kept(e, keep) for e in exprs]
        out[name] = np.ascontiguousarray(array[np.ix_(*index)])
    return out
