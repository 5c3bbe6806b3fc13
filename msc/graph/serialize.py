"""JSON forms of MSCGraph and WeightGraph (conventions 2.1): object <-> dict.

Writers emit the keys in the documented order (a node also keeps ``scope``, after ``optype``);
readers check every key through ``schema`` tables and raise SerializationError or
ValidationError naming the node and key, never a bare KeyError or TypeError.

    >>> data = graph_to_dict(graph)                # doctest: +SKIP
    >>> MSCGraph(*graph_parts(data)).equal(graph)  # doctest: +SKIP
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import MSCError, SerializationError
from ..limits import check_joints
from . import schema
from .files import with_context
from .joint import BaseJoint, MSCJoint, MSCPrim, WeightJoint
from .outputs import is_plain, kinds_from_json, kinds_to_json
from .tensor import MSCTensor

__all__ = ["graph_parts", "graph_to_dict", "weight_graph_parts", "weight_graph_to_dict"]


# ---- writers ------------------------------------------------------------------------------
def _node_dict(node: MSCJoint) -> dict:
    return {"index": node.index, "name": node.name, "shared_ref": node.shared_ref,
            "optype": node.optype, "scope": node.scope,
            "parents": [p.name for p in node.parents],
            "inputs": [t.name for t in node.get_inputs()],
            "outputs": [t.to_json() for t in node.outputs], "attrs": node.get_attrs(),
            "weights": {role: t.to_json() for role, t in node.weights.items()}}


def _prim_dict(prim: MSCPrim) -> dict:
    return {"index": prim.index, "name": prim.name, "optype": prim.optype,
            "parents": [p.name for p in prim.parents], "attrs": prim.get_attrs()}


def _weight_node_dict(node: WeightJoint) -> dict:
    return {"index": node.index, "name": node.name, "shared_ref": node.shared_ref,
            "weight_type": node.weight_type, "weight": node.weight.to_json(),
            "parents": [p.name for p in node.parents], "friends": [f.name for f in node.friends],
            "attrs": node.get_attrs()}


def graph_to_dict(graph: Any) -> dict:
    """``{"name", "inputs", "outputs", "nodes", "prims"}`` of an MSCGraph, plus
    ``"output_kinds"`` only when some output is a sequence or optional (MSC's JSON has no such
    key, so graphs of tensor outputs stay byte for byte MSC's)."""
    data = {"name": graph.name, "inputs": list(graph.input_names),
            "outputs": list(graph.output_names),
            "nodes": [_node_dict(n) for n in graph.get_nodes()],
            "prims": [_prim_dict(p) for p in graph.get_prims()]}
    if not is_plain(graph.output_kinds):
        data["output_kinds"] = kinds_to_json(graph.output_kinds)
    return data


def weight_graph_to_dict(graph: Any) -> dict:
    """``{"name", "nodes"}`` of a WeightGraph."""
    return {"name": graph.name, "nodes": [_weight_node_dict(n) for n in graph.get_nodes()]}


# ---- readers ------------------------------------------------------------------------------
def _read_all(items: list, table: tuple, what: str) -> list[list]:
    """Check every object of ``items`` first, so names are known before links resolve."""
    rows, seen = [], set()
    for position, item in enumerate(items):
        name = item.get("name") if isinstance(item, dict) else None
        row = schema.read_fields(item, table, f"{what} {position}", node=name)
        if row[1] in seen:
            raise SerializationError(f"duplicate {what} name", node=row[1], key="name")
        seen.add(row[1])
        rows.append(row)
    return rows


def _resolve(loaded: dict[str, BaseJoint], names: set[str], ref: str, node: str,
             key: str = "parents") -> BaseJoint:
    if ref in loaded:
        return loaded[ref]
    if ref in names:
        raise SerializationError(f"parent {ref!r} is listed after this node", node=node, key=key,
                                 hint="nodes must be in topological order")
    raise SerializationError(f"unknown parent {ref!r}", node=node, key=key)


def _input_pair(by_name: dict[str, BaseJoint], entry: str, node: str) -> tuple[BaseJoint, int]:
    host, sep, idx = entry.rpartition(":")
    host, idx = (host, idx) if sep else (entry, "0")
    if host not in by_name:
        raise SerializationError(f"input {entry!r} is not an output of a listed parent",
                                 node=node, key="inputs")
    if not (idx.isascii() and idx.isdigit()):
        raise SerializationError(f"input {entry!r} has no integer output index", node=node,
                                 key="inputs")
    return by_name[host], int(idx)


def _tensor(data: Any, node: str) -> MSCTensor:
    return MSCTensor.from_dict(data, node=node)


def _build_node(row: list, loaded: dict, names: set) -> MSCJoint:
    index, name, shared_ref, optype, scope, parents, inputs, outputs, attrs, weights = row
    by_name = {p: _resolve(loaded, names, p, name) for p in parents}
    pairs = [_input_pair(by_name, entry, name) for entry in inputs]
    joint = MSCJoint(index, name, shared_ref, optype, attrs, pairs,
                     [_tensor(t, name) for t in outputs],
                     {role: _tensor(t, name) for role, t in weights.items()},
                     scope=scope)
    if [p.name for p in joint.parents] != parents:
        raise SerializationError(f"parents {parents} do not match the producers of the inputs "
                                 f"{[p.name for p in joint.parents]}", node=name, key="parents")
    return joint


def _build_prim(row: list, loaded: dict, names: set) -> MSCPrim:
    index, name, optype, parents, attrs = row
    return MSCPrim(index, name, optype, attrs, [_resolve(loaded, names, p, name) for p in parents])


def _build_weight_node(row: list, loaded: dict, names: set) -> WeightJoint:
    index, name, shared_ref, weight_type, weight, parents, _friends, attrs = row
    return WeightJoint(index, name, shared_ref, weight_type, _tensor(weight, name),
                       [_resolve(loaded, names, p, name) for p in parents], attrs)


def _build_all(items: list, table: tuple, what: str,
               build: Callable[[list, dict, set], BaseJoint]) -> tuple[list[BaseJoint], list]:
    rows = _read_all(items, table, what)
    names = {row[1] for row in rows}
    loaded: dict[str, BaseJoint] = {}
    for row in rows:
        try:
            loaded[row[1]] = build(row, loaded, names)
        except MSCError as err:
            raise with_context(err, node=row[1]) from None
    return list(loaded.values()), rows


def graph_parts(data: Any) -> tuple:
    """``(name, nodes, input_names, output_names, prims, output_kinds)`` for
    ``MSCGraph(...)``."""
    name, inputs, outputs, nodes, prims = schema.read_fields(data, schema.GRAPH, "graph")
    kinds = kinds_from_json(data.get("output_kinds"), len(outputs))
    check_joints(len(nodes), f"building graph {name!r} from its node list")  # before building any joint
    joints, _ = _build_all(nodes, schema.NODE, "node", _build_node)
    prim_joints, _ = _build_all(prims, schema.PRIM, "prim", _build_prim)
    return name, joints, inputs, outputs, prim_joints, kinds


def weight_graph_parts(data: Any) -> tuple[str, list[WeightJoint]]:
    """``(name, joints)`` of a WeightGraph; friends are resolved in a second pass."""
    name, nodes = schema.read_fields(data, schema.WEIGHT_GRAPH, "weight graph")
    check_joints(len(nodes), f"building weight graph {name!r} from its node list")
    joints, rows = _build_all(nodes, schema.WEIGHT_NODE, "weight node", _build_weight_node)
    by_name = {j.name: j for j in joints}
    for joint, row in zip(joints, rows):
        for friend in row[6]:
            if friend not in by_name:
                raise SerializationError(f"unknown friend {friend!r}", node=joint.name,
                                         key="friends")
            joint.friends.append(by_name[friend])
    return name, joints
