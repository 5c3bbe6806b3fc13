"""Workloads for schedule tests (TVM's ``tvm.s_tir.meta_schedule.testing``)."""

from . import te_workload

__all__ = ["te_workload"]
