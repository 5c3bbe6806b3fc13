"""The weight-only plan: what each layer becomes, as JSON that can be saved, edited and
re-applied without calibration data.

    plan = plan_weights(graph, weights, calib, {"bits": 4, "method": "awq"})
    save_weight_plan(plan, "int4.plan.json")
    qgraph, qweights = apply_weight_plan(graph, weights, "int4.plan.json")

An entry is ``{node: {"bits", "group_size", "symmetric", "alpha", "input_scale"}}``;
``input_scale`` is the AWQ per-input-channel scale (a list of K floats) or null for round to
nearest. Applying it quantizes ``W * input_scale`` to nearest, which is exactly what the search
chose, so a saved plan gives the same packed bytes.
"""

from __future__ import annotations

import json

import numpy as np

from msc.codegen.joint import find_weight
from msc.errors import SerializationError, ValidationError
from msc.graph import MSCGraph
from msc.graph.files import write_atomic

from ..quantize.plan import read_plan_json
from .config import LINEAR_WEIGHTS
from .packing import check_format, quantize_rtn
from .rewrite import LayerQuant, rewrite_graph

__all__ = ["apply_weight_plan", "layer_weight", "load_weight_plan", "plan_entry",
           "save_weight_plan"]

_KEYS = {"bits", "group_size", "symmetric", "alpha", "input_scale"}


def plan_entry(config: dict, alpha: float = 0.0, input_scale=None) -> dict:
    scale = None if input_scale is None else [float(v) for v in np.asarray(input_scale)]
    return {"bits": config["bits"], "group_size": config["group_size"],
            "symmetric": config["symmetric"], "alpha": float(alpha), "input_scale": scale}


def layer_weight(node, weights: dict) -> np.ndarray:
    """The joint's float ``[out, in]`` weight."""
    tensor = node.weights["weight"]
    return np.asarray(find_weight(weights, tensor), np.float32).reshape(tensor.shape)


def save_weight_plan(plan: dict, path: str) -> None:
    write_atomic(path, json.dumps(plan, indent=1))


def load_weight_plan(path_or_dict) -> dict:
    """A plan from a JSON file (or a dict), every entry checked."""
    plan = read_plan_json(path_or_dict, "weight-only plan", "save_weight_plan")
    if not isinstance(plan, dict):
        raise SerializationError("a weight-only plan must be a JSON object {node: {...}}")
    for name, entry in plan.items():
        if not isinstance(entry, dict) or set(entry) != _KEYS:
            raise SerializationError(f"plan entry needs exactly the keys {sorted(_KEYS)}, got "
                                     f"{entry!r:.80}", node=name)
        check_format(entry["bits"], entry["group_size"])
    return plan


def apply_weight_plan(graph: MSCGraph, weights: dict, plan) -> tuple[MSCGraph, dict]:
    """``(graph, weights)`` with each planned joint a ``matmul_nbits`` on its packed weight."""
    plan = load_weight_plan(plan)
    layers = {}
    for name, entry in plan.items():
        node = graph.find_node(name) if name in graph.node_names else None
        if node is None or node.optype not in LINEAR_WEIGHTS or "weight" not in node.weights:
            raise ValidationError("the plan names no linear joint of the graph", node=name,
                                  hint="was the plan made for another graph?")
        w = layer_weight(node, weights)
        scale = entry["input_scale"]
        if scale is not None:
            scale = np.asarray(scale, np.float32)
            if scale.shape != (w.shape[1],):
                raise ValidationError(f"input_scale has {scale.size} values, the weight "
                                      f"{w.shape[1]} inputs", node=name)
        packed = quantize_rtn(w if scale is None else w * scale, entry["bits"],
                              entry["group_size"], entry["symmetric"])
        layers[name] = LayerQuant(packed, scale)
    return rewrite_graph(graph, weights, layers)
