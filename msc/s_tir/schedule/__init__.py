"""TensorIR schedules over msc prim funcs: primitives, random variables, the trace."""

from ...errors import ScheduleError
from .schedule import BlockRV, ExprRV, LoopRV, SBlockRV, Schedule
from .state import CachedFlags, Dependency, DepKind, SBlockScope, ScheduleState, StmtSRef
from .trace import Instruction, InstructionKind, Trace

__all__ = ["BlockRV", "CachedFlags", "DepKind", "Dependency", "ExprRV", "Instruction",
           "InstructionKind", "LoopRV", "SBlockRV", "SBlockScope", "Schedule", "ScheduleError",
           "ScheduleState", "StmtSRef", "Trace"]
