"""TensorIR schedules over msc prim funcs: primitives, random variables, the trace."""

from ...errors import ScheduleError
from .schedule import BlockRV, ExprRV, LoopRV, SBlockRV, Schedule
from .trace import Instruction, Trace

__all__ = ["BlockRV", "ExprRV", "Instruction", "LoopRV", "SBlockRV", "Schedule",
           "ScheduleError", "Trace"]
