"""``ms.space_generator``: the design space of a tuning task, given as a schedule function.

    def stochastic_schedule_mm(sch):
        j_factors = sch.sample_perfect_tile(loop=j, n=2)     # a sampling instruction
        ...
    ms.tune_tir(mod, target, work_dir, 64, space=ms.space_generator.ScheduleFn(stochastic_schedule_mm))

Each candidate the search measures is one run of the function with other sampled decisions.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["ScheduleFn"]


class ScheduleFn:
    """A design space from ``sch_fn(sch)``: it schedules ``sch`` in place (returning it or
    None), drawing its choices with ``sch.sample_*``."""

    def __init__(self, sch_fn: Callable):
        if not callable(sch_fn):
            from ..errors import ValidationError

            raise ValidationError(f"ScheduleFn takes a function of a Schedule, got "
                                  f"{type(sch_fn).__name__}", key="sch_fn")
        self.sch_fn = sch_fn

    def __call__(self, sch) -> None:
        self.sch_fn(sch)
