"""Fold inference batch norms into the convolution before them.

    folded_graph, folded_weights, names = fold_batch_norm(graph, weights)

``conv -> nn.batch_norm (training off) [-> get_item 0]`` becomes one ``msc.conv<d>d_bias``
joint (keeping the conv's name) whose weight is scaled per output channel by
``s = gamma / sqrt(var + eps)`` and whose bias is ``(bias - mean) * s + beta``. Quantizers do
this first (onnxruntime's quantize_static runs its graph optimizer, which folds BN, before it
places Q/DQ): an unfolded BN puts a second rounding between the conv and its consumer and
leaves the conv weight's per-channel scales blind to gamma. The pruner can use it too (one
joint per channel space instead of two). A BN is left alone when its conv has other readers,
a shared weight, or when its axis is not the conv's output channel axis.
"""

from __future__ import annotations

import numpy as np

from msc.codegen.joint import find_weight
from msc.graph import MSCGraph, MSCJoint, serialize

__all__ = ["fold_batch_norm"]

# conv optype -> the fused optype that carries a bias (msc-conventions 4.2)
FOLDABLE = {"nn.conv1d": "msc.conv1d_bias", "nn.conv2d": "msc.conv2d_bias",
            "nn.conv3d": "msc.conv3d_bias", "msc.conv1d_bias": "msc.conv1d_bias",
            "msc.conv2d_bias": "msc.conv2d_bias", "msc.conv3d_bias": "msc.conv3d_bias"}


def _is_true(value) -> bool:
    return str(value).strip().lower() in ("1", "true")


def _channel_axis(conv: MSCJoint) -> int:
    layout = str(conv.get_attr("out_layout", "") or conv.get_attr("data_layout", "") or "")
    return layout.index("C") if "C" in layout else 1


def _readers(graph: MSCGraph, node: MSCJoint) -> list[tuple[MSCJoint, int]]:
    return [pair for t in node.outputs for pair in graph.find_consumers_and_indices(t)]


def _foldable(graph: MSCGraph, bn: MSCJoint, holders: dict) -> MSCJoint | None:
    """The conv ``bn`` folds into, or None."""
    if bn.optype != "nn.batch_norm" or _is_true(bn.get_attr("training", "0")):
        return None
    conv, index = bn.input_pairs()[0]
    if conv.optype not in FOLDABLE or index != 0 or len(_readers(graph, conv)) != 1:
        return None
    if len(holders.get(conv.weights["weight"].name, ())) != 1:
        return None  # a shared weight: scaling it would change the other reader
    if int(bn.get_attr("axis", "1")) % len(bn.outputs[0].shape) != _channel_axis(conv):
        return None
    # only the normalized result may be read (outputs 1 and 2 are running statistics)
    for reader, _ in _readers(graph, bn):
        if reader.optype != "get_item" or int(reader.get_attr("index", "0") or 0) != 0:
            return None
    return conv


def _folded_arrays(conv: MSCJoint, bn: MSCJoint, weights: dict):
    def get(role):
        return np.asarray(find_weight(weights, bn.weights[role]), np.float64).reshape(-1)
    w_tensor = conv.weights["weight"]
    weight = np.asarray(find_weight(weights, w_tensor), np.float64).reshape(w_tensor.shape)
    out_axis = w_tensor.layout.name.index("O") if w_tensor.layout else 0
    scale = get("gamma") / np.sqrt(get("var") + float(bn.get_attr("epsilon", "1e-5")))
    shape = [1] * weight.ndim
    shape[out_axis] = -1
    bias = np.zeros(weight.shape[out_axis])
    if "bias" in conv.weights:
        bias = np.asarray(find_weight(weights, conv.weights["bias"]), np.float64).reshape(-1)
    new_bias = (bias - get("mean")) * scale + get("beta")
    return (weight * scale.reshape(shape)).astype(np.float32), new_bias.astype(np.float32)


def _fold(conv: MSCJoint, bn: MSCJoint, weights: dict, out: dict) -> MSCJoint:
    """The fused joint (unowned, inputs still pointing into the old graph)."""
    weight, bias = _folded_arrays(conv, bn, weights)
    bias_tensor = conv.weights["bias"] if "bias" in conv.weights else bn.weights["beta"]
    bias_tensor = bias_tensor.clone(shape=[len(bias)], layout="O", dtype="float32")
    w_tensor = conv.weights["weight"]
    out[w_tensor.name], out[bias_tensor.name] = weight, bias
    for role in ("gamma", "mean", "var", "beta"):
        if bn.weights[role].name != bias_tensor.name:
            out.pop(bn.weights[role].name, None)
    return conv.clone(optype=FOLDABLE[conv.optype],
                      weights={"weight": w_tensor.clone(), "bias": bias_tensor},
                      outputs=[conv.outputs[0].clone(shape=list(bn.outputs[0].shape))])


def fold_batch_norm(graph: MSCGraph, weights: dict) -> tuple[MSCGraph, dict, list[str]]:
    """``(graph, weights, folded BN names)`` with every foldable inference BN folded into its
    conv (see the module doc); ``graph`` and ``weights`` are not changed."""
    holders = {}
    for node in graph.get_nodes():
        for tensor in node.weights.values():
            holders.setdefault(tensor.name, set()).add(node.name)
    pairs = {}
    for node in graph.get_nodes():
        conv = _foldable(graph, node, holders)
        if conv is not None:
            pairs[conv.name] = node
    if not pairs:
        return graph, weights, []
    out = dict(weights)
    skip = {bn.name for bn in pairs.values()}
    made: dict[str, MSCJoint] = {}
    renamed: dict[str, str] = {}  # old output tensor -> the folded conv's output tensor
    nodes: list[MSCJoint] = []
    for node in graph.get_nodes():
        if node.name in skip:
            continue
        parent = node.input_pairs()[0][0] if node.optype == "get_item" else None
        if parent is not None and parent.name in skip:  # the BN's result: the folded conv
            made[node.name] = made[parent.input_pairs()[0][0].name]
            renamed[node.outputs[0].name] = made[node.name].outputs[0].name
            continue
        fresh = _fold(node, pairs[node.name], weights, out) if node.name in pairs else node
        inputs = [(made[p.name], i if made[p.name].name == p.name else 0)
                  for p, i in fresh.input_pairs()]
        clone = fresh.clone(inputs=inputs, index=len(nodes))
        made[clone.name] = clone
        nodes.append(clone)
    outputs = [renamed.get(name, name) for name in graph.output_names]
    prims = serialize.graph_parts(graph.to_dict())[4] if graph.prims else []  # unowned copies
    folded = MSCGraph(graph.name, nodes, list(graph.input_names), outputs, list(prims),
                      graph.output_kinds)
    return folded, out, sorted(skip)
