"""One ONNX node as the writer makes it, before it becomes a NodeProto.

The writer's rows append ``OnnxNode``s to its list; the passes then work on them through
one ``OnnxGraph`` (``codegen/onnx/passes/graph.py``), which keeps who makes and who reads
each value. A node is compared by identity (two Relu nodes on the same input are two nodes),
so it can key dicts and sets.

Contract: once the nodes are in an ``OnnxGraph``, a node's ``inputs`` and ``outputs`` change
only through the graph's methods (``set_inputs``, ``replace_uses``, ``set_outputs``,
``rewrite``, ...); ``op_type``, ``domain``, ``attrs`` and ``name`` are not indexed, but the
passes change them through ``rewrite`` too, so that one call says what a rule did.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["OnnxNode"]


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
