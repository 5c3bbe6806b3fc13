"""One step of a trace: an :class:`InstructionKind` applied to inputs and attrs, with outputs.

As in TVM, an instruction holds the schedule's random variables themselves (inputs and
outputs are RV objects, not names); names (``b0``, ``l1``) are given when a trace is printed
or saved, in the order the outputs appear::

    inst = Instruction(InstructionKind.get("GetLoops"), [SBlockRV()], [], [LoopRV(), LoopRV()])
    str(inst)                        # '_, _ = sch.get_loops(block=_)'
    InstructionKind.get("GetSBlock").is_pure       # True: a trace may drop it when unused

A kind is its name too (``InstructionKind`` is a ``str``), so ``inst.kind == "Split"`` holds.
"""

from __future__ import annotations

from ...errors import ScheduleError
from ...tir import expr as E
from .rvs import RV

__all__ = ["LIST_RESULTS", "Instruction", "InstructionKind", "is_rv", "py_value",
           "register_kinds"]

# Kinds whose result is a list: printed ``l1, = sch.get_loops(...)`` even for one output.
LIST_RESULTS = frozenset({"GetLoops", "GetChildBlocks", "Split", "LoopPartition",
                          "SamplePerfectTile", "GetProducers", "GetConsumers",
                          "GetOutputBlocks", "CacheIndex"})
# TVM's kIsPure: no effect on the function, so a trace may drop one whose outputs are unused.
_PURE = frozenset({"GetSBlock", "GetLoops", "GetChildBlocks", "GetProducers", "GetConsumers",
                   "GetOutputBlocks", "SamplePerfectTile", "SampleCategorical",
                   "SamplePartitionedTile", "SampleComputeLocation"})
_KINDS: dict = {}
_PRINTER: list = []  # (inst, name_of, output_names, decision) -> "sch.<method>(...)"


class InstructionKind(str):
    """A kind of schedule instruction (TVM's ``InstructionKind``), registered by the trace
    module for every instruction it can replay."""

    @property
    def name(self) -> str:
        return str(self)

    @property
    def is_pure(self) -> bool:
        return str(self) in _PURE

    def same_as(self, other) -> bool:
        return self == other

    @staticmethod
    def get(name: str) -> InstructionKind:
        """The kind named ``name``; an unknown name is a ScheduleError listing the known."""
        kind = _KINDS.get(str(name))
        if kind is None:
            raise ScheduleError(f"unknown schedule instruction kind {name!r}", key=str(name),
                                hint=f"known: {sorted(_KINDS)}")
        return kind


def register_kinds(names, printer) -> None:
    """Called once by the trace module (which holds the table of kinds and prints them) with
    the names of the instructions it replays and its one-line printer."""
    for name in names:
        _KINDS[name] = InstructionKind(name)
    _PRINTER[:] = [printer]


class Instruction:
    """``kind(inputs, attrs) -> outputs``; ``kind`` may be given by name."""

    __slots__ = ("attrs", "inputs", "kind", "outputs")

    def __init__(self, kind, inputs, attrs, outputs):
        self.kind = kind if isinstance(kind, InstructionKind) else InstructionKind.get(kind)
        self.inputs, self.attrs, self.outputs = list(inputs), list(attrs), list(outputs)

    def same_as(self, other) -> bool:
        return self is other

    def __str__(self) -> str:
        return _PRINTER[0](self, lambda _: "_", ["_"] * len(self.outputs), None)

    def __repr__(self) -> str:
        return f"Instruction({self.kind!r}, {self.inputs!r}, {self.attrs!r}, {self.outputs!r})"


def is_rv(x) -> bool:
    """A random variable: one of the schedule's RVs, or a TIR var standing for a sampled
    value (TVM's ExprRV is a ``tirx.Var``)."""
    return isinstance(x, (RV, E.Var))


def py_value(v):
    """A trace attr or input as plain JSON data: TIR constants become ints / floats / bools."""
    if isinstance(v, E.IntImm):
        return bool(v.value) if v.dtype == "bool" else int(v.value)
    if isinstance(v, E.FloatImm):
        return float(v.value)
    if isinstance(v, (list, tuple)):
        return [py_value(x) for x in v]
    if isinstance(v, dict):
        return {k: py_value(x) for k, x in v.items()}
    return v
