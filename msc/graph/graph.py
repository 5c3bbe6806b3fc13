"""MSCGraph: the DAG of MSCJoints at the centre of msc (conventions 1.5, 1.7, 1.8).

    >>> graph = MSCGraph("main", [inp, conv, relu], ["inp_0:0"], ["relu:0"])  # doctest: +SKIP
    >>> graph.find_producer("relu:0").name, [c.name for c in graph.find_consumers("inp_0")]
    ('relu', ['conv2d'])

Lookups are dict lookups (O(1)): a name is resolved through the alias map, then as a weight
(``weight_holders``), then split at its last ``:`` into node and output index. The graph
changes only through its methods (``add_node``, ``remove_node``, ``set_tensor_alias``,
``replace_tensor``), which keep children, indices, aliases and weight holders in sync;
``check()`` verifies all of it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from ..errors import ValidationError
from . import serialize, visual
from .attrs import encode_attr
from .base import BaseGraph, check_joint_links, check_new_joint, index_joints, link_joints
from .joint import MSCJoint, MSCPrim, item_at
from .outputs import OutputKind, normalize_kinds
from .tensor import MSCTensor

__all__ = ["MSCGraph"]

TensorRef = str | MSCTensor


def _names(values: Any, key: str) -> list[str]:
    if not isinstance(values, (list, tuple)) or not all(isinstance(v, str) for v in values):
        raise ValidationError(f"{key} must be a list of tensor names, got {values!r}", key=key)
    return list(values)


def _count(items: Iterator[Any]) -> dict[str, int]:
    counts = {"total": 0}
    for item in items:
        counts["total"] += 1
        counts[item.optype] = counts.get(item.optype, 0) + 1
    return counts


class MSCGraph(BaseGraph):
    """A graph of MSCJoints in topological order, with optional shape prims.

    ``MSCGraph(name, nodes, input_names, output_names, prims=None)``: ``nodes`` are MSCJoints
    whose ``index`` is their position and whose parents come earlier; names in
    ``input_names``/``output_names`` must resolve to tensors (else ValidationError).
    ``output_kinds`` (``msc/graph/outputs.py``) groups the outputs into sequences / optionals
    where the model's outputs were such; None: every output is a tensor.
    """

    def __init__(self, name: str, nodes: Sequence[MSCJoint], input_names: Sequence[str],
                 output_names: Sequence[str], prims: Sequence[MSCPrim] | None = None,
                 output_kinds: Sequence[OutputKind] | None = None):
        super().__init__(name)
        self._input_names = _names(input_names, "input_names")
        self._output_names = _names(output_names, "output_names")
        self._output_kinds = normalize_kinds(output_kinds, len(self._output_names))
        nodes, prims = list(nodes), list(prims or ())
        self._nodes = index_joints(nodes, MSCJoint)
        self._node_names = list(self._nodes)
        self._prims = index_joints(prims, MSCPrim)
        self._prim_names = list(self._prims)
        self._tensor_alias: dict[str, str] = {}
        self._sources: dict[str, str] = {}
        self._weight_holders: dict[str, tuple[str, ...]] = {}
        for node in nodes:
            self._register_tensors(node)
        for ref in self._input_names + self._output_names:
            self.find_tensor(ref)
        link_joints(nodes, self)
        link_joints(prims, self)

    # ---- fields -------------------------------------------------------------------------
    @property
    def prims(self) -> Mapping[str, MSCPrim]:
        return MappingProxyType(self._prims)

    @property
    def prim_names(self) -> tuple[str, ...]:
        return tuple(self._prim_names)

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(self._input_names)

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(self._output_names)

    @property
    def output_kinds(self) -> tuple[OutputKind, ...]:
        """One entry per model-level output: its kind and how many flat outputs it takes."""
        return self._output_kinds

    def output_groups(self) -> list[tuple[OutputKind, list[MSCTensor]]]:
        """``(kind, its tensors)`` per model-level output, in order."""
        groups, start = [], 0
        for kind in self._output_kinds:
            names = self._output_names[start:start + kind.count]
            groups.append((kind, [self.find_tensor(n) for n in names]))
            start += kind.count
        return groups

    @property
    def sources(self) -> Mapping[str, str]:
        """``{source name: joint name}``: the frontend's node behind each joint (an ONNX node
        name, a torch.fx node name), so that what a reference run names (onnxruntime's
        per-node outputs, torch.fx's nodes) can be found on the graph. Set by the frontends;
        empty for graphs built otherwise, and not kept by JSON or by rewrites."""
        return MappingProxyType(self._sources)

    def set_sources(self, sources: Mapping[str, str]) -> None:
        unknown = [j for j in sources.values() if j not in self._nodes]
        if unknown:
            raise ValidationError(f"sources name {len(unknown)} joint(s) not in the graph: "
                                  f"{unknown[:3]}", hint="map source names to joint names")
        self._sources = {str(k): str(v) for k, v in sources.items()}

    @property
    def weight_holders(self) -> Mapping[str, tuple[str, ...]]:
        return MappingProxyType(self._weight_holders)

    # ---- lookups ------------------------------------------------------------------------
    def find_prim(self, name: str) -> MSCPrim:
        if name not in self._prims:
            raise ValidationError(f"no prim named {name!r}", hint=f"prims: {self._prim_names}")
        return self._prims[name]

    def _resolve(self, ref: TensorRef) -> str:
        name = ref.name if isinstance(ref, MSCTensor) else ref
        if not isinstance(name, str):
            raise ValidationError(f"expected a tensor or a tensor name, got {ref!r}")
        return self._tensor_alias.get(name, name)

    def _producer_and_idx(self, name: str) -> tuple[MSCJoint, int]:
        host, sep, idx = name.rpartition(":")
        if not sep:
            node = self._nodes.get(name)
            if node is None or node.optype != "constant":
                raise ValidationError("no such tensor", tensor=name,
                                      hint="a name without ':<index>' must be a constant node")
            return node, 0
        node = self._nodes.get(host)
        if node is None or not (idx.isascii() and idx.isdigit()) or int(idx) >= len(node.outputs):
            raise ValidationError("no such tensor", tensor=name,
                                  hint="tensor names are '<node>:<index>', weight names or aliases")
        return node, int(idx)

    def find_tensor(self, ref: TensorRef) -> MSCTensor:
        """The tensor called ``ref`` (a name, an alias or a tensor): output or weight."""
        name = self._resolve(ref)
        holders = self._weight_holders.get(name)
        if holders:
            node = self._nodes[holders[0]]
            return node.weight_at(node.weight_type(name))
        node, idx = self._producer_and_idx(name)
        return node.output_at(idx)

    def has_tensor(self, ref: TensorRef) -> bool:
        try:
            self.find_tensor(ref)
        except ValidationError:
            return False
        return True

    def find_producer(self, ref: TensorRef) -> MSCJoint:
        """The node producing ``ref``; for a weight, the first node holding it."""
        name = self._resolve(ref)
        holders = self._weight_holders.get(name)
        if holders:
            return self._nodes[holders[0]]
        return self._producer_and_idx(name)[0]

    def find_consumers(self, ref: TensorRef) -> list[MSCJoint]:
        """For a weight, every node holding it. Otherwise, as in MSC, **every child of the
        producer**, also those reading another output (``find_consumers_and_indices`` is exact).
        """
        name = self._resolve(ref)
        holders = self._weight_holders.get(name)
        if holders:
            return [self._nodes[h] for h in holders]
        return list(self._producer_and_idx(name)[0].children)

    def find_consumers_and_indices(self, ref: TensorRef) -> list[tuple[MSCJoint, int]]:
        """``(consumer, input_index)`` for each node that reads the output ``ref``."""
        name = self.find_tensor(ref).name
        if name in self._weight_holders:
            raise ValidationError("a weight is not a node input", tensor=name)
        found = []
        for child in self._producer_and_idx(name)[0].children:
            inputs = [t.name for t in child.get_inputs()]
            found.extend((child, i) for i, t in enumerate(inputs) if t == name)
        return found

    def get_prims(self) -> Iterator[MSCPrim]:
        return (self._prims[n] for n in self._prim_names)

    def get_weights(self) -> Iterator[MSCTensor]:
        """Every node's weights, in node order then role order (shared weights repeat)."""
        for node in self.get_nodes():
            yield from node.weights.values()

    def get_tensors(self) -> Iterator[MSCTensor]:
        """Each node's inputs and weights, then the graph outputs (duplicates possible)."""
        for node in self.get_nodes():
            yield from node.get_inputs()
            yield from node.weights.values()
        yield from self.get_outputs()

    def input_at(self, index: int) -> MSCTensor:
        return self.find_tensor(item_at(self._input_names, index, "graph input"))

    def output_at(self, index: int) -> MSCTensor:
        return self.find_tensor(item_at(self._output_names, index, "graph output"))

    def get_inputs(self) -> list[MSCTensor]:
        return [self.find_tensor(n) for n in self._input_names]

    def get_outputs(self) -> list[MSCTensor]:
        return [self.find_tensor(n) for n in self._output_names]

    def get_entries(self) -> list[MSCJoint]:
        """The nodes producing the graph inputs."""
        return [self.find_producer(n) for n in self._input_names]

    def get_exits(self) -> list[MSCJoint]:
        """The unique nodes producing the graph outputs, in output order."""
        exits = {}
        for name in self._output_names:
            node = self.find_producer(name)
            exits.setdefault(node.name, node)
        return list(exits.values())

    # ---- comparison and summaries -------------------------------------------------------
    def equal(self, other: object) -> bool:
        """Same number of inputs, outputs and nodes, each pairwise ``equal``, and the same
        output kinds."""
        if not isinstance(other, MSCGraph) or self._output_kinds != other._output_kinds:
            return False
        pairs = [(self.get_inputs(), other.get_inputs()),
                 (self.get_outputs(), other.get_outputs()),
                 (list(self.get_nodes()), list(other.get_nodes()))]
        return all(len(a) == len(b) and all(x.equal(y) for x, y in zip(a, b)) for a, b in pairs)

    def inspect(self) -> dict:
        """``{"inputs": [...], "outputs": [...], "nodes": {"total": N, optype: n}}`` plus
        ``"prims"`` when the graph has prims (conventions 1.7)."""
        summary = {"inputs": [t.inspect() for t in self.get_inputs()],
                   "outputs": [t.inspect() for t in self.get_outputs()],
                   "nodes": _count(self.get_nodes())}
        if self._prims:
            summary["prims"] = _count(self.get_prims())
        return summary

    # ---- changes ------------------------------------------------------------------------
    def add_node(self, joint: MSCJoint) -> MSCJoint:
        """Append ``joint`` (its parents must be in the graph); its index becomes its position.

        >>> graph.add_node(MSCJoint(0, "sigmoid", "", "sigmoid", inputs=[(relu, 0)],
        ...                         outputs=[out]))  # doctest: +SKIP
        """
        check_new_joint(self._nodes, joint, MSCJoint)
        joint._index = len(self._node_names)
        self._nodes[joint.name] = joint
        self._append_name(joint.name)
        self._register_tensors(joint)
        link_joints([joint], self)
        return joint

    def remove_node(self, name: str) -> MSCJoint:
        """Remove a node nobody reads and that produces no graph input or output; the nodes
        after it move up one index. Returns the removed (now unowned) node."""
        node = self.find_node(name)
        self._check_removable(node)
        for parent in node.parents:
            del parent._children[name]
        for tensor in node.outputs:
            self._drop_alias(tensor)
        self._unregister_weights(node)
        del self._nodes[name]
        self._set_order(self._node_names[:node.index] + self._node_names[node.index + 1:])
        for position in range(node.index, len(self._node_names)):
            self._nodes[self._node_names[position]]._index = position
        node._graph, node._index = None, 0
        return node

    def _check_removable(self, node: MSCJoint) -> None:
        if node.children:
            raise ValidationError(f"node has consumers: {', '.join(c.name for c in node.children)}",
                                  node=node.name, hint="remove its consumers first")
        used = [n for n in self._input_names + self._output_names if self.find_producer(n) is node]
        if used:
            raise ValidationError(f"node produces graph inputs/outputs {used}", node=node.name)

    def set_tensor_alias(self, tensor: TensorRef, alias: str) -> None:
        """Give a tensor of the graph a new alias; lookups by the old alias stop working."""
        target = self.find_tensor(tensor)
        if not isinstance(alias, str):
            raise ValidationError(f"alias must be a string, got {alias!r}", tensor=target.name)
        if alias and self.has_tensor(alias) and self.find_tensor(alias).name != target.name:
            raise ValidationError(f"alias {alias!r} already names another tensor",
                                  tensor=target.name, hint="pick an unused alias")
        self._drop_alias(target)
        for copy in self._tensor_copies(target.name):
            copy.set_alias(alias)
        if alias:
            self._tensor_alias[alias] = target.name

    def replace_tensor(self, ref: TensorRef, tensor: MSCTensor) -> None:
        """Substitute an output or weight tensor by one with the same name (MSC PruneWeights
        for one tensor). A ``reshape`` whose output changes gets its ``shape`` attr rewritten.

        >>> graph.replace_tensor("const", weight.clone(shape=[3, 3, 7, 7]))  # doctest: +SKIP
        """
        old = self.find_tensor(ref)
        if not isinstance(tensor, MSCTensor) or tensor.name != old.name:
            raise ValidationError(f"replacement must be an MSCTensor named {old.name!r}, got "
                                  f"{tensor!r}", tensor=old.name,
                                  hint="keep the name, e.g. tensor.clone(shape=[...])")
        self._drop_alias(old)
        if old.name in self._weight_holders:
            for holder in self._weight_holders[old.name]:
                node = self._nodes[holder]
                node._weights[node.weight_type(old.name)] = tensor
        else:
            self._replace_output(*self._producer_and_idx(old.name), tensor)
        if tensor.alias:
            self._tensor_alias[tensor.alias] = tensor.name

    def prune_weights(self, pruned: Mapping[str, MSCTensor]) -> MSCGraph:
        """A new graph with the tensors named in ``pruned`` substituted (``replace_tensor``
        each); this graph is unchanged. Mirrors ``msc.core.PruneWeights``."""
        graph = self.clone()
        for name, tensor in pruned.items():
            graph.replace_tensor(name, tensor)
        return graph

    # ---- invariants ---------------------------------------------------------------------
    def check(self) -> None:
        """Verify the invariants; raises ValidationError naming the first broken node.

        Topological order and indices 0..n-1, parent/child symmetry, unique node and tensor
        names, resolvable node inputs and graph inputs/outputs, consistent weight holders.
        """
        check_joint_links(self._nodes, self._node_names, self)
        check_joint_links(self._prims, self._prim_names, self)
        outputs: set[str] = set()
        for node in self.get_nodes():
            self._check_node_tensors(node, outputs)
        expected = MSCGraph._holders(self.get_nodes())
        for name in expected.keys() | self._weight_holders.keys():
            if expected.get(name) != self._weight_holders.get(name):
                raise ValidationError(f"weight_holders say {self._weight_holders.get(name)}, "
                                      f"the nodes say {expected.get(name)}", tensor=name)
        for ref in self._input_names + self._output_names:
            self.find_tensor(ref)

    def _check_node_tensors(self, node: MSCJoint, outputs: set[str]) -> None:
        for p_idx, out_idx in node.inputs:
            if p_idx >= len(node.parents) or out_idx >= len(node.parents[p_idx].outputs):
                raise ValidationError(f"input ({p_idx}, {out_idx}) does not resolve",
                                      node=node.name)
        for tensor in node.outputs:
            if tensor.name in outputs or tensor.name in self._weight_holders:
                raise ValidationError("duplicate tensor name", node=node.name,
                                      tensor=tensor.name)
            if self.find_producer(tensor.name) is not node:
                raise ValidationError("output does not resolve to its node", node=node.name,
                                      tensor=tensor.name)
            outputs.add(tensor.name)

    # ---- bookkeeping --------------------------------------------------------------------
    @staticmethod
    def _holders(nodes: Iterator[MSCJoint]) -> dict[str, tuple[str, ...]]:
        holders: dict[str, tuple[str, ...]] = {}
        for node in nodes:
            for weight in node.weights.values():
                holders[weight.name] = (*holders.get(weight.name, ()), node.name)
        return holders

    def _register_tensors(self, node: MSCJoint) -> None:
        # MSC's AnalysisGraph: output aliases, then each weight's alias at its first holder.
        for tensor in node.outputs:
            if tensor.alias:
                self._tensor_alias[tensor.alias] = tensor.name
        for weight in node.weights.values():
            holders = self._weight_holders.get(weight.name, ())
            self._weight_holders[weight.name] = (*holders, node.name)
            if not holders and weight.alias:
                self._tensor_alias[weight.alias] = weight.name

    def _unregister_weights(self, node: MSCJoint) -> None:
        for weight in node.weights.values():
            holders = tuple(h for h in self._weight_holders[weight.name] if h != node.name)
            self._weight_holders[weight.name] = holders
            if not holders:
                del self._weight_holders[weight.name]
                self._drop_alias(weight)

    def _drop_alias(self, tensor: MSCTensor) -> None:
        if tensor.alias and self._tensor_alias.get(tensor.alias) == tensor.name:
            del self._tensor_alias[tensor.alias]

    def _tensor_copies(self, name: str) -> list[MSCTensor]:
        holders = self._weight_holders.get(name)
        if holders:
            nodes = [self._nodes[h] for h in holders]
            return [n.weight_at(n.weight_type(name)) for n in nodes]
        node, idx = self._producer_and_idx(name)
        return [node.output_at(idx)]

    @staticmethod
    def _replace_output(node: MSCJoint, idx: int, tensor: MSCTensor) -> None:
        outputs = list(node.outputs)
        outputs[idx] = tensor
        node._outputs = tuple(outputs)
        if node.optype == "reshape" and idx == 0 and "shape" in node._attrs:
            node._attrs["shape"] = encode_attr(tensor.shape)

    # ---- serialization and printing -----------------------------------------------------
    def to_dict(self) -> dict:
        """The JSON object of conventions 2.1 (plus ``scope`` in each node)."""
        return serialize.graph_to_dict(self)

    @classmethod
    def from_dict(cls, data: Any) -> MSCGraph:
        return cls(*serialize.graph_parts(data))

    def to_prototxt(self) -> str:
        return visual.graph_prototxt(self)

    def to_dot(self, path: str | None = None) -> str:
        """Graphviz DOT text (``dot -Tsvg``); also written atomically to ``path``."""
        return visual.write_text(visual.graph_dot(self), path)

    def __str__(self) -> str:
        head = f"{self._name} <INPUTS: {','.join(self._input_names)}| " \
               f"OUTPUTS: {','.join(self._output_names)}>\n"
        joints = [*self.get_prims(), *self.get_nodes()]
        return head + "".join(f"{joint}\n" for joint in joints)

    def __repr__(self) -> str:
        return f"<MSCGraph {self._name}: {len(self._node_names)} nodes>"

