"""ONNX node attributes as plain Python, with the schema's defaults filled in once.

Converters read ``node.attrs["pads"]`` and never look at AttributeProto or at defaults::

    attrs = node_attrs(node_proto, opset=17)     # {"group": 1, "auto_pad": "NOTSET", ...}

Every attribute the op's schema declares is present: its given value, else the schema default,
else None. Strings are ``str``, tensors numpy arrays, graphs stay GraphProto.
"""

from __future__ import annotations

from functools import cache

import onnx
from onnx import AttributeProto, defs, helper, numpy_helper

from msc.errors import MSCError, ValidationError

from .tensor_check import check_stored

__all__ = ["attr_value", "node_attrs", "schema_defaults", "schema_of"]


def attr_value(attr: AttributeProto):
    """One AttributeProto as a Python value (bytes decoded, tensors as numpy)."""
    if attr.type == AttributeProto.TENSOR:
        return _tensor(attr.t)
    if attr.type == AttributeProto.TENSORS:
        return [_tensor(t) for t in attr.tensors]
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8", errors="replace") for v in value]
    return value


def _tensor(tensor: onnx.TensorProto):
    """A tensor attribute's value; its element type and dims are checked against the stored
    data first (an unknown type was a KeyError from onnx, found by fuzzing)."""
    check_stored(tensor)
    return numpy_helper.to_array(tensor)


@cache
def schema_of(op_type: str, opset: int, domain: str = ""):
    """The op's schema in effect at ``opset``, or None for unknown ops."""
    try:
        return defs.get_schema(op_type, opset, domain)
    except defs.SchemaError:
        return None


@cache
def _defaults(op_type: str, opset: int, domain: str) -> tuple:
    schema = schema_of(op_type, opset, domain)
    if schema is None:
        return ()
    out = []
    for name, attr in schema.attributes.items():
        given = attr.default_value
        has_default = given is not None and given.type != AttributeProto.UNDEFINED
        out.append((name, attr_value(given) if has_default else None))
    return tuple(out)


def schema_defaults(op_type: str, opset: int, domain: str = "") -> dict:
    """Every attribute of the op's schema at ``opset``: its default, or None."""
    return {k: list(v) if isinstance(v, list) else v
            for k, v in _defaults(op_type, opset, domain)}


def node_attrs(node: onnx.NodeProto, opset: int, name: str | None = None) -> dict:
    """The node's attributes merged over its schema's defaults.

    An attribute whose type differs from the schema's (``perm="0,1"``) is refused here, so
    converters can trust the kinds of what they read."""
    attrs = {k: list(v) if isinstance(v, list) else v
             for k, v in _defaults(node.op_type, opset, node.domain or "")}
    declared = _declared_types(node.op_type, opset, node.domain or "")
    for attr in node.attribute:
        want = declared.get(attr.name)
        if want is not None and attr.type != want:
            raise ValidationError(
                f"attribute {attr.name!r} is {_type_name(attr.type)}, the schema declares "
                f"{_type_name(want)}", node=name or node.name, op=node.op_type,
                hint="fix or re-export the model")
        attrs[attr.name] = _checked_value(attr, node, name)
    return attrs


def _checked_value(attr: AttributeProto, node: onnx.NodeProto, name: str | None):
    try:
        return attr_value(attr)
    except (TypeError, ValueError, KeyError, MSCError) as err:  # e.g. an unknown dtype
        why = err.message if isinstance(err, MSCError) else err
        raise ValidationError(f"attribute {attr.name!r} cannot be read ({why})",
                              node=name or node.name, op=node.op_type,
                              hint="fix or re-export the model") from None


def _type_name(kind: int) -> str:
    return AttributeProto.AttributeType.Name(kind) if kind in \
        AttributeProto.AttributeType.values() else str(kind)


@cache
def _declared_types(op_type: str, opset: int, domain: str) -> dict:
    schema = schema_of(op_type, opset, domain)
    if schema is None:
        return {}
    return {name: int(attr.type) for name, attr in schema.attributes.items()}
