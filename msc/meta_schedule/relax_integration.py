"""TVM's ``meta_schedule.relax_integration``: ``tune_relax`` and ``compile_relax``."""

from .tune import compile_relax, tune_relax

__all__ = ["compile_relax", "tune_relax"]
