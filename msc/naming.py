"""Unique names: ``namer("add")`` -> ``add``, then ``add_1``, ``add_2``... (MSC's GetUniqueName).

Shared by the graph builder (node names) and the codegens (identifiers in generated source).
"""

from __future__ import annotations


class UniqueNamer:
    """Hands out each name once; a taken name gets the next free ``_<n>`` suffix."""

    def __init__(self, reserved=()):
        self._used = set(reserved)
        self._counts: dict[str, int] = {}

    def reserve(self, *names: str) -> None:
        self._used.update(names)

    def is_free(self, name: str) -> bool:
        return name not in self._used

    def claim(self, name: str) -> None:
        self._used.add(name)

    def __call__(self, hint: str) -> str:
        name = hint
        while name in self._used:
            self._counts[hint] = self._counts.get(hint, 0) + 1
            name = f"{hint}_{self._counts[hint]}"
        self._used.add(name)
        return name
