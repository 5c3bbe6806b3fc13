"""The graph outputs of a written ONNX model: one per entry of ``graph.output_kinds``.

A tensor output is its value (through an Identity where the value is an input, an
initializer or an earlier output: ONNX outputs are distinct node outputs). A sequence output
gathers its tensors with SequenceConstruct (SequenceEmpty when it has none), an optional one
wraps its value, or its absence, in Optional, so onnxruntime returns the same list / None the
original model did.
"""

from __future__ import annotations

import re

from msc.graph import MSCTensor

from .context import onnx_dtype
from .node import OnnxNode

__all__ = ["tensor_value_info", "write_outputs"]


def _dims(tensor: MSCTensor) -> list:
    """ONNX dims of a tensor: ints, ``dim_param`` names for symbolic prims, None unknown."""
    prims, dims = tensor.prims, []
    for i, size in enumerate(tensor.shape):
        if prims and not prims[i].lstrip("-").isdigit():
            prim = prims[i]
            dims.append(prim if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", prim) else None)
        else:
            dims.append(int(prims[i]) if prims else (size if size >= 0 else None))
    return dims


def tensor_value_info(name: str, tensor: MSCTensor):
    from onnx import helper

    return helper.make_tensor_value_info(name, onnx_dtype(tensor.dtype), _dims(tensor))


def _element_type(tensors: list[MSCTensor], dtype: str):
    """The tensor type of a sequence's elements: the dims they agree on (None elsewhere),
    no shape when their ranks differ."""
    from onnx import helper

    elem = onnx_dtype(tensors[0].dtype if tensors else dtype or "float32")
    shapes = [_dims(t) for t in tensors]
    if not shapes or len({len(s) for s in shapes}) != 1:
        return helper.make_tensor_type_proto(elem, None)
    merged = [dims[0] if len(set(dims)) == 1 else None for dims in zip(*shapes)]
    return helper.make_tensor_type_proto(elem, merged)


def _node(writer, op_type: str, inputs: list[str], output: str, **attrs) -> None:
    writer.nodes.append(OnnxNode(op_type, inputs, [output], attrs=attrs,
                                 name=writer.node_namer(f"{output}_{op_type}")))


def _tensor_output(writer, tensor: MSCTensor, taken: set) -> str:
    value = _value_of(writer, tensor)
    if value in taken or value in writer.inits:
        want = writer.name(tensor.alias or tensor.name.rpartition(":")[0])
        _node(writer, "Identity", [value], want)
        value = want
    taken.add(value)
    return value


def _value_of(writer, tensor: MSCTensor) -> str:
    host, _, idx = tensor.name.rpartition(":")
    return writer.value(writer.graph.find_node(host), int(idx))


def _container(writer, kind, tensors: list[MSCTensor]) -> tuple[str, object]:
    """(value, TypeProto) of a sequence / optional output."""
    from onnx import helper

    hint = tensors[0].name.rpartition(":")[0] if tensors else kind.kind
    elem = _element_type(tensors, kind.dtype)
    values = [_value_of(writer, t) for t in tensors]
    if kind.kind == "optional":
        if not values:
            out = writer.name(hint)
            _node(writer, "Optional", [], out, type=elem)
            return out, helper.make_optional_type_proto(elem)
        out = writer.name(f"{hint}_optional")
        _node(writer, "Optional", values, out)
        return out, helper.make_optional_type_proto(elem)
    seq_type = helper.make_sequence_type_proto(elem)
    seq = writer.name(hint if kind.kind == "sequence" else f"{hint}_sequence")
    if values:
        _node(writer, "SequenceConstruct", values, seq)
    else:
        _node(writer, "SequenceEmpty", [], seq, dtype=elem.tensor_type.elem_type)
    if kind.kind == "sequence":
        return seq, seq_type
    out = writer.name(f"{hint}_optional")
    _node(writer, "Optional", [seq], out)
    return out, helper.make_optional_type_proto(seq_type)


def write_outputs(writer) -> list[tuple[str, object]]:
    """(value, ValueInfoProto) per model-level output, adding the nodes they need."""
    from onnx import helper

    outs, taken = [], set(writer.values_of_inputs())
    for kind, tensors in writer.graph.output_groups():
        if kind.kind == "tensor":
            value = _tensor_output(writer, tensors[0], taken)
            outs.append((value, tensor_value_info(value, tensors[0])))
            continue
        value, type_proto = _container(writer, kind, tensors)
        taken.add(value)
        outs.append((value, helper.make_value_info(value, type_proto)))
    return outs
