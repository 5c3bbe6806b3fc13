"""WeightGraph: how the weights of an MSCGraph constrain each other, for the pruner
(conventions 1.4, 1.6).

    >>> wgraph = WeightGraph(graph, {"msc.conv2d_bias": ["weight"]}, {"add": "passby"})
    ...                                                               # doctest: +SKIP
    >>> wgraph.inspect()                                              # doctest: +SKIP
    {'nodes': {'total': 7, 'weight': 3, 'bias': 3, 'output': 1}}

Per node (skipping nodes with a ``shared_ref``): each *main* role of a main op gives a ``main``
joint; its other weights ``follow`` the last main joint; a *relation* op gives an ``output``
joint carrying the relation's strategy (reshape is forced to ``passby``); other weighted ops
(batch_norm...) give ``follow`` joints. Parents come from a BFS up the graph that stops at main
and relation nodes; several parents become mutual friends (they must keep the same channels),
unless the strategy is ``multi_inputs``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ValidationError
from . import serialize, visual
from .base import BaseGraph, check_joint_links, index_joints, link_joints
from .joint import MSCJoint, WeightJoint
from .tensor import MSCTensor

__all__ = ["WEIGHT_STRATEGIES", "WeightGraph"]

WEIGHT_STRATEGIES = ("main", "follow", "passby", "multi_inputs", "reshape")
# Strategies the builder imposes whatever the relation table says.
_FORCED_STRATEGY = {"reshape": "passby"}


def _check_tables(main_wtypes: Mapping[str, Sequence[str]],
                  relation_wtypes: Mapping[str, str]) -> None:
    for optype, strategy in relation_wtypes.items():
        if strategy not in WEIGHT_STRATEGIES:
            raise ValidationError(f"unknown weight strategy {strategy!r} for {optype!r}",
                                  key="relation_wtypes", hint=f"use one of {WEIGHT_STRATEGIES}")
    for optype, roles in main_wtypes.items():
        if isinstance(roles, str) or not all(isinstance(r, str) for r in roles):
            raise ValidationError(f"main roles of {optype!r} must be a list of role names",
                                  key="main_wtypes")


class WeightGraph(BaseGraph):
    """``WeightGraph(graph, main_wtypes, relation_wtypes)`` builds ``<graph>_weights``:
    ``main_wtypes`` maps optype -> main weight roles (``{"msc.conv2d_bias": ["weight"]}``),
    ``relation_wtypes`` maps optype -> strategy (``{"add": "passby"}``).
    """

    def __init__(self, graph: Any, main_wtypes: Mapping[str, Sequence[str]],
                 relation_wtypes: Mapping[str, str]):
        super().__init__(f"{graph.name}_weights")
        _check_tables(main_wtypes, relation_wtypes)
        self._main = {k: list(v) for k, v in main_wtypes.items()}
        self._relation = dict(relation_wtypes)
        for node in graph.get_nodes():
            if not node.shared_ref and (node.optype in self._main
                                        or node.optype in self._relation or node.weights):
                self._add_node_weights(graph, node)

    @classmethod
    def from_joints(cls, name: str, joints: Sequence[WeightJoint]) -> WeightGraph:
        """A WeightGraph of ready joints (in order, parents first), as the JSON reader makes."""
        graph = cls.__new__(cls)
        BaseGraph.__init__(graph, name)
        graph._nodes = index_joints(list(joints), WeightJoint)
        graph._node_names = list(graph._nodes)
        link_joints(list(joints), graph)
        return graph

    # ---- builder ------------------------------------------------------------------------
    def _add_node_weights(self, graph: Any, node: MSCJoint) -> None:
        parents = self._find_parents(graph, node)
        if len(parents) > 1 and self._relation.get(node.optype) != "multi_inputs":
            for parent in parents:
                parent.friends = list(parents)
        if node.optype in self._main:
            self._add_main(node, parents)
        elif node.optype in self._relation:
            strategy = _FORCED_STRATEGY.get(node.optype, self._relation[node.optype])
            self._add(node.output_at(0), "output", node.optype, strategy, parents)
        else:
            self._add_follow(node, parents)

    def _find_parents(self, graph: Any, node: MSCJoint) -> list[WeightJoint]:
        found: list[WeightJoint] = []
        frontier, explored = deque(node.parents), set()
        while frontier:
            current = frontier.popleft()
            if current.name in explored:
                continue
            explored.add(current.name)
            if current.optype in self._main:
                roles = [r for r in self._main[current.optype] if r in current.weights]
                found += [self.find_node(current.weight_at(r).name) for r in roles]
            elif current.optype in self._relation:
                found.append(self.find_node(current.output_at(0).name))
            else:
                frontier.extend(p for p in current.parents if p.name not in explored)
        return sorted(found, key=lambda joint: graph.find_producer(joint.name).index)

    def _add_main(self, node: MSCJoint, parents: list[WeightJoint]) -> None:
        heads = [self._add(node.weight_at(role), role, node.optype, "main", parents)
                 for role in self._main[node.optype] if role in node.weights]
        heads = [h for h in heads if h is not None]
        # The other weights (bias...) follow the last main joint of this node.
        self._add_follow(node, heads[-1:] or parents)

    def _add_follow(self, node: MSCJoint, parents: list[WeightJoint]) -> None:
        for role, weight in node.weights.items():
            self._add(weight, role, node.optype, "follow", parents)

    def _add(self, tensor: MSCTensor, weight_type: str, optype: str, strategy: str,
             parents: list[WeightJoint]) -> WeightJoint | None:
        if tensor.name in self._nodes:  # a weight already placed by an earlier holder
            return None
        attrs = {"producer_type": optype, "weight_strategy": strategy}
        joint = WeightJoint(len(self._node_names), tensor.name, "", weight_type, tensor, parents,
                            attrs)
        self._nodes[joint.name] = joint
        self._append_name(joint.name)
        link_joints([joint], self)
        return joint

    # ---- API ----------------------------------------------------------------------------
    def inspect(self) -> dict:
        """``{"nodes": {"total": N, <weight_type>: count, ...}}``."""
        counts = {"total": 0}
        for node in self.get_nodes():
            counts["total"] += 1
            counts[node.weight_type] = counts.get(node.weight_type, 0) + 1
        return {"nodes": counts}

    def check(self) -> None:
        """Verify order, indices and parent/child links; friends must be joints of the graph."""
        check_joint_links(self._nodes, self._node_names, self)
        for node in self.get_nodes():
            for friend in node.friends:
                if self._nodes.get(friend.name) is not friend:
                    raise ValidationError(f"friend {friend.name!r} is not in the graph",
                                          node=node.name)

    def to_dict(self) -> dict:
        return serialize.weight_graph_to_dict(self)

    @classmethod
    def from_dict(cls, data: Any) -> WeightGraph:
        return cls.from_joints(*serialize.weight_graph_parts(data))

    def to_prototxt(self) -> str:
        return visual.weight_graph_prototxt(self)

    def __str__(self) -> str:
        return f"{self._name}\n" + "".join(f"{node}\n" for node in self.get_nodes())

    def __repr__(self) -> str:
        return f"<WeightGraph {self._name}: {len(self._node_names)} nodes>"
