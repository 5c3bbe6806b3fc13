"""Control flow ONNX ops whose structure is known at conversion time: If on a constant
condition (the taken branch is inlined) or on one known at run time (both branches and a
``where``), and Scan over a static sequence (unrolled; Scan-8 per batch item)."""

from __future__ import annotations

import numpy as np

from msc import relax
from msc.tir import expr as tir

from .common import call
from .context import Context, OnnxNode
from .loop_closed_form import closed_form_loop
from .unroll_size import MAX_UNROLL


def convert_if(g: Context, node: OnnxNode):
    """If on a condition known at conversion time: the taken branch, inlined. Known only at
    run time: both branches (ONNX subgraphs are pure) and a ``where`` per output, when their
    outputs agree in shape and dtype (an ``R.If`` would need the importer to leave its
    dataflow block)."""
    cond = g.value(node.inputs[0])
    if cond is None:
        return _if_at_runtime(g, node)
    branch = node.attrs["then_branch" if bool(cond.reshape(-1)[0]) else "else_branch"]
    outputs = g.subgraph(branch)
    if any(o is None for o in outputs):
        raise node.unsupported("the taken If branch could not be converted")
    return outputs


def _if_at_runtime(g: Context, node: OnnxNode):
    then, other = (g.subgraph(node.attrs[k]) for k in ("then_branch", "else_branch"))
    if any(o is None for o in then + other):
        raise node.unsupported("an If branch could not be converted")
    if any(not _same_structure(g, a, b) for a, b in zip(then, other)):
        raise node.unsupported("If with a condition known only at run time needs branches "
                               "whose outputs agree in shape and dtype (sequences: in length "
                               "too; optionals: both present)")
    cond = g.emit(call("reshape", node.inputs[0], []))
    return [_select(g, cond, a, b) for a, b in zip(then, other)]


def _select(g: Context, cond, a, b):
    """``where`` on tensors, field by field on sequences (Relax tuples)."""
    if isinstance(a, relax.Tuple):
        return relax.Tuple([_select(g, cond, x, y) for x, y in zip(a.fields, b.fields)])
    return g.emit(call("where", cond, a, b))


def _same_structure(g: Context, a, b) -> bool:
    if isinstance(a, relax.Tuple) or isinstance(b, relax.Tuple):
        return isinstance(a, relax.Tuple) and isinstance(b, relax.Tuple) and \
            len(a) == len(b) and all(_same_structure(g, x, y) for x, y in zip(a, b))
    if not isinstance(a, relax.Expr) or not isinstance(b, relax.Expr):
        return False  # an absent optional in one branch
    return _same_sinfo(g, a, b)


def _same_sinfo(g: Context, a, b) -> bool:
    sa, sb = g.sinfo(a), g.sinfo(b)
    return sa.dtype == sb.dtype and sa.values is not None and sb.values is not None and \
        len(sa.values) == len(sb.values) and all(
            tir.as_int(tir.sub(x, y)) == 0 for x, y in zip(sa.values, sb.values))


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
    g.reserve_unroll(node, steps, body)
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


def convert_scan_v8(g: Context, node: OnnxNode):
    """Scan-8: every input has a leading batch axis (scan inputs then their sequence axis);
    each batch item is a Scan-9 over axis 0, the results stacked back."""
    lens, inputs = node.inputs[0], node.inputs[1:]
    if lens is not None:
        raise node.unsupported("Scan-8 with sequence_lens is not supported")
    batch = tir.as_int(g.shape(inputs[0])[0]) if g.shape(inputs[0]) else None
    if batch is None:
        raise node.unsupported("Scan-8 needs a static batch size")
    g.reserve_unroll(node, batch, node.attrs["body"])  # each item: a Scan (checked again)
    count = node.attrs["num_scan_inputs"]
    per_item = []
    for b in range(batch):
        items = [g.emit(call("take", x, relax.const(b), 0)) for x in inputs]
        sub = OnnxNode(node.op_type, node.name, node.domain, 9, items,
                       {"body": node.attrs["body"], "num_scan_inputs": count,
                        "scan_input_axes": None, "scan_output_axes": None,
                        "scan_input_directions": node.attrs.get("directions"),
                        "scan_output_directions": None}, node.num_outputs)
        per_item.append(convert_scan(g, sub))
    return [g.emit(call("stack", list(outs), 0)) for outs in zip(*per_item)]


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


def convert_loop(g: Context, node: OnnxNode):
    """Loop with a trip count and a stop condition known at conversion time: unrolled. A trip
    count or a condition known only at run time is unsupported (it needs a VM loop)."""
    trip, cond = node.inputs[0], node.inputs[1]
    count = None if trip is None else g.ints(trip)
    if trip is not None and count is None:
        closed = closed_form_loop(g, node)
        if closed is not None:
            return closed
        raise node.unsupported("Loop with a trip count known only at run time (loops are "
                               "unrolled at a constant trip count, or written in closed form "
                               "when the body only adds loop-invariant steps)")
    if count is None and cond is None:
        raise node.unsupported("Loop without a trip count or condition never ends")
    states, keep = list(node.inputs[2:]), _known_cond(g, node, cond)
    steps = MAX_UNROLL + 1 if count is None else count[0]
    if count is not None:  # a stop condition may end it sooner: checked per joint then
        g.reserve_unroll(node, min(steps, MAX_UNROLL), node.attrs["body"])
    collected, step = [], 0
    while keep and step < steps:
        if step >= MAX_UNROLL:
            raise node.unsupported(f"Loop runs over {MAX_UNROLL} steps (too many to unroll)")
        args = [relax.const(np.int64(step)), relax.const(np.bool_(True))] + states
        outputs = g.subgraph(node.attrs["body"], args)
        if any(o is None for o in outputs):
            raise node.unsupported("the Loop body could not be converted")
        keep = _known_cond(g, node, outputs[0])
        states, collected = outputs[1:1 + len(states)], collected + [outputs[1 + len(states):]]
        step += 1
    return states + _stack_loop_outputs(g, node, collected, len(states))


def _known_cond(g: Context, node: OnnxNode, cond) -> bool:
    if cond is None:
        return True
    value = g.value(cond)
    if value is None:
        raise node.unsupported("Loop whose condition is known only at run time")
    return bool(np.ravel(value)[0])


def _stack_loop_outputs(g: Context, node: OnnxNode, collected: list, carried: int) -> list:
    count = node.num_outputs - carried
    if count and not collected:
        raise node.unsupported("Loop with scan outputs runs no step (empty outputs)")
    return [g.emit(call("stack", [step[k] for step in collected], 0)) for k in range(count)]


CONVERTERS = {"If": {1: convert_if}, "Loop": {1: convert_loop},
              "Scan": {8: convert_scan_v8, 9: convert_scan}}
