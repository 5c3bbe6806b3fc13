"""A joint read through its op record, as both codegens write it: typed attrs, each op
argument bound to an input, weight or attr, and every joint of a graph written or every
failure reported at once::

    ctx = JointContext(graph, node)         # node.optype == "nn.conv2d"
    ctx.attr("strides")                     # [1, 1]  (the op table says "ints")
    ctx.bind_args()                         # [("input", 0), ("weight", "weight")]
"""

from __future__ import annotations

import numpy as np

from msc.errors import MSCError, UnsupportedOpError, ValidationError
from msc.graph import MSCGraph, MSCJoint, MSCTensor
from msc.relax.op.registry import OPS, REQUIRED, OpDef

from .attrs import decode
from .naming import comment

__all__ = ["JointContext", "find_weight", "joint_comment", "shape_dims", "unsupported",
           "write_nodes"]

# Weight roles named differently from the op argument they fill (conventions 4.3).
ROLE_OF_ARG = {"moving_mean": "mean", "moving_var": "var"}


class JointContext:
    """A joint read through its op record: typed attrs and the source of each argument."""

    def __init__(self, graph: MSCGraph, node: MSCJoint, op_def: OpDef | None = None):
        self.graph, self.node = graph, node
        self.op_def = op_def if op_def is not None else OPS.get(node.optype)

    @property
    def name(self) -> str:
        return self.node.name

    def raw(self, key: str, kind: str, default=None):
        """A node attr decoded as ``kind`` (for attrs the op record does not declare)."""
        text = self.node.attrs.get(key, "")
        try:
            return default if text == "" else decode(text, kind, default)
        except ValidationError as err:
            raise ValidationError(err.message, node=self.name, key=key) from None

    def attr(self, name: str):
        """An attr of the op record: the node's value, else the record's default."""
        attr_def = next((a for a in self.op_def.attrs if a.name == name), None)
        if attr_def is None:
            raise ValidationError(f"op {self.op_def.name} has no attr {name!r}", node=self.name)
        default = None if attr_def.default is REQUIRED else attr_def.default
        if name not in self.node.attrs:
            return list(default) if isinstance(default, tuple) else default
        return self.raw(name, attr_def.type, default)

    def attrs(self, only_changed: bool = False) -> dict:
        """Every attr of the op record (decoded); ``only_changed`` keeps those the node sets
        to a value other than the default."""
        values = {}
        for a in self.op_def.attrs:
            value = self.attr(a.name)
            default = list(a.default) if isinstance(a.default, tuple) else a.default
            if only_changed and (a.name not in self.node.attrs or value == default):
                continue
            values[a.name] = value
        return values

    def weight_role(self, arg_name: str) -> str | None:
        role = ROLE_OF_ARG.get(arg_name, arg_name)
        return role if role in self.node.weights else None

    def bind_args(self) -> list:
        """Where each op argument comes from, in order: ``("input", i)``, ``("inputs", [i..])``
        for a tuple argument, ``("weight", role)``, ``("value", v)`` (an attr), ``("output",
        None)`` (the output shape) or None (left to its default)."""
        args, pos, n_inputs = [], 0, len(self.node.inputs)
        for i, arg in enumerate(self.op_def.args):
            source = self._bind_one(i, arg, pos, n_inputs)
            if source is not None and source[0] == "input":
                pos += 1
            elif source is not None and source[0] == "inputs":
                pos += len(source[1])
            args.append(source)
        return args

    def _bind_one(self, i: int, arg, pos: int, n_inputs: int):
        if self.weight_role(arg.name):
            return ("weight", self.weight_role(arg.name))
        if arg.kind == "shape" and self.op_def.shape_is_output:  # the joint's output shape
            return ("output", None)
        if arg.kind != "tensor" and self.node.attrs.get(arg.name, "") != "":
            return ("value", self.raw(arg.name, arg.kind))
        if arg.kind == "any" and arg.default is REQUIRED and arg.name in self.node.attrs:
            return ("value", [])  # an empty tuple encodes as "" (e.g. strided_slice's axes)
        if arg.kind == "tensors":
            later = sum(1 for a in self.op_def.args[i + 1:] if a.kind == "tensor"
                        and a.default is REQUIRED and not self.weight_role(a.name))
            return ("inputs", list(range(pos, max(n_inputs - later, pos))))
        if pos < n_inputs and arg.kind != "shape":
            return ("input", pos)
        return None


def joint_comment(node: MSCJoint) -> str:
    """The comment above a joint's code: ``<name>(<optype>): <inputs> -> <outputs>``."""
    inputs = ",".join(t.name for t in node.get_inputs())
    outputs = ",".join(str(t) for t in node.outputs)
    return comment(f"{node.name}({node.optype}): {inputs} -> {outputs}")


def write_nodes(graph, write_node, names: dict, what: str, hint: str) -> None:
    """``write_node`` every node of ``graph``; report every node it cannot write at once."""
    problems = []
    for node in graph.get_nodes():
        try:
            write_node(node)
        except (MSCError, KeyError, ValueError, IndexError) as err:
            problems.append({"op": node.optype, "node": node.name, "why": str(err)})
            names.setdefault(node.name, node.name)  # so later nodes are checked too
    if problems:
        raise unsupported(what, problems, hint)


def unsupported(what: str, problems: list[dict], hint: str) -> UnsupportedOpError:
    """One error listing every node a codegen cannot write (op, node, why)."""
    counts: dict[str, int] = {}
    for p in problems:
        counts[p["op"]] = counts.get(p["op"], 0) + 1
    items = [{**p, "count": counts[p["op"]]} for p in problems]
    return UnsupportedOpError(f"{what} cannot write {len(problems)} node(s)", items=items,
                              hint=hint)


def find_weight(weights: dict, tensor: MSCTensor) -> np.ndarray:
    for key in (tensor.name, tensor.alias):
        if key and key in weights:
            value = weights[key]
            if hasattr(value, "detach"):
                value = value.detach().cpu().numpy()
            return np.asarray(value)
    raise ValidationError("no data for weight", tensor=tensor.name,
                          hint="weights are keyed by weight name (or alias)")


def shape_dims(node, prims=None) -> list:
    """The dims of a ``shape`` node (a shape value: ``x.shape``): ints, and for symbolic dims
    the source of their prims (``inp_0.shape[0]``) rendered by ``prims`` (a PrimRenderer)."""
    text = node.attrs.get("shape", "")
    names = node.attrs.get("dim_prims", "")
    if names and prims is not None:
        return [int(p) if p.lstrip("-").isdigit() else prims.prim(p) for p in names.split(",")]
    try:
        dims = [int(d) for d in text.split(",")] if text else []
    except ValueError:
        dims = [-1]
    if any(d < 0 for d in dims):
        raise UnsupportedOpError(f"shape {text!r} has symbolic dims and no prims to read them "
                                 "from", node=node.name, hint="rebuild the graph with msc's "
                                 "from_torch / from_relax, which record them")
    return dims
