"""ONNX sequences and optionals at import: a sequence is a Relax ``Tuple`` of its tensors (its
length known at conversion time), an absent optional is ``ABSENT``, a present one is its value.

Graph inputs that are sequences take their element shapes from ``input_info``
(``{"seq": [[2, 3], [4]]}``, each element ``shape`` or ``(shape, dtype)``); an optional graph
input given as ``None`` in ``input_info`` is absent (no VM argument), otherwise present.
"""

from __future__ import annotations

import onnx

from msc import relax
from msc.errors import UnsupportedOpError

from .dtypes import relax_dtype

__all__ = ["ABSENT", "Absent", "container_param", "is_sequence"]


class Absent:
    """The value of an empty ONNX optional (known at import)."""

    struct_info = None

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = Absent()


def is_sequence(value) -> bool:
    return isinstance(value, relax.Tuple)


def _elem_type(type_proto: onnx.TypeProto) -> onnx.TypeProto:
    """The type under an optional (a tensor or sequence type)."""
    while type_proto.WhichOneof("value") == "optional_type":
        type_proto = type_proto.optional_type.elem_type
    return type_proto


def container_param(v: onnx.ValueInfoProto, info, has_info: bool, name: str):
    """(param var or None, env value or None) for a sequence / optional graph input; None
    (None, None) when ``v`` is a plain tensor (the caller makes its param)."""
    kind = v.type.WhichOneof("value")
    if kind == "tensor_type":
        return None, None
    if kind == "optional_type" and has_info and info is None:
        return None, ABSENT
    inner = _elem_type(v.type)
    if inner.WhichOneof("value") == "tensor_type":
        return None, None  # a present optional tensor: an ordinary tensor input
    if inner.WhichOneof("value") != "sequence_type" or \
            inner.sequence_type.elem_type.WhichOneof("value") != "tensor_type":
        raise UnsupportedOpError(f"graph input {v.name!r} is a {kind} of {inner.WhichOneof('value')}",
                                 hint="only tensors, sequences of tensors and optionals of "
                                      "them are supported")
    if not has_info or not isinstance(info, (list, tuple)):
        raise UnsupportedOpError(f"graph input {v.name!r} is a sequence whose length is not "
                                 "known", hint="give its element shapes in input_info, e.g. "
                                 f"{{{v.name!r}: [[2, 3], [4]]}}")
    dtype = relax_dtype(inner.sequence_type.elem_type.tensor_type.elem_type)
    fields = [_tensor_sinfo(item, dtype) for item in info]
    return relax.Var(name, relax.TupleStructInfo(fields)), None


def _tensor_sinfo(item, dtype: str) -> relax.TensorStructInfo:
    if len(item) == 2 and isinstance(item[1], str) and isinstance(item[0], (list, tuple)):
        return relax.TensorStructInfo([int(d) for d in item[0]], item[1])
    return relax.TensorStructInfo([int(d) for d in item], dtype)


def unpack(bb: relax.BlockBuilder, var: relax.Var) -> relax.Tuple:
    """A tuple param as a Tuple of its emitted fields (converters index fields directly)."""
    count = len(var.struct_info.fields)
    return relax.Tuple([bb.emit(relax.TupleGetItem(var, i)) for i in range(count)])


def tensor_of_optional(v: onnx.ValueInfoProto) -> onnx.ValueInfoProto:
    """A present optional tensor input as a plain tensor input of the same name."""
    if v.type.WhichOneof("value") != "optional_type":
        return v
    out = onnx.ValueInfoProto()
    out.name = v.name
    out.type.CopyFrom(_elem_type(v.type))
    return out


def _output_kind(v: onnx.ValueInfoProto, value) -> str:
    optional = v.type.WhichOneof("value") == "optional_type"
    inner = _elem_type(v.type)
    sequence = isinstance(value, relax.Tuple) or \
        isinstance(getattr(value, "struct_info", None), relax.TupleStructInfo) or \
        inner.WhichOneof("value") == "sequence_type"
    if inner.WhichOneof("value") == "sequence_type":
        inner = inner.sequence_type.elem_type
    elem = inner.tensor_type.elem_type if inner.WhichOneof("value") == "tensor_type" else 0
    kind = ("optional_" if optional else "") + ("sequence" if sequence else "tensor")
    kind = "optional" if kind == "optional_tensor" else kind
    return f"{kind}:{relax_dtype(elem)}" if elem else kind


def output_kinds(outputs, values: list) -> list[str] | None:
    """Per graph output its kind (``tensor``, ``sequence``, ``optional``,
    ``optional_sequence``, with ``:<element dtype>``): the ``output_kinds`` function attr
    from_relax reads (msc/graph/outputs.py); None when every output is a plain tensor."""
    kinds = [_output_kind(v, value) for v, value in zip(outputs, values)]
    return kinds if any(not k.startswith("tensor") for k in kinds) else None
