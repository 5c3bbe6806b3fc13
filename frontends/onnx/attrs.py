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

__all__ = ["attr_value", "node_attrs", "schema_of"]


def attr_value(attr: AttributeProto):
    """One AttributeProto as a Python value (bytes decoded, tensors as numpy)."""
    if attr.type == AttributeProto.TENSOR:
        return numpy_helper.to_array(attr.t)
    if attr.type == AttributeProto.TENSORS:
        return [numpy_helper.to_array(t) for t in attr.tensors]
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8", errors="replace") for v in value]
    return value


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


def node_attrs(node: onnx.NodeProto, opset: int) -> dict:
    """The node's attributes merged over its schema's defaults."""
    attrs = {k: list(v) if isinstance(v, list) else v
             for k, v in _defaults(node.op_type, opset, node.domain or "")}
    attrs.update((a.name, attr_value(a)) for a in node.attribute)
    return attrs
