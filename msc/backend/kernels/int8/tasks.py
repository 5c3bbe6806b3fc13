"""Native task lists for the int8 kernels that split over ranges (planes, channels, elements).

Each kernel keeps its task lists per shape and thread count (:class:`Plans`): the records
hold byte offsets and range bounds, and a call passes the tensors' addresses as the launch's
bases (threads.NativeTasks.launch), so a split op costs one ctypes call and no Python per
task. Entries taking floats or more than ten arguments go through task_wrap.wrapped_tasks.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable

import numpy as np

from ...runtime.native_pool_ir import RECORD
from ...runtime.task_wrap import wrapped_tasks
from ...runtime.threads import NativeTasks, native_address, split_range

__all__ = ["GatherPlan", "Plans", "range_tasks"]


class Plans:
    """key -> plan, built on first use; cleared when a kernel sees many shapes."""

    __slots__ = ("_found", "_limit")

    def __init__(self, limit: int = 64):
        self._found: dict = {}
        self._limit = limit

    def get(self, key, build: Callable[[], object]):
        found = self._found.get(key)
        if found is None:
            if len(self._found) >= self._limit:
                self._found.clear()
            found = self._found[key] = build()
        return found


def range_tasks(cfunc, total: int, parts: int, row: Callable[[int, int], tuple],
                align: int = 1) -> NativeTasks:
    """A task list calling ``cfunc(*row(lo, hi))`` for ``parts`` balanced ranges of
    ``range(total)`` (boundaries multiples of ``align``)."""
    return wrapped_tasks(cfunc, [row(lo, hi) for lo, hi in split_range(total, parts, align)])


class GatherPlan:
    """Byte ranges of several inputs copied (libc memmove) or mapped through a 256-entry
    table (``lut``: int8_lut's entry, ``lut(x, table, out, 0, 1, 1, count)``) into one output,
    as one task list: the int8 concat. The inputs' addresses differ per call and per record,
    so a call writes the records as one small integer product, ``select @ (out, x0, .., 1)``
    (the last column holds the fixed part), about 2 us."""

    __slots__ = ("_lock", "_select", "_tasks")

    def __init__(self, sizes: list[int], tables: list[int], lut, parts: int):
        chunk = max(64, -(-sum(sizes) // max(parts, 1) // 64) * 64)
        records, at = [], 0
        for i, (size, table) in enumerate(zip(sizes, tables)):
            for lo, hi in split_range(size, -(-size // chunk), 64):
                if table:  # (fixed values, column of out, column of input i)
                    records.append(((native_address(lut), lo, table, at + lo, 0, 1, 1, hi - lo),
                                    3, 1, i))
                else:
                    records.append(((native_address(ctypes.memmove), at + lo, lo, hi - lo),
                                    1, 2, i))
            at += size
        select = np.zeros((len(records), RECORD, len(sizes) + 2), np.int64)
        for k, (fixed, dst, src, i) in enumerate(records):
            select[k, :len(fixed), -1] = fixed
            select[k, dst, 0] = select[k, src, 1 + i] = 1
        self._select = select.reshape(-1, len(sizes) + 2)
        self._tasks = NativeTasks(len(records))
        self._lock = threading.Lock()

    def run(self, out: int, inputs: list[int], threads: int) -> None:
        bases = np.array([out, *inputs, 1], np.int64)
        if not self._lock.acquire(blocking=False):  # another thread runs this concat now
            tasks = NativeTasks(self._tasks.n)
            np.dot(self._select, bases, out=tasks.records.reshape(-1))
            tasks.run(threads)
            return
        try:
            np.dot(self._select, bases, out=self._tasks.records.reshape(-1))
            self._tasks.run(threads)
        finally:
            self._lock.release()
