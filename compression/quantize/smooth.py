"""SmoothQuant: move activation outliers into the weights before int8 quantization.

A linear ``y = x W^T`` reads the same ``x`` as ``(x / s) (W diag(s))^T`` for any positive
per-input-channel ``s``. Transformers' activations have a few channels far larger than the
rest, which a per-tensor uint8 scale spends its 256 steps on; weights are quantized per output
channel and absorb a larger column cheaply. SmoothQuant (Xiao et al., 2023) takes
``s_j = max|x_j|^alpha / max|W_:j|^(1 - alpha)``: alpha 0 leaves the weights alone, alpha 1
moves all of the activation's range into them.

Here the linears (``smoothable``: weight ``[out, in]``) that read one tensor form a group (q, k and v after a norm) with one ``s``, from the largest
weight column of the group. The ``1 / s`` goes into the producer when the group is all that
reads it and it is a ``nn.layer_norm`` (gamma and beta) or a ``multiply`` by a per-channel
constant (the weight of an exported RMSNorm); else a ``multiply`` joint by ``1 / s`` is
inserted before the group (a post-norm residual reads the norm's output too). The graph stays a
float graph computing the same function; ``quantize`` then places Q/DQ as usual, so the result
is a standard QDQ model.

    smoothed, sweights, info = smooth(graph, weights, batches, alpha=0.5)
    qgraph, qweights, report = quantize(graph, weights, batches, {"smooth": "search"})
"""

from __future__ import annotations

import numpy as np

from msc.codegen.joint import find_weight
from msc.errors import ValidationError
from msc.graph import MSCGraph, MSCJoint, MSCTensor
from msc.naming import UniqueNamer

from .config import DEFAULT_OPTYPES
from .runner import fresh_prims, input_arrays, make_runner, with_outputs

__all__ = ["ALPHAS", "channel_absmax", "smooth", "smooth_groups", "smoothable"]


def smoothable(node: MSCJoint) -> bool:
    """A linear: a quantized optype (the op table's int8 fact) with an ``OI`` weight, i.e.
    data [..., in] x weight [out, in] -> [..., out] (msc.linear[_bias], nn.dense)."""
    weight = node.weights.get("weight")
    return node.optype in DEFAULT_OPTYPES and weight is not None and \
        weight.layout.name == "OI"

ALPHAS = (0.3, 0.5, 0.7)  # the alpha search of quantize(..., {"smooth": "search"})
_LIMIT = 1e4  # s stays in [1 / _LIMIT, _LIMIT]: a dead channel must not blow a weight up


def _holders(graph: MSCGraph) -> dict[str, set]:
    holders: dict[str, set] = {}
    for node in graph.get_nodes():
        for tensor in node.weights.values():
            holders.setdefault(tensor.name, set()).add(node.name)
    return holders


def smooth_groups(graph: MSCGraph) -> dict[str, list[MSCJoint]]:
    """{activation tensor: the linears reading it}, for linears whose weights no other joint
    holds (a tied embedding cannot be rescaled for one reader)."""
    holders = _holders(graph)
    groups: dict[str, list[MSCJoint]] = {}
    for node in graph.get_nodes():
        if not smoothable(node) or len(holders[node.weights["weight"].name]) != 1:
            continue
        parent, index = node.input_pairs()[0]
        tensor = parent.output_at(index)
        if parent.optype != "constant" and tensor.dtype.startswith("float"):
            groups.setdefault(tensor.name, []).append(node)
    return groups


def channel_absmax(graph: MSCGraph, weights: dict, names: list[str], data,
                   executor: str = "torch") -> dict[str, np.ndarray]:
    """{tensor: max |x| per last-axis channel} over the batches of ``data``."""
    run = make_runner(with_outputs(graph, names), weights, executor)
    out: dict[str, np.ndarray] = {}
    for item in data:
        values = run(input_arrays(graph, item))
        for name in names:
            value = np.abs(np.asarray(values[name], np.float32))
            peak = value.reshape(-1, value.shape[-1]).max(axis=0)
            out[name] = np.maximum(out[name], peak) if name in out else peak
    if not out and names:
        raise ValidationError("the calibration data gave no batch", key="calib_data",
                              hint="pass a non-empty iterable of input dicts or arrays")
    return out


def _weight(weights: dict, tensor: MSCTensor) -> np.ndarray:
    return np.asarray(find_weight(weights, tensor), np.float32).reshape(tensor.shape)


def _scales(act_max: np.ndarray, group: list[MSCJoint], weights: dict, alpha: float):
    w_max = np.max([np.abs(_weight(weights, j.weights["weight"])).max(axis=0) for j in group],
                   axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.power(act_max, alpha) / np.power(w_max, 1 - alpha)
    s = np.where(np.isfinite(s) & (s > 0), s, 1.0)
    return np.clip(s, 1 / _LIMIT, _LIMIT).astype(np.float32)


def _fold_target(graph: MSCGraph, tensor: str, group: list[MSCJoint], holders: dict):
    """``(joint, weight role)`` whose per-channel constant takes ``1 / s``, or None."""
    producer = graph.find_producer(tensor)
    readers = {r.name for r, _ in graph.find_consumers_and_indices(graph.find_tensor(tensor))}
    if readers != {j.name for j in group} or tensor in graph.output_names:
        return None
    channels = graph.find_tensor(tensor).shape[-1]
    if producer.optype == "nn.layer_norm" and {"gamma", "beta"} <= set(producer.weights):
        roles = [(producer, "gamma"), (producer, "beta")]
    elif producer.optype == "multiply":
        roles = [(p, "const") for p, _ in producer.input_pairs()
                 if p.optype == "constant" and "const" in p.weights
                 and int(np.prod(p.weights["const"].shape or [0])) == channels
                 and p.weights["const"].shape[-1] == channels
                 and len(graph.find_consumers(p.outputs[0])) == 1]
    else:
        return None
    if not roles or any(len(holders[j.weights[r].name]) != 1 for j, r in roles):
        return None
    return roles


class _Builder:
    """Copies the graph joint by joint, with extra joints and re-pointed inputs."""

    def __init__(self, graph: MSCGraph):
        self.graph, self.nodes, self.made = graph, [], {}
        self.namer = UniqueNamer(graph.node_names)
        self.swap: dict[tuple[str, str], MSCJoint] = {}  # (reader, tensor) -> new producer

    def add(self, node: MSCJoint) -> MSCJoint:
        pairs = []
        for parent, index in node.input_pairs():
            new = self.swap.get((node.name, parent.output_at(index).name))
            pairs.append((new, 0) if new is not None else (self.made.get(parent.name, parent),
                                                           index))
        clone = node.clone(inputs=pairs, index=len(self.nodes))
        self.made[clone.name] = clone
        self.nodes.append(clone)
        return clone

    def divide(self, producer: MSCJoint, out_idx: int, inv: np.ndarray, arrays: dict,
               readers: list[str]) -> None:
        """``tensor * inv`` (a constant joint and a multiply joint) for ``readers``."""
        tensor = producer.output_at(out_idx)
        stem = tensor.name.replace(":", "_").replace(".", "_")
        c_name, m_name = self.namer(f"{stem}_smooth"), self.namer(f"{stem}_smoothed")
        weight = MSCTensor(c_name, "float32", "", [int(inv.size)])
        const = MSCJoint(len(self.nodes), c_name, "", "constant", {},
                         outputs=[weight.clone(name=f"{c_name}:0")],
                         weights={"const": weight})
        self.nodes.append(const)
        arrays[c_name] = inv
        mul = MSCJoint(len(self.nodes), m_name, "", "multiply", {},
                       [(producer, out_idx), (const, 0)],
                       [tensor.clone(name=f"{m_name}:0", alias="")], scope=producer.scope)
        self.nodes.append(mul)
        self.swap.update({(reader, tensor.name): mul for reader in readers})

    def graph_of(self) -> MSCGraph:
        g = self.graph
        return MSCGraph(g.name, self.nodes, list(g.input_names), list(g.output_names),
                        list(fresh_prims(g)), g.output_kinds)


def smooth(graph: MSCGraph, weights: dict, calib_data, alpha: float = 0.5,
           executor: str = "torch", absmax: dict | None = None):
    """``(graph, weights, info)``: the same function with each linear group's input divided
    by ``s`` and its weights' input columns multiplied by it (see the module doc). ``info``:
    ``{"alpha", "groups": {tensor: {"linears", "folded_into"}}}``; ``absmax`` reuses the
    per-channel ranges of ``channel_absmax`` (an alpha search measures them once).

    >>> sgraph, sweights, info = smooth(graph, weights, batches, alpha=0.5)  # doctest: +SKIP
    """
    if not 0 <= float(alpha) <= 1:
        raise ValidationError(f"smoothing alpha={alpha!r} must be in [0, 1]", key="smooth",
                              hint="0.5 is SmoothQuant's default; 'search' tries several")
    groups = smooth_groups(graph)
    if absmax is None:
        absmax = channel_absmax(graph, weights, list(groups), calib_data, executor)
    holders = _holders(graph)
    out, info = dict(weights), {"alpha": float(alpha), "groups": {}}
    inserted: dict[str, np.ndarray] = {}
    for tensor, group in groups.items():
        s = _scales(absmax[tensor], group, weights, float(alpha))
        for joint in group:
            w = joint.weights["weight"]
            out[w.name] = _weight(weights, w) * s[None, :]
        roles = _fold_target(graph, tensor, group, holders)
        for joint, role in roles or ():
            t = joint.weights[role]
            out[t.name] = (_weight(weights, t).reshape(-1) / s).reshape(t.shape)
        if roles is None:
            inserted[tensor] = (1 / s).astype(np.float32)
        info["groups"][tensor] = {"linears": [j.name for j in group],
                                  "folded_into": roles[0][0].name if roles else None}
    builder = _Builder(graph)
    for node in graph.get_nodes():
        clone = builder.add(node)
        for out_idx, t in enumerate(clone.outputs):
            if t.name in inserted:
                builder.divide(clone, out_idx, inserted[t.name], out,
                               [j.name for j in groups[t.name]])
    return builder.graph_of(), out, info
