"""``s_tir``: schedulable TIR (TVM 0.27's ``tvm.s_tir``; ``tvm.tir.Schedule`` before it).

    from msc import s_tir          # or: from msc import tir; tir.Schedule(...)
    sch = s_tir.Schedule(mod)
"""

from ..errors import ScheduleError
from .schedule import (
    BlockRV,
    ExprRV,
    Instruction,
    InstructionKind,
    LoopRV,
    SBlockRV,
    Schedule,
    ScheduleState,
    StmtSRef,
    Trace,
)
from .tensor_intrin import TensorIntrin

__all__ = ["BlockRV", "ExprRV", "Instruction", "InstructionKind", "LoopRV", "SBlockRV",
           "Schedule", "ScheduleError", "ScheduleState", "StmtSRef", "TensorIntrin", "Trace"]
