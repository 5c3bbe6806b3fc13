"""The one graph the ONNX passes share: the writer's node list and, kept in step with it, who
makes each value and who reads it at which input slot (onnx-graphsurgeon's synchronized
producer / consumer lists are the model).

``passes/pipeline.py`` builds it once from the writer's nodes and hands it to every pass in
order; no pass builds an index of its own. Every change a pass makes goes through a method
here, which updates the node, the order and the index together:

- ``set_inputs`` / ``set_input`` / ``replace_uses``: what nodes read;
- ``set_outputs`` / ``rename_output``: what a node makes (a value has one maker);
- ``rewrite(node, drop=..., op_type=..., inputs=..., ...)``: the node becomes another op and
  the nodes ``drop`` names go, in one step (how a re-fusion ends);
- ``insert`` (before / after a node), ``remove``, ``drop_dead`` (by the reader lists).

Removing a node whose output a remaining node still reads, or that is a graph output, raises
ValidationError naming the node: a rule that did so would write a model reading a value
nobody makes. ``check()`` compares the index with one built afresh (the tests call it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from msc.errors import ValidationError

from ..node import OnnxNode, Values

__all__ = ["OnnxGraph"]

_FIELDS = ("op_type", "domain", "attrs", "name")


class OnnxGraph:
    """``made``: value -> the node making it; ``slots``: value -> [(reader, input slot)];
    ``users``: value -> the readers (a node reading a value twice is listed twice).
    ``keep``: the values that must stay (the graph outputs)."""

    def __init__(self, nodes: Iterable[OnnxNode], keep: Iterable[str] = ()):
        self.keep = set(keep)
        self._order: dict[OnnxNode, None] = {}
        self._pos: dict[OnnxNode, int] = {}  # node -> its place, to keep readers in order
        self.made: dict[str, OnnxNode] = {}
        self.slots: dict[str, list[tuple[OnnxNode, int]]] = {}
        self.users: dict[str, list[OnnxNode]] = {}
        for node in nodes:
            self._pos[node] = len(self._order)
            self._order[node] = None
            self._index(node)

    # ---- reading -------------------------------------------------------------------------
    @property
    def nodes(self) -> list[OnnxNode]:
        """The nodes in order (a new list: iterate it while rewriting)."""
        return list(self._order)

    def __contains__(self, node: OnnxNode) -> bool:
        return node in self._order

    def __len__(self) -> int:
        return len(self._order)

    def walk(self) -> Iterator[OnnxNode]:
        """The nodes in order, skipping those removed while walking."""
        for node in list(self._order):
            if node in self._order:
                yield node

    def readers(self, value: str) -> list[OnnxNode]:
        return self.users.get(value, [])

    def position(self, node: OnnxNode) -> int:
        """Where ``node`` stands in the order (to sort nodes found by walking values)."""
        return self._pos[node]

    # ---- what nodes read -----------------------------------------------------------------
    def set_inputs(self, node: OnnxNode, inputs: list[str]) -> None:
        """``node`` reads ``inputs`` from now on."""
        self._unread_all(node)
        node.inputs = Values(inputs)
        self._read_all(node)

    def set_input(self, node: OnnxNode, slot: int, value: str) -> None:
        self._unread(node.inputs[slot], node, slot)
        node.inputs = _with(node.inputs, slot, value)
        self._read(value, node, slot)

    def replace_uses(self, old: str, new: str) -> None:
        """Every reader of ``old`` reads ``new``."""
        readers = self.slots.pop(old, [])
        self.users.pop(old, None)
        for node, slot in readers:
            node.inputs = _with(node.inputs, slot, new)
            self._read(new, node, slot)

    # ---- what nodes make -----------------------------------------------------------------
    def set_outputs(self, node: OnnxNode, outputs: list[str]) -> None:
        """``node`` makes ``outputs`` from now on (readers of its old ones keep their names)."""
        self._unmake(node)
        node.outputs = Values(outputs)
        self._make(node)

    def rename_output(self, node: OnnxNode, index: int, new: str) -> None:
        """Output ``index`` of ``node`` is called ``new``, and its readers read that."""
        old = node.outputs[index]
        outputs = list(node.outputs)
        outputs[index] = new
        self.set_outputs(node, outputs)
        self.replace_uses(old, new)

    # ---- whole nodes ---------------------------------------------------------------------
    def rewrite(self, node: OnnxNode, drop: Iterable[OnnxNode] = (), *,
                inputs: list[str] | None = None, outputs: list[str] | None = None,
                **fields) -> None:
        """``node`` becomes what ``fields`` (op_type, domain, attrs, name), ``inputs`` and
        ``outputs`` say, and the nodes of ``drop`` go, in one step: a value a dropped node
        made that is still read (or kept) must be one ``node`` makes now."""
        unknown = set(fields) - set(_FIELDS)
        if unknown:
            raise TypeError(f"OnnxNode has no field {sorted(unknown)}")
        gone = [n for n in dict.fromkeys(drop) if n is not node]
        for part in gone:
            self._detach(part)
        if inputs is not None:
            self.set_inputs(node, inputs)
        if outputs is not None:
            self.set_outputs(node, outputs)
        for key, value in fields.items():
            setattr(node, key, value)
        self._check_gone(gone)

    def remove(self, *nodes: OnnxNode) -> None:
        """Takes ``nodes`` out; none of their outputs may still be read or kept."""
        gone = list(dict.fromkeys(nodes))
        for part in gone:
            self._detach(part)
        self._check_gone(gone)

    def insert(self, nodes: list[OnnxNode], before: OnnxNode | None = None,
               after: OnnxNode | None = None) -> None:
        """``nodes`` go in before ``before`` or after ``after`` (at the end without either)."""
        anchor = before if before is not None else after
        if anchor is not None and anchor not in self._order:
            raise ValidationError("the anchor node is not in the graph", node=anchor.name,
                                  hint="insert next to a node the graph holds")
        order: dict[OnnxNode, None] = {}
        for existing in self._order if anchor is not None else ():
            if existing is before:
                order.update(dict.fromkeys(nodes))
            order[existing] = None
            if existing is after:
                order.update(dict.fromkeys(nodes))
        self._order = order if anchor is not None else {**self._order, **dict.fromkeys(nodes)}
        self._pos = {node: i for i, node in enumerate(self._order)}
        for node in nodes:
            self._index(node)

    def drop_dead(self) -> None:
        """Removes every node none of whose outputs is kept or read. One sweep from the end
        does it: the order is topological, so a node's readers have gone before it is seen."""
        for node in reversed(list(self._order)):
            if not any(o and (o in self.keep or self.users.get(o)) for o in node.outputs):
                self._detach(node)

    # ---- checks --------------------------------------------------------------------------
    def check(self) -> None:
        """Raises ValidationError when the index differs from one built afresh."""
        fresh = OnnxGraph(self._order, self.keep)
        for name in ("made", "slots", "users"):
            mine, theirs = _canonical(getattr(self, name)), _canonical(getattr(fresh, name))
            if mine != theirs:
                raise ValidationError(f"the graph's {name!r} index is out of step with its "
                                      "nodes", hint="change inputs and outputs only through "
                                      "OnnxGraph's methods")

    # ---- the index -----------------------------------------------------------------------
    def _index(self, node: OnnxNode) -> None:
        """Takes ``node`` in: its value lists become the graph's (``Values``), then indexed."""
        node.inputs, node.outputs = Values(node.inputs), Values(node.outputs)
        self._make(node)
        self._read_all(node)

    def _detach(self, node: OnnxNode) -> None:
        if node not in self._order:
            raise ValidationError("the node is not in the graph (removed twice?)",
                                  node=node.name, op=node.op_type)
        del self._order[node], self._pos[node]
        self._unmake(node)
        self._unread_all(node)

    def _check_gone(self, gone: list[OnnxNode]) -> None:
        for part in gone:
            for value in part.outputs:
                if not value or value in self.made:
                    continue
                if value in self.keep or self.users.get(value):
                    reader = self.users[value][0].name if self.users.get(value) else None
                    raise ValidationError(
                        f"removed node makes {value!r}, which "
                        + (f"node {reader!r} still reads" if reader else "is a graph output"),
                        node=part.name, op=part.op_type,
                        hint="rewire its readers first (replace_uses / set_inputs), or let the "
                        "node that replaces it make the value (rewrite(..., outputs=...))")

    def _make(self, node: OnnxNode) -> None:
        for value in node.outputs:
            other = self.made.get(value)
            if value and other is not None and other is not node:
                raise ValidationError(f"value {value!r} is made by node {other.name!r} already",
                                      node=node.name, op=node.op_type,
                                      hint="a value has one maker: drop the other first")
            if value:
                self.made[value] = node

    def _unmake(self, node: OnnxNode) -> None:
        for value in node.outputs:
            if self.made.get(value) is node:
                del self.made[value]

    def _read_all(self, node: OnnxNode) -> None:
        for slot, value in enumerate(node.inputs):
            self._read(value, node, slot)

    def _unread_all(self, node: OnnxNode) -> None:
        for slot, value in enumerate(node.inputs):
            self._unread(value, node, slot)

    def _read(self, value: str, node: OnnxNode, slot: int) -> None:
        """Readers stay in node order (then slot order), as a fresh index lists them: the
        rules read "the first reader" and compare reader lists."""
        slots, readers = self.slots.setdefault(value, []), self.users.setdefault(value, [])
        place = (self._pos[node], slot)
        at = len(slots)
        while at and (self._pos[slots[at - 1][0]], slots[at - 1][1]) > place:
            at -= 1
        slots.insert(at, (node, slot))
        readers.insert(at, node)

    def _unread(self, value: str, node: OnnxNode, slot: int) -> None:
        slots = self.slots[value]
        slots.pop(next(k for k, (n, i) in enumerate(slots) if n is node and i == slot))
        readers = self.users[value]
        readers.pop(next(k for k, n in enumerate(readers) if n is node))
        if not slots:
            del self.slots[value], self.users[value]


def _with(values: list[str], slot: int, value: str) -> Values:
    changed = list(values)
    changed[slot] = value
    return Values(changed)


def _canonical(index: dict) -> dict:
    """An index with nodes as their ids (reader order included: it is part of the contract)."""
    def key(item):
        return (id(item[0]), item[1]) if isinstance(item, tuple) else id(item)

    return {v: list(map(key, found)) if isinstance(found, list) else id(found)
            for v, found in index.items() if found}
