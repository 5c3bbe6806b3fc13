"""Model-local ONNX functions (``ModelProto.functions``): a call expands into the function's
body, the call's attributes put in place of the body's references to them. The body's nodes
take the call's module scope plus the call itself (``/layer1/layer1.0/B`` -> ``layer1 /
layer1.0 / B``), as torch's ``export_modules_as_functions`` nests a module's nodes::

    table = Functions(model.functions)
    func = table.of(node)                  # None unless the node calls a local function
    with table.entered(func, node):        # refuses recursion
        body = table.body(node, func)      # NodeProtos, attributes resolved
"""

from __future__ import annotations

from contextlib import contextmanager

import onnx

from msc.errors import ValidationError

__all__ = ["Functions", "call_leaf"]


class Functions:
    """The model's local functions by ``(domain, name)``."""

    def __init__(self, functions):
        self.protos = {(f.domain, f.name): f for f in functions}
        self.active: list = []  # keys of the calls being expanded, outermost first

    def of(self, node: onnx.NodeProto) -> onnx.FunctionProto | None:
        return self.protos.get((node.domain, node.op_type)) if self.protos else None

    @contextmanager
    def entered(self, func: onnx.FunctionProto, node: onnx.NodeProto):
        key = (func.domain, func.name)
        if key in self.active:
            raise ValidationError(f"function {func.name!r} calls itself (through "
                                  f"{' -> '.join(k[1] for k in self.active)})",
                                  node=node.name or node.op_type, op=node.op_type,
                                  hint="ONNX functions cannot be recursive; fix the model")
        self.active.append(key)
        try:
            yield
        finally:
            self.active.pop()

    def body(self, call: onnx.NodeProto, func: onnx.FunctionProto) -> list:
        """The function's nodes with the call's attributes (else the function's defaults)
        where they refer to one; a reference to an attribute given nowhere is dropped, so
        the op's own default applies."""
        given = {a.name: a for a in func.attribute_proto}
        given.update((a.name, a) for a in call.attribute)
        return [_resolved(node, given) for node in func.node]


def _resolved(node: onnx.NodeProto, given: dict) -> onnx.NodeProto:
    if not any(a.ref_attr_name for a in node.attribute):
        return node
    out = onnx.NodeProto()
    out.CopyFrom(node)
    del out.attribute[:]
    for attr in node.attribute:
        source = given.get(attr.ref_attr_name) if attr.ref_attr_name else attr
        if source is None:
            continue
        value = onnx.AttributeProto()
        value.CopyFrom(source)
        value.name = attr.name
        out.attribute.append(value)
    return out


def call_leaf(call: onnx.NodeProto) -> str:
    """The level a call adds to its body's scope: the last part of its name, else its op."""
    return call.name.rsplit("/", 1)[-1] or call.op_type
