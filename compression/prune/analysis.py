"""Channel-dependency analysis: which channels of which weights must be pruned together.

One forward walk over the MSCGraph gives every tensor and weight axis a dim expression
(``dims.py``) through the channel rule of its op (``rules.py``, on the op table). Graph inputs
and outputs are fixed (the model keeps its interface). What stays prunable afterwards are the
*groups*: one per channel space, with its *members* (every weight axis that holds channels of
that space, with the position -> channel map) and its *owners* (the nodes whose output
channels it is)::

    analysis = Analysis(graph)
    for group in analysis.groups:
        print(group.name, group.size, [m.weight for m in group.members])
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from msc.errors import ValidationError
from msc.progress import progress
from msc.relax.op.facts import load_facts

from .context import RuleContext
from .dims import Dims, Fixed, Leaf
from .rules import rule_of

__all__ = ["IMPORTANCE_ROLES", "Analysis", "Group", "Member"]

# Weight roles whose magnitudes rank channels (as Torch-Pruning: conv/linear weights, norm
# scales); biases, shifts and running statistics follow but do not vote.
IMPORTANCE_ROLES = ("weight", "gamma")
# Ops whose weights follow without voting, as in Torch-Pruning's GroupMagnitudeImportance (its
# target types: conv, linear, batch and layer norm): a group norm's near-1 scales would drown
# the conv magnitudes of its group (PoolFormer's output SQNR 0.2 dB against 4.5).
SILENT_OPS = ("nn.group_norm",)


@dataclass
class Member:
    """Axis ``axis`` of weight ``weight`` holds channels of a group: ``index[p]`` is the
    channel at position p (-1: a position of another space)."""

    weight: str
    role: str
    axis: int
    index: np.ndarray
    votes: bool = True  # its magnitudes rank the channels


@dataclass
class Group:
    """A prunable channel space: ``size`` channels, pruned together in every member."""

    sid: int
    size: int
    name: str = ""
    owners: list[str] = field(default_factory=list)
    members: list[Member] = field(default_factory=list)


def _special_input(analysis, node, ins):
    return [RuleContext.fixed(t.shape) for t in node.outputs]


def _special_constant(analysis, node, ins):
    exprs = [analysis.dims.leaf(n) for n in node.outputs[0].shape]
    return [exprs], {role: exprs for role in node.weights}


def _special_get_item(analysis, node, ins):
    index = int(node.get_attr("index", "0") or 0)
    return [list(ins[index] if len(ins) > 1 else ins[0])]


def _special_tuple(analysis, node, ins):
    return [list(exprs) for exprs in ins[:len(node.outputs)]]


# Graph node kinds that are not ops (conventions 4.1).
SPECIAL = {"input": _special_input, "constant": _special_constant,
           "get_item": _special_get_item, "tuple": _special_tuple}


class Analysis:
    """The dim expressions of an MSCGraph's tensors and weights, and its prunable groups.

    ``prune_head_dims``: also prune inside attention heads (and other inner factors of a
    split axis); by default whole heads are pruned and head dims stay.
    """

    def __init__(self, graph, prune_head_dims: bool = False):
        load_facts("prune")
        self.graph = graph
        self.dims = Dims()
        self.texprs: dict[str, list] = {}
        self.wexprs: dict[str, list] = {}
        self.wroles: dict[str, str] = {}
        for node in progress(graph.get_nodes(), total=len(graph.node_names),
                             desc="prune: channel analysis"):
            self._visit(node)
        for tensor in graph.get_outputs():
            self.dims.by = ("output", tensor.name)
            for expr in self.texprs[tensor.name]:
                self.dims.freeze(expr, "a graph output")
        self.dims.by = None
        if not prune_head_dims:
            for space in self.dims.spaces:
                if space.inner and space.parent is None and space.binding is None:
                    self.dims.freeze(Leaf(space), "inside an attention head (pass "
                                                  "prune_head_dims to prune it)")
        self.groups = self._groups()

    # ---- the walk -----------------------------------------------------------------------
    def _visit(self, node) -> None:
        ins = [self.texprs[t.name] for t in node.get_inputs()]
        self.dims.by = (node.optype, node.name)
        weights: dict[str, list] = {}
        if node.optype in SPECIAL:
            result = SPECIAL[node.optype](self, node, ins)
            outs, weights = result if isinstance(result, tuple) else (result, {})
        else:
            ctx = RuleContext(node, self.dims, ins)
            outs = rule_of(node.optype).ties(ctx)
            weights = ctx.weights
        if len(outs) != len(node.outputs) or any(
                len(e) != t.ndim for e, t in zip(outs, node.outputs)):
            raise ValidationError(f"the channel rule of {node.optype!r} gave {len(outs)} "
                                  f"outputs for {len(node.outputs)}", node=node.name,
                                  hint="fix its rule in compression/prune/rules.py")
        for tensor, exprs in zip(node.outputs, outs):
            self.texprs[tensor.name] = list(exprs)
        for role, weight in node.weights.items():
            self._place_weight(weight, role, weights.get(role))

    def _place_weight(self, weight, role: str, exprs) -> None:
        if exprs is None or len(exprs) != weight.ndim:
            exprs = [Fixed(n) for n in weight.shape]
        if weight.name in self.wexprs:  # a shared weight: every holder ties its axes
            for a, b in zip(self.wexprs[weight.name], exprs):
                self.dims.unify(a, b, f"shared weight {weight.name!r}")
            return
        self.wexprs[weight.name] = list(exprs)
        self.wroles[weight.name] = role

    # ---- groups -------------------------------------------------------------------------
    def _groups(self) -> list[Group]:
        groups: dict[int, Group] = {}
        for name, exprs in self.wexprs.items():
            weight = self.graph.find_tensor(name)
            out_axis = out_axis_of(weight)
            for axis, expr in enumerate(exprs):
                for sid, index in self.dims.index_maps(expr).items():
                    space = self.dims.spaces[sid]
                    group = groups.setdefault(sid, Group(sid, space.size))
                    group.members.append(Member(name, self.wroles[name], axis, index,
                                                self._votes(name)))
                    if axis == out_axis:
                        for holder in self.graph.weight_holders[name]:
                            if holder not in group.owners:
                                group.owners.append(holder)
        ranked = [g for g in groups.values()
                  if any(m.role in IMPORTANCE_ROLES for m in g.members)]
        for group in ranked:
            group.name = group.owners[0] if group.owners else group.members[0].weight
        return sorted(ranked, key=lambda g: self.graph.find_node(g.name).index
                      if self.graph.has_node(g.name) else 0)

    def _votes(self, name: str) -> bool:
        holders = self.graph.weight_holders[name]
        return self.wroles[name] in IMPORTANCE_ROLES and not any(
            self.graph.find_node(h).optype in SILENT_OPS for h in holders)

    def frozen(self) -> list[dict]:
        """Output channels of weighted nodes that cannot be pruned, and why."""
        out = []
        for name, exprs in self.wexprs.items():
            weight = self.graph.find_tensor(name)
            axis = out_axis_of(weight)
            if self.wroles[name] not in IMPORTANCE_ROLES or axis >= len(exprs):
                continue
            expr = exprs[axis]  # as the rule made it: the weight's own space, if any
            if not isinstance(expr, Leaf):
                continue
            if not self.dims.leaves(expr):
                out.append({"node": self.graph.weight_holders[name][0], "weight": name,
                            **self._why(expr)})
        return out


    def _why(self, expr) -> dict:
        """Why an axis is frozen and which joint's rule (and op) froze it: its space's own
        reason, else that of the first frozen space it is made of (a reshape's parts)."""
        space = self.dims.find(expr.space)
        todo = [space]
        while todo and not space.reason:
            current = todo.pop(0)
            if current.reason:
                space = current
            elif current.binding is not None:
                todo.extend(self.dims.find(s) for s in _leaf_spaces(current.binding))
        op, joint = space.by or (None, None)
        return {"reason": space.reason or "its parts are tied to fixed axes", "op": op,
                "joint": joint}


def _leaf_spaces(expr) -> list:
    if isinstance(expr, Leaf):
        return [expr.space]
    return [s for part in getattr(expr, "parts", ()) for s in _leaf_spaces(part)]


def out_axis_of(weight) -> int:
    """The output-channel axis of a weight: its layout's ``O``, else axis 0."""
    axis = weight.layout_of("O") if weight.layout else -1
    return max(axis, 0)


def in_axis_of(weight) -> int:
    """The input-channel axis of a weight: its layout's ``I``, else axis 1 (-1 for 1-D)."""
    axis = weight.layout_of("I") if weight.layout else -1
    if axis >= 0:
        return axis
    return 1 if weight.ndim > 1 else -1
