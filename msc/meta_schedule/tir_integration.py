"""TVM's ``meta_schedule.tir_integration``: ``tune_tir`` and ``compile_tir``."""

from .tune import compile_tir, tune_tir

__all__ = ["compile_tir", "tune_tir"]
