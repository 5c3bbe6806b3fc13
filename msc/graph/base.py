"""What MSCGraph and WeightGraph share: the ordered joint store, its validation and linking,
and the file plumbing of the JSON and prototxt forms.

Joints belong to at most one graph: a graph fills their ``children`` and indexes them, so a
joint shared by two graphs would show one graph's links in the other.
"""

from __future__ import annotations

import contextlib
import difflib
import gc
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from ..errors import MSCError, ValidationError
from .files import load_json, with_context, write_atomic
from .joint import BaseJoint, check_name
from .visual import write_text

__all__ = ["BaseGraph", "bulk_objects", "check_joint_links", "check_new_joint",
           "index_joints", "link_joints"]


def _parent_error(joint: BaseJoint, parent: BaseJoint, joints: Sequence[BaseJoint]) -> None:
    position = next((i for i, j in enumerate(joints) if j is joint), len(joints))
    if any(getattr(j, "name", None) == parent.name for j in joints[position + 1:]):
        raise ValidationError(f"parent {parent.name!r} comes after its child",
                              node=joint.name, hint="joints must be in topological order")
    raise ValidationError(f"parent {parent.name!r} is not a joint of this graph", node=joint.name,
                          hint="build inputs from the graph's own joints")


def check_new_joint(store: Mapping[str, BaseJoint], joint: Any, kind: type,
                    joints: Sequence[BaseJoint] = ()) -> None:
    """Raise unless ``joint`` can join ``store``: right type, unowned, new name, known parents."""
    if not isinstance(joint, kind):
        raise ValidationError(f"expected a {kind.__name__}, got {type(joint).__name__}")
    if joint._graph is not None:
        raise ValidationError("joint already belongs to a graph", node=joint.name,
                              hint="use graph.clone() or joint.clone(inputs=...) to copy it")
    if joint.name in store:
        raise ValidationError("duplicate joint name", node=joint.name)
    for parent in joint.parents:
        if store.get(parent.name) is not parent:
            _parent_error(joint, parent, joints)


def index_joints(joints: Sequence[Any], kind: type) -> dict[str, BaseJoint]:
    """``{name: joint}`` in order, after checking each joint (its index must be its position)."""
    store: dict[str, BaseJoint] = {}
    for position, joint in enumerate(joints):
        check_new_joint(store, joint, kind, joints)
        if joint.index != position:
            raise ValidationError(f"index is {joint.index}, expected {position}",
                                  node=joint.name, hint="indices are the positions 0..n-1")
        store[joint.name] = joint
    return store


def link_joints(joints: Sequence[BaseJoint], owner: Any) -> None:
    """Add each joint to its parents' children and mark it owned by ``owner``."""
    for joint in joints:
        for parent in joint.parents:
            parent._add_child(joint)
        joint._graph = owner


def check_joint_links(store: Mapping[str, BaseJoint], names: Sequence[str], owner: Any) -> None:
    """Verify order, indices, ownership and parent/child symmetry; ValidationError names the
    first broken joint."""
    if list(store) != list(names) or len(set(names)) != len(names):
        raise ValidationError("joint names and joint map are out of sync")
    for position, name in enumerate(names):
        joint = store[name]
        if joint.index != position or joint._graph is not owner:
            raise ValidationError(f"index {joint.index} at position {position}, or not owned "
                                  f"by this graph", node=name)
        for parent in joint.parents:
            if store.get(parent.name) is not parent or parent.index >= position:
                raise ValidationError(f"parent {parent.name!r} is not an earlier joint",
                                      node=name)
            if parent._children.get(name) is not joint:
                raise ValidationError(f"parent {parent.name!r} does not list it as a child",
                                      node=name)
        for child in joint.children:
            if store.get(child.name) is not child or joint not in child.parents:
                raise ValidationError(f"child {child.name!r} does not list it as a parent",
                                      node=name)


@contextlib.contextmanager
def bulk_objects() -> Iterator[None]:
    """Pause the cyclic GC while a graph is built or dumped: these make tens of thousands of
    small objects, none of them garbage, and each full collection would walk all of them
    (it made the 10k-joint JSON round trip ~2x slower)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class BaseGraph:
    """Ordered joints by name, plus ``to_json``/``from_json``/``visualize``/``clone``.

    Subclasses provide ``to_dict``, ``from_dict`` and ``to_prototxt``.
    """

    def __init__(self, name: str):
        self._name = check_name(name, "graph name")
        self._nodes: dict[str, BaseJoint] = {}
        self._node_names: list[str] = []
        self._names_view: tuple[str, ...] | None = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def nodes(self) -> Mapping[str, BaseJoint]:
        return MappingProxyType(self._nodes)

    @property
    def node_names(self) -> tuple[str, ...]:
        if self._names_view is None:
            self._names_view = tuple(self._node_names)
        return self._names_view

    def has_node(self, name: str) -> bool:
        return name in self._nodes

    def find_node(self, name: str) -> Any:
        """The joint called ``name``; ValidationError (with close matches) when absent."""
        node = self._nodes.get(name)
        if node is None:
            close = difflib.get_close_matches(str(name), self._nodes, n=3)
            raise ValidationError(f"no node named {name!r} in graph {self._name!r}",
                                  hint=f"did you mean {', '.join(close)}?" if close else None)
        return node

    def get_nodes(self) -> Iterator[Any]:
        """The joints in topological order."""
        return (self._nodes[n] for n in self._node_names)

    def to_dict(self) -> dict:
        raise NotImplementedError

    def to_prototxt(self) -> str:
        raise NotImplementedError

    @classmethod
    def from_dict(cls, data: Any) -> BaseGraph:
        raise NotImplementedError

    def to_json(self, path: str | os.PathLike | None = None, indent: int | None = None) -> str:
        """The JSON text; also written atomically to ``path`` when given."""
        with bulk_objects():
            text = json.dumps(self.to_dict(), indent=indent)
        if path is not None:
            write_atomic(path, text + "\n")
        return text

    @classmethod
    def from_json(cls, json_or_path: Any) -> Any:
        """Load from JSON text, a file path or a dict; errors name the file and the node."""
        with bulk_objects():
            data, file = load_json(json_or_path)
            try:
                return cls.from_dict(data)
            except MSCError as err:
                raise with_context(err, file=file) from None

    def visualize(self, path: str | os.PathLike | None = None) -> str:
        """The prototxt text (Netron opens it); also written atomically to ``path``."""
        with bulk_objects():
            text = self.to_prototxt()
        return write_text(text, path)

    def clone(self) -> Any:
        """A deep copy with new joints and tensors."""
        with bulk_objects():
            return type(self).from_dict(self.to_dict())

    def _set_order(self, names: list[str]) -> None:
        self._node_names = names
        self._names_view = None

    def _append_name(self, name: str) -> None:
        self._node_names.append(name)
        self._names_view = None
