"""The one index the ONNX passes share: who makes each value of the writer's node list and who
reads it, at which input slot. A node is the writer's dict (``op_type``, ``domain``,
``inputs``, ``outputs``, ``attrs``). Rewrites that go through :meth:`NodeIndex.set_inputs` and
:meth:`NodeIndex.replace_uses` keep the reader lists up to date, so a chain of rewrites costs
the nodes it touches, not a new index per step."""

from __future__ import annotations

__all__ = ["NodeIndex"]


class NodeIndex:
    """``made``: value -> the node making it; ``slots``: value -> [(reader, input slot)];
    ``users``: value -> the readers (a node reading a value twice is listed twice)."""

    def __init__(self, nodes: list[dict]):
        self.made = {o: n for n in nodes for o in n["outputs"]}
        self.slots: dict[str, list[tuple[dict, int]]] = {}
        self.users: dict[str, list[dict]] = {}
        for n in nodes:
            for i, v in enumerate(n["inputs"]):
                self._read(v, n, i)

    def _read(self, value: str, node: dict, slot: int) -> None:
        self.slots.setdefault(value, []).append((node, slot))
        self.users.setdefault(value, []).append(node)

    def _unread(self, value: str, node: dict, slot: int) -> None:
        self.slots[value] = [(n, i) for n, i in self.slots[value]
                             if not (n is node and i == slot)]
        readers = self.users[value]
        readers.pop(next(k for k, n in enumerate(readers) if n is node))

    def set_inputs(self, node: dict, inputs: list[str]) -> None:
        """``node`` reads ``inputs`` from now on."""
        for i, v in enumerate(node["inputs"]):
            self._unread(v, node, i)
        node["inputs"] = list(inputs)
        for i, v in enumerate(node["inputs"]):
            self._read(v, node, i)

    def replace_uses(self, old: str, new: str) -> None:
        """Every reader of ``old`` reads ``new``."""
        readers = self.slots.pop(old, [])
        self.users.pop(old, None)
        for node, slot in readers:
            node["inputs"][slot] = new
            self._read(new, node, slot)
