"""Apply a plan: ``quantize`` / ``dequantize`` joints (QDQ) on activations, and weights
replaced by their dequantized int8 values.

For an activation ``t`` in the plan the graph gets, right after ``t``'s producer::

    t_scale (constant) ─┐
    t_zero  (constant) ─┼─ t_q = quantize(t, t_scale, t_zero)  -> int8 / uint8
                        └─ t_dq = dequantize(t_q, t_scale, t_zero) -> float32

and the plan's consumers read ``t_dq:0`` instead of ``t``; every other reader keeps the float
tensor. A weight in the plan keeps its joint (so fused ``msc.*`` joints stay fused) and its
data becomes a ``codegen.qweight.QuantizedWeight``: the int8 values and the per-channel scale
(zero point 0), which every reader of an array sees as ``dequantize(quantize(w))`` in float32
(bit for bit what a dequantize joint on the int8 weight computes), while ``to_onnx`` writes it
as an int8 initializer + DequantizeLinear and ``pack_weights`` as int8 in the ``.npz``. Why a
record on the weight and not an int8 constant + ``dequantize`` joint: the fused joints, the
pruner and both codegens take weights, not computed inputs, so the graph stays as it is and
their numerics cannot change. ``int8_weights=False`` stores the float values instead.
"""

from __future__ import annotations

import numpy as np

from msc.codegen.joint import find_weight
from msc.codegen.qweight import QuantizedWeight
from msc.errors import ValidationError
from msc.graph import MSCGraph, MSCJoint, MSCTensor
from msc.naming import UniqueNamer

from ..fold import fold_batch_norm
from .plan import load_plan
from .qparams import fake_quant
from .runner import fresh_prims

__all__ = ["apply_plan", "qdq_names", "quantized_weight"]


def qdq_names(tensor: str) -> str:
    """The stem of the QDQ joints of ``tensor`` (``relu:0`` -> ``relu_0``)."""
    return tensor.replace(":", "_").replace(".", "_")


def _constant(index: int, name: str, value: np.ndarray) -> MSCJoint:
    weight = MSCTensor(name, value.dtype.name, "", list(value.shape))
    out = MSCTensor(f"{name}:0", value.dtype.name, "", list(value.shape))
    attrs = {"scalar": float(value)} if value.ndim == 0 else {}
    return MSCJoint(index, name, "", "constant", attrs, outputs=[out], weights={"const": weight})


def _qdq_joints(start: int, producer: MSCJoint, out_idx: int, entry: dict, namer: UniqueNamer,
                arrays: dict) -> list[MSCJoint]:
    tensor = producer.output_at(out_idx)
    stem = qdq_names(tensor.name)
    scale = np.asarray(entry["scale"], np.float32)
    zero = np.asarray(entry["zero_point"], entry["dtype"])
    s = _constant(start, namer(f"{stem}_scale"), scale)
    z = _constant(start + 1, namer(f"{stem}_zero"), zero)
    arrays[s.name], arrays[z.name] = scale, zero
    attrs = {"axis": int(entry["axis"])}
    q_name, dq_name = namer(f"{stem}_q"), namer(f"{stem}_dq")
    q = MSCJoint(start + 2, q_name, "", "quantize", {**attrs, "out_dtype": entry["dtype"]},
                 [(producer, out_idx), (s, 0), (z, 0)],
                 [tensor.clone(name=f"{q_name}:0", dtype=entry["dtype"], alias="")],
                 scope=producer.scope)
    dq = MSCJoint(start + 3, dq_name, "", "dequantize", {**attrs, "out_dtype": tensor.dtype},
                  [(q, 0), (s, 0), (z, 0)],
                  [tensor.clone(name=f"{dq_name}:0", alias="")], scope=producer.scope)
    return [s, z, q, dq]


def quantized_weight(value: np.ndarray, entry: dict, int8: bool = True):
    """The plan entry applied to a weight: a QuantizedWeight (int8 + scale) when the entry is
    int8 with zero point 0, else the fake-quantized float32 array (same numbers)."""
    zero = np.asarray(entry["zero_point"], entry["dtype"])
    if not (int8 and entry["dtype"] == "int8" and not zero.any()):
        return fake_quant(value, entry["scale"], zero, entry["axis"])
    axis = int(entry["axis"]) % max(value.ndim, 1)
    scale = np.asarray(entry["scale"], np.float32).reshape(-1)
    shape = [1] * value.ndim
    if value.ndim and scale.size > 1:
        shape[axis] = -1
    # the quantize joint's arithmetic: divide in float32, round half to even, clip
    q = np.clip(np.round(np.asarray(value, np.float32) / scale.reshape(shape)), -128, 127)
    return QuantizedWeight(q.astype(np.int8), scale, axis)


def _weights(graph: MSCGraph, weights: dict, plan: dict, int8: bool) -> dict:
    out = dict(weights)
    for tensor in {w.name: w for w in graph.get_weights()}.values():
        entry = plan.get(tensor.name)
        if entry is None:
            continue
        value = find_weight(weights, tensor).reshape(tensor.shape)
        out[tensor.name] = quantized_weight(value, entry, int8)
        if tensor.alias in out and tensor.alias != tensor.name:
            out[tensor.alias] = out[tensor.name]
    return out


def _check_plan(graph: MSCGraph, plan: dict) -> None:
    weight_names = {w.name for w in graph.get_weights()}
    for name in plan:
        if name not in weight_names and not graph.has_tensor(name):
            raise ValidationError("plan entry names no tensor of the graph", tensor=name,
                                  hint="was the plan made for another graph?")


def apply_plan(graph: MSCGraph, weights: dict, plan, int8_weights: bool = True,
               fold_bn: bool = True) -> tuple[MSCGraph, dict]:
    """``(qdq_graph, weights)``: ``graph`` with QDQ joints for the plan's activations and the
    plan's weights quantized (QuantizedWeight records; fake-quantized float32 arrays with
    ``int8_weights=False``). ``plan`` is a dict or a JSON path (``load_plan``). ``fold_bn``
    folds the batch norms into their convs first, as ``calibrate`` did (keep them equal).

    >>> qgraph, qweights = apply_plan(graph, weights, "plan.json")   # doctest: +SKIP
    """
    plan = load_plan(plan)
    if fold_bn:
        graph, weights, _ = fold_batch_norm(graph, weights)
    _check_plan(graph, plan)
    namer = UniqueNamer(graph.node_names)
    arrays: dict[str, np.ndarray] = {}
    made: dict[str, MSCJoint] = {}
    swap: dict[tuple[str, str], MSCJoint] = {}  # (consumer, tensor) -> its dequantize joint
    nodes: list[MSCJoint] = []
    for node in graph.get_nodes():
        pairs = [(swap.get((node.name, p.output_at(i).name), made.get(p.name, p)),
                  0 if (node.name, p.output_at(i).name) in swap else i)
                 for p, i in node.input_pairs()]
        clone = node.clone(inputs=pairs, index=len(nodes))
        made[clone.name] = clone
        nodes.append(clone)
        for out_idx, tensor in enumerate(clone.outputs):
            entry = plan.get(tensor.name)
            if entry is None or tensor.name in graph.weight_holders:
                continue
            joints = _qdq_joints(len(nodes), clone, out_idx, entry, namer, arrays)
            nodes.extend(joints)
            readers = entry.get("consumers") or [c.name for c in node.children]
            swap.update({(reader, tensor.name): joints[-1] for reader in readers})
    qgraph = MSCGraph(graph.name, nodes, list(graph.input_names), list(graph.output_names),
                      list(fresh_prims(graph)), graph.output_kinds)
    return qgraph, {**_weights(graph, weights, plan, int8_weights), **arrays}
