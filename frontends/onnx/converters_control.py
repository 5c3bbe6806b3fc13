"""Control flow ONNX ops whose structure is known at conversion time: If on a constant
condition (the taken branch is inlined) and Scan over a static sequence (unrolled)."""

from __future__ import annotations

from msc import relax
from msc.tir import expr as tir

from .common import call
from .context import Context, OnnxNode


def convert_if(g: Context, node: OnnxNode):
    """If on a condition known at conversion time: the taken branch, inlined."""
    cond = g.value(node.inputs[0])
    if cond is None:
        raise node.unsupported("If with a condition known only at run time")
    branch = node.attrs["then_branch" if bool(cond.reshape(-1)[0]) else "else_branch"]
    outputs = g.subgraph(branch)
    if any(o is None for o in outputs):
        raise node.unsupported("the taken If branch could not be converted")
    return outputs


def convert_scan(g: Context, node: OnnxNode):
    """Scan over a static sequence length: the body inlined once per step."""
    at, body = node.attrs, node.attrs["body"]
    count = at["num_scan_inputs"]
    states, scans = list(node.inputs[:len(node.inputs) - count]), node.inputs[-count:]
    in_axes = [a % g.ndim(x) for a, x in zip(at["scan_input_axes"] or [0] * count, scans)]
    in_dirs = at["scan_input_directions"] or [0] * count
    steps = tir.as_int(g.shape(scans[0])[in_axes[0]]) if g.shape(scans[0]) else None
    if steps is None:
        raise node.unsupported("Scan needs a static sequence length")
    collected = []
    for t in range(steps):
        slices = [g.emit(call("take", x, relax.const(steps - 1 - t if d else t), a))
                  for x, a, d in zip(scans, in_axes, in_dirs)]
        outputs = g.subgraph(body, states + slices)
        if any(o is None for o in outputs):
            raise node.unsupported("the Scan body could not be converted")
        states, step_outs = outputs[:len(states)], outputs[len(states):]
        collected.append(step_outs)
    return states + _stack_scan_outputs(g, node, collected)


def _stack_scan_outputs(g: Context, node: OnnxNode, collected: list) -> list:
    count = len(collected[0])
    axes = node.attrs["scan_output_axes"] or [0] * count
    dirs = node.attrs["scan_output_directions"] or [0] * count
    outs = []
    for k in range(count):
        parts = [step[k] for step in collected]
        parts = parts[::-1] if dirs[k] else parts
        rank = g.ndim(parts[0]) + 1
        outs.append(g.emit(call("stack", parts, axes[k] % rank)))
    return outs


CONVERTERS = {"If": {1: convert_if}, "Scan": {9: convert_scan}}
