"""One ONNX node as the writer makes it, before it becomes a NodeProto.

The writer's rows append ``OnnxNode``s to its list; the passes then work on them through
one ``OnnxGraph`` (``codegen/onnx/passes/graph.py``), which keeps who makes and who reads
each value. A node is compared by identity (two Relu nodes on the same input are two nodes),
so it can key dicts and sets.

Contract: once the nodes are in an ``OnnxGraph``, a node's ``inputs`` and ``outputs`` change
only through the graph's methods (``set_inputs``, ``replace_uses``, ``set_outputs``,
``rewrite``, ...). The graph holds them as ``Values``, lists that refuse to be written to, so a
rule that writes ``node.inputs[0] = v`` fails at once instead of leaving the reader lists
wrong. ``op_type``, ``domain``, ``attrs`` and ``name`` are not indexed, but the passes change
them through ``rewrite`` too, so that one call says what a rule did.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from msc.errors import ValidationError

__all__ = ["OnnxNode", "Values"]


class Values(list):
    """A node's inputs or outputs while an ``OnnxGraph`` owns the node: read it as a list;
    writing to it raises, because only the graph's methods keep its index right."""

    __slots__ = ()

    def _refuse(self, *args, **kwargs):
        raise ValidationError("a node's inputs and outputs change only through its OnnxGraph",
                              hint="use set_inputs / set_input / replace_uses / set_outputs / "
                              "rewrite, which keep the producer and reader lists in step")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse


@dataclass(eq=False, slots=True)
class OnnxNode:
    """``op_type`` of ``domain`` ("" for the default one) reading ``inputs`` ("" for an
    optional input left out) and making ``outputs``; ``attrs`` as ``helper.make_node``
    takes them."""

    op_type: str
    inputs: list[str]
    outputs: list[str]
    name: str = ""
    domain: str = ""
    attrs: dict = field(default_factory=dict)

    def proto(self):
        """The NodeProto (attrs through ``onnx.helper.make_node``)."""
        from onnx import helper

        return helper.make_node(self.op_type, self.inputs, self.outputs, name=self.name,
                                domain=self.domain or None, **self.attrs)
