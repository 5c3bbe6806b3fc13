"""The last step of the QDQ pattern onnxruntime fuses: a float bias of a Conv / Gemm whose
data and weight both come through DequantizeLinear becomes an int32 initializer read through
DequantizeLinear with scale ``x_scale * w_scale`` (zero point 0).

onnxruntime's selectors (``ConvNodeGroupSelector``, ``GemmNodeGroupSelector``) count a
DequantizeLinear per input, bias included, so a float bias would keep the whole node float.
The int32 bias differs from the float one by at most half of ``x_scale * w_scale`` per
channel, far below one step of the output's quantizer; onnxruntime's ``quantize_static``
quantizes biases the same way."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .node import OnnxNode
from .passes.graph import OnnxGraph

__all__ = ["quantize_biases"]

_BIASED = {"Conv": 2, "Gemm": 2}  # op -> position of its bias input
_INT32 = np.iinfo(np.int32)


def _dq_scale(producers: dict, consts: dict, value: str) -> np.ndarray | None:
    node = producers.get(value)
    if node is None or node.op_type != "DequantizeLinear" or len(node.inputs) < 2:
        return None
    scale = consts.get(node.inputs[1])
    return None if scale is None else np.asarray(scale, np.float32)


def _bias_dq(node: OnnxNode, producers: dict, consts: dict) -> tuple | None:
    """(bias values, their scale) when ``node``'s bias can go int32, else None."""
    pos = _BIASED.get(node.op_type)
    if pos is None or len(node.inputs) <= pos or node.attrs.get("transA"):
        return None
    bias = consts.get(node.inputs[pos])
    x_scale = _dq_scale(producers, consts, node.inputs[0])
    w_scale = _dq_scale(producers, consts, node.inputs[1])
    if bias is None or x_scale is None or w_scale is None or x_scale.size != 1 \
            or bias.ndim != 1 or bias.dtype != np.float32 or w_scale.size not in (1, bias.size):
        return None
    scale = (x_scale.reshape(()) * w_scale).astype(np.float32)
    return bias, np.where(scale > 0, scale, np.float32(1))


def quantize_biases(graph: OnnxGraph, consts: dict, name: Callable[[str], str]) -> None:
    """Each fusable Conv / Gemm bias of ``graph`` (an ``OnnxGraph``) read as DequantizeLinear
    of int32, the new node just before its reader (new initializers go to ``consts``;
    ``name`` makes unique value names)."""
    for node in graph.nodes:
        found = _bias_dq(node, graph.made, consts)
        if found is not None:
            bias, scale = found
            q = np.clip(np.round(bias.astype(np.float64) / scale), _INT32.min, _INT32.max)
            stem = node.inputs[_BIASED[node.op_type]]
            q_name, s_name, z_name = name(f"{stem}_int32"), name(f"{stem}_scale"), \
                name(f"{stem}_zero_point")
            consts[q_name] = q.astype(np.int32)
            consts[s_name] = scale if scale.size > 1 else scale.reshape(())
            consts[z_name] = np.zeros(consts[s_name].shape, np.int32)
            dq = name(f"{stem}_dq")
            attrs = {"axis": 0} if scale.size > 1 else {}
            graph.insert([OnnxNode("DequantizeLinear", [q_name, s_name, z_name], [dq],
                                   name=name(f"{stem}_DequantizeLinear"), attrs=attrs)],
                         before=node)
            graph.set_input(node, _BIASED[node.op_type], dq)
