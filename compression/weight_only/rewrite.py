"""Rewrite a graph's linear joints to ``matmul_nbits`` on their packed weights.

Each chosen joint ``y = x @ W.T (+ b)`` (``msc.linear``, ``msc.linear_bias``, ``nn.dense``:
weights ``[out, in]``) becomes, keeping its name and its output tensor's name::

    [x_s = multiply(x, 1 / s)]          only with an activation-aware scale s (AWQ)
    y   = matmul_nbits(x_s, q, scales, zero_points)      W * s, packed
    [y  = add(y, b)]                     only with a bias (the joint named as before)

So every reader of ``y`` (and of the graph outputs) is unchanged. Why a ``multiply`` joint and
not the scale folded into the layer before (AWQ folds it into a norm's gamma): any producer
works, every codegen writes it, and it costs K multiplies per token against the N * K / 2
weight bytes the layer reads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from msc.graph import MSCGraph, MSCJoint, MSCTensor
from msc.naming import UniqueNamer

from ..quantize.runner import fresh_prims
from .packing import PackedWeight

__all__ = ["LayerQuant", "rewrite_graph"]


@dataclass
class LayerQuant:
    """What one joint becomes: its packed weight and the per-input-channel scale it was
    quantized with (``None``: round to nearest on the weight as it is)."""

    packed: PackedWeight
    input_scale: np.ndarray | None = None


def _tensor(name: str, value: np.ndarray) -> MSCTensor:
    return MSCTensor(name, value.dtype.name, "", list(value.shape))


def _constant(index: int, name: str, value: np.ndarray, scope) -> MSCJoint:
    out = MSCTensor(f"{name}:0", value.dtype.name, "", list(value.shape))
    return MSCJoint(index, name, "", "constant", {}, outputs=[out],
                    weights={"const": _tensor(name, value)}, scope=scope)


class _Rewriter:
    def __init__(self, graph: MSCGraph, weights: dict, layers: dict[str, LayerQuant]):
        self.graph, self.layers = graph, layers
        self.weights = dict(weights)
        self.namer = UniqueNamer(graph.node_names)
        self.weight_names = UniqueNamer([w.name for w in graph.get_weights()])
        self.nodes: list[MSCJoint] = []
        self.made: dict[str, MSCJoint] = {}

    def add(self, joint: MSCJoint) -> MSCJoint:
        self.nodes.append(joint)
        return joint

    def run(self) -> tuple[MSCGraph, dict]:
        for node in self.graph.get_nodes():
            pairs = [(self.made.get(p.name, p), i) for p, i in node.input_pairs()]
            layer = self.layers.get(node.name)
            if layer is None:
                joint = self.add(node.clone(inputs=pairs, index=len(self.nodes)))
            else:
                joint = self._layer(node, pairs[0], layer)
            self.made[node.name] = joint
        graph = MSCGraph(self.graph.name, self.nodes, list(self.graph.input_names),
                         list(self.graph.output_names), list(fresh_prims(self.graph)),
                         self.graph.output_kinds)
        used = {w.name for w in graph.get_weights()}
        return graph, {k: v for k, v in self.weights.items() if k in used}

    def _const(self, stem: str, value: np.ndarray, scope) -> MSCJoint:
        joint = _constant(len(self.nodes), self.namer(stem), value, scope)
        self.weights[joint.name] = value
        return self.add(joint)

    def _layer(self, node: MSCJoint, pair: tuple, layer: LayerQuant) -> MSCJoint:
        out = node.output_at(0)
        x_tensor = pair[0].output_at(pair[1])
        scope = node.scope
        if layer.input_scale is not None:
            inv = (1.0 / layer.input_scale).astype(np.float32)
            const = self._const(f"{node.name}_awq_inv", inv, scope)
            mul_name = self.namer(f"{node.name}_awq")
            mul = MSCJoint(len(self.nodes), mul_name, "", "multiply", {}, [pair, (const, 0)],
                           [x_tensor.clone(name=f"{mul_name}:0", alias="")], scope=scope)
            pair = (self.add(mul), 0)
        bias = node.weights.get("bias")
        packed = layer.packed
        stem = node.weights["weight"].name
        arrays = {"weight": packed.q, "scales": packed.scales,
                  "zero_points": packed.zero_points}
        weights = {}
        for role, value in arrays.items():
            name = self.weight_names(f"{stem}_{'q' if role == 'weight' else role}")
            self.weights[name] = value
            weights[role] = _tensor(name, value)
        attrs = {"in_features": packed.k, "bits": packed.bits, "block_size": packed.group}
        mm_name = node.name if bias is None else self.namer(f"{node.name}_nbits")
        mm_out = out.clone(name=f"{mm_name}:0", alias=out.alias if bias is None else "")
        mm = self.add(MSCJoint(len(self.nodes), mm_name, "", "matmul_nbits", attrs, [pair],
                               [mm_out], weights, scope=scope))
        if bias is None:
            return mm
        value = np.asarray(self.weights[bias.name] if bias.name in self.weights else
                           self.weights[bias.alias], np.float32).reshape(-1)
        const = self._const(f"{node.name}_bias", value, scope)
        return self.add(MSCJoint(len(self.nodes), node.name, "", "add", {},
                                 [(mm, 0), (const, 0)], [out.clone()], scope=scope))


def rewrite_graph(graph: MSCGraph, weights: dict, layers: dict[str, LayerQuant]
                  ) -> tuple[MSCGraph, dict]:
    """``(graph, weights)`` with each joint named in ``layers`` on its packed weight."""
    return _Rewriter(graph, weights, layers).run()
