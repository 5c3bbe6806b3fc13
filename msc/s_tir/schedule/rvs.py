"""Random variables of a schedule: handles to a block, a loop or a sampled integer.

An RV is a name tag, as in TVM: ``SBlockRV()`` can be made alone (to build an
:class:`~msc.s_tir.schedule.trace.Instruction` by hand), and a schedule knows only the RVs it
handed out. Each RV is its own identity (``same_as`` is ``is``), so a copy of a schedule
resolves the RVs made before the copy and neither resolves the other's later ones::

    sch2 = sch.copy()
    i0, i1 = sch.split(i, [None, 64])
    sch2.get(i0)          # IndexError: i0 belongs to sch only
"""

from __future__ import annotations

import itertools

from ...errors import ScheduleError

__all__ = ["RV", "BlockRV", "ExprRV", "LoopRV", "RVNotFoundError", "SBlockRV", "rv_prefix"]

_KEYS = itertools.count()


class RVNotFoundError(ScheduleError, IndexError):
    """An RV this schedule did not make or has removed (TVM raises IndexError)."""


class RV:
    """Base of the schedule's random variables; ``key`` is unique in the process."""

    __slots__ = ("key", "sch_id")

    def __init__(self, sch_id: int | None = None, key: int | None = None):
        self.sch_id = sch_id
        self.key = next(_KEYS) if key is None else key

    def same_as(self, other) -> bool:
        return self is other

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.key})"


class BlockRV(RV):
    """A block of the schedule (TVM: SBlockRV)."""


class LoopRV(RV):
    """A loop of the schedule."""


class ExprRV(RV):
    """A sampled integer (``sample_perfect_tile``, ``sample_categorical``)."""


SBlockRV = BlockRV
_PREFIX = {BlockRV: "b", LoopRV: "l", ExprRV: "v"}
_FROM_PREFIX = {p: cls for cls, p in _PREFIX.items()}


def rv_prefix(rv) -> str:
    """The letter TVM names an RV with in a printed trace (``b0``, ``l1``, ``v2``); a plain
    TIR var standing for a sampled value (TVM's ``ExprRV`` is a ``tirx.Var``) is a ``v``."""
    return _PREFIX.get(type(rv), "v")


def rv_from_name(name: str) -> RV:
    """A fresh RV of the kind a trace name (``"b0"``) says."""
    cls = _FROM_PREFIX.get(name[:1])
    if cls is None:
        raise ScheduleError(f"{name!r} is not a random-variable name (b<k>, l<k> or v<k>)",
                            key=name)
    return cls()
