"""ONNX sequence and optional ops over values whose structure is known at conversion time:
a sequence is a Relax ``Tuple`` (containers.py), positions must be constants, an optional is
present or ``ABSENT`` at import. SequenceMap inlines its body once per element."""

from __future__ import annotations

import numpy as np

from msc import relax
from msc.tir import expr as tir

from .common import call, norm_axis
from .containers import ABSENT, Absent, is_sequence
from .context import Context, OnnxNode


def _seq(node: OnnxNode, value, what: str = "input sequence") -> relax.Tuple:
    if not is_sequence(value):
        raise node.unsupported(f"the {what} is not a sequence known at conversion time")
    return value


def _position(g: Context, node: OnnxNode, pos, length: int, default: int) -> int:
    if pos is None:
        return default
    ints = g.ints(pos)
    if ints is None:
        raise node.unsupported("the sequence position must be a constant")
    index = ints[0] + length if ints[0] < 0 else ints[0]
    if not 0 <= index <= length:
        raise node.unsupported(f"position {ints[0]} is out of range for a sequence of "
                               f"{length}")
    return index


def convert_sequence_construct(g: Context, node: OnnxNode):
    return relax.Tuple(list(node.inputs))


def convert_sequence_empty(g: Context, node: OnnxNode):
    return relax.Tuple([])


def convert_sequence_at(g: Context, node: OnnxNode):
    seq = _seq(node, node.inputs[0])
    index = _position(g, node, node.inputs[1], len(seq), 0)
    if index == len(seq):
        raise node.unsupported(f"position {index} is out of range")
    return seq.fields[index]


def convert_sequence_insert(g: Context, node: OnnxNode):
    seq = _seq(node, node.inputs[0])
    fields = list(seq.fields)
    fields.insert(_position(g, node, node.inputs[2], len(fields), len(fields)), node.inputs[1])
    return relax.Tuple(fields)


def convert_sequence_erase(g: Context, node: OnnxNode):
    seq = _seq(node, node.inputs[0])
    fields = list(seq.fields)
    index = _position(g, node, node.inputs[1], len(fields), len(fields) - 1)
    if index >= len(fields):
        raise node.unsupported("cannot erase from this position")
    del fields[index]
    return relax.Tuple(fields)


def convert_sequence_length(g: Context, node: OnnxNode):
    return relax.const(np.int64(len(_seq(node, node.inputs[0]))))


def convert_concat_from_sequence(g: Context, node: OnnxNode):
    seq = _seq(node, node.inputs[0])
    if not len(seq):
        raise node.unsupported("cannot concatenate an empty sequence")
    ndim = g.ndim(seq.fields[0]) + (1 if node.attrs["new_axis"] else 0)
    axis = norm_axis(node.attrs["axis"], ndim)
    op = "stack" if node.attrs["new_axis"] else "concat"
    return g.emit(call(op, list(seq.fields), axis))


def convert_split_to_sequence(g: Context, node: OnnxNode):
    x, split = node.inputs[0], node.inputs[1]
    axis = norm_axis(node.attrs["axis"], g.ndim(x))
    dim = tir.as_int(g.shape(x)[axis]) if g.shape(x) is not None else None
    if dim is None:
        raise node.unsupported("SplitToSequence needs a static size on the split axis")
    sizes = _split_sizes(g, node, split, dim)
    parts, start = [], 0
    for size in sizes:  # sizes may be symbolic (read at run time)
        parts.append(g.emit(call("strided_slice", x, [axis], [start], [start + size])))
        start = start + size
    if split is None and not node.attrs["keepdims"]:
        parts = [g.emit(call("squeeze", p, [axis])) for p in parts]
    return relax.Tuple(parts)


def _split_sizes(g: Context, node: OnnxNode, split, dim: int) -> list:
    if split is None:
        return [1] * dim
    ints = g.ints(split)
    if ints is None and g.ndim(split) == 1:  # sizes read at run time, their count static
        ints = g.runtime_ints(split, "split")
    if ints is None:
        raise node.unsupported("SplitToSequence with a scalar split known only at run time "
                               "(the number of parts must be known at conversion time)")
    if g.ndim(split) == 0:  # chunks of this size, the last one shorter
        return [min(ints[0], dim - s) for s in range(0, dim, ints[0])]
    return ints


def convert_sequence_map(g: Context, node: OnnxNode):
    """The body once per element of the (equally long) input sequences."""
    lengths = {len(x) for x in node.inputs if is_sequence(x)}
    if len(lengths) != 1:
        raise node.unsupported("SequenceMap needs input sequences of one known length")
    collected, length = [], lengths.pop()
    g.reserve_unroll(node, length, node.attrs["body"])
    for i in range(length):
        args = [x.fields[i] if is_sequence(x) else x for x in node.inputs]
        outputs = g.subgraph(node.attrs["body"], args)
        if any(o is None for o in outputs):
            raise node.unsupported("the SequenceMap body could not be converted")
        collected.append(outputs)
    return [relax.Tuple([step[k] for step in collected]) for k in range(node.num_outputs)]


def convert_optional(g: Context, node: OnnxNode):
    return ABSENT if node.inputs[0] is None else node.inputs[0]


def convert_optional_has_element(g: Context, node: OnnxNode):
    value = node.inputs[0] if node.inputs else None
    return relax.const(np.bool_(value is not None and not isinstance(value, Absent)))


def convert_optional_get_element(g: Context, node: OnnxNode):
    if node.inputs[0] is None or isinstance(node.inputs[0], Absent):
        raise node.unsupported("OptionalGetElement of an empty optional")
    return node.inputs[0]


CONVERTERS = {
    "SequenceConstruct": {11: convert_sequence_construct},
    "SequenceEmpty": {11: convert_sequence_empty}, "SequenceAt": {11: convert_sequence_at},
    "SequenceInsert": {11: convert_sequence_insert},
    "SequenceErase": {11: convert_sequence_erase},
    "SequenceLength": {11: convert_sequence_length},
    "ConcatFromSequence": {11: convert_concat_from_sequence},
    "SplitToSequence": {11: convert_split_to_sequence},
    "SequenceMap": {17: convert_sequence_map}, "Optional": {15: convert_optional},
    "OptionalHasElement": {15: convert_optional_has_element},
    "OptionalGetElement": {15: convert_optional_get_element},
}
