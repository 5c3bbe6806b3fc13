"""Names in a parsed ModelProto must be text.

ONNX's schema is proto2, where protobuf accepts a ``string`` field holding bytes that are not
UTF-8 and hands them back as ``bytes`` (found by fuzzing: a flipped byte in an input's name
gave ``TypeError: cannot use a string pattern on a bytes-like object`` deep in the importer).
One walk after parsing refuses such a model, naming the file and the field::

    check_names(model, "model.onnx")   # SerializationError: model.onnx, tensor b'\\xffx': ...
"""

from __future__ import annotations

import onnx

from msc.errors import SerializationError

__all__ = ["check_names"]

_HINT = "the file is corrupted (a name is not UTF-8 text); re-export or download it again"


def check_names(model: onnx.ModelProto, source: str) -> None:
    """Raise SerializationError when a name the importer reads is bytes instead of text."""
    for where, value in _names(model):
        if not isinstance(value, str):
            raise SerializationError(f"{where} is not UTF-8 text ({value[:40]!r})", file=source,
                                     hint=_HINT)


def _names(model: onnx.ModelProto):
    for opset in model.opset_import:
        yield "an opset domain", opset.domain
    yield from _graph_names(model.graph)
    for func in model.functions:
        yield "a function name", func.name
        yield "a function domain", func.domain


def _graph_names(graph: onnx.GraphProto):
    yield "the graph name", graph.name
    for value in (*graph.input, *graph.output, *graph.value_info):
        yield "a value name", value.name
        yield from _dim_params(value)
    for tensor in (*graph.initializer, *graph.sparse_initializer):
        yield "an initializer name", getattr(tensor, "name", "")
        for entry in getattr(tensor, "external_data", ()):
            yield "an external data entry", entry.key
            yield "an external data entry", entry.value
    for node in graph.node:
        if node.attribute or not _all_text(node):  # one C-level test per plain node
            yield from _node_names(node)


def _all_text(node: onnx.NodeProto) -> bool:
    try:
        "".join((node.name, node.op_type, node.domain, *node.input, *node.output))
    except TypeError:  # a bytes name
        return False
    return True


def _dim_params(value: onnx.ValueInfoProto):
    tensor_type = value.type.tensor_type
    for dim in tensor_type.shape.dim:
        yield "a dim name", dim.dim_param


def _node_names(node: onnx.NodeProto):
    if not _all_text(node):  # rare: only then say which one
        yield "a node name", node.name
        yield "an op type", node.op_type
        yield "an op domain", node.domain
        for name in (*node.input, *node.output):
            yield "a node input or output name", name
    for attr in node.attribute:
        yield "an attribute name", attr.name
        for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
            yield from _graph_names(sub)
