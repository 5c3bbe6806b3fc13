"""Layout: the axis letters of a tensor (``"NCHW"``), *undefined* when empty.

    >>> Layout("NCHW").index_of("C")
    1
    >>> Layout("") == "" and not Layout("").defined
    True

Axes follow tir.Layout: an upper-case letter is a primal axis, digits followed by a lower-case
letter form one sub-axis (``"NCHW4c"`` has the 5 axes N, C, H, W, 4c).
"""

from __future__ import annotations

import re

from ..errors import ValidationError

__all__ = ["Layout"]

_AXIS = re.compile(r"[0-9]*[A-Za-z]")
_VALID = re.compile(r"(?:[0-9]*[A-Za-z])*")


class Layout:
    """An immutable layout string; compares equal to its name.

    >>> Layout("NCHW") == "NCHW", Layout("OIHW").name, len(Layout("NC"))
    (True, 'OIHW', 2)
    """

    __slots__ = ("_axes", "_name")

    def __init__(self, name: str | Layout | None = ""):
        if isinstance(name, Layout):
            name = name.name
        name = name or ""
        if not isinstance(name, str) or not _VALID.fullmatch(name):
            raise ValidationError(
                f"invalid layout {name!r:.60}", key="layout",
                hint="use axis letters such as 'NCHW', or '' for none"
            )
        axes = tuple(_AXIS.findall(name))
        twice = sorted({a for a in axes if axes.count(a) > 1})
        if twice:  # an axis named twice makes index_of ambiguous (tir.Layout refuses it too)
            raise ValidationError(f"layout {name!r} names axis {twice[0]!r} twice", key="layout",
                                  hint="each axis letter appears once, e.g. 'NCHW'")
        self._name = name
        self._axes = axes

    @property
    def name(self) -> str:
        return self._name

    @property
    def defined(self) -> bool:
        return bool(self._name)

    def index_of(self, axis: str) -> int:
        """Position of ``axis`` (a letter such as ``"C"`` or a sub-axis ``"4c"``), or -1.

        >>> Layout("NCHW").index_of("W"), Layout("NCHW").index_of("D")
        (3, -1)
        """
        for i, name in enumerate(self._axes):
            if axis in (name, name[-1:]):
                return i
        return -1

    def __getitem__(self, index: int) -> str:
        return self._axes[index]

    def __len__(self) -> int:
        return len(self._axes)

    def __bool__(self) -> bool:
        return self.defined

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Layout):
            return self._name == other._name
        if isinstance(other, str):
            return self._name == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._name)

    def __str__(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"Layout({self._name!r})"
