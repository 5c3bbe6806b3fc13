"""Native task lists for the int8 kernels that split over ranges (planes, channels, elements).

Each kernel keeps its task lists per shape and thread count (:class:`Plans`): the records
hold byte offsets and range bounds, and a call passes the tensors' addresses as the launch's
bases (threads.NativeTasks.launch), so a split op costs one ctypes call and no Python per
task. Entries taking floats or more than ten arguments go through task_wrap.wrapped_tasks.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import numpy as np

from ..runtime.native_pool_ir import RECORD
from ..runtime.task_wrap import wrapped_tasks
from ..runtime.threads import NativeTasks, native_address, split_range

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
    so each call fills them into a copy of the records (a few microseconds, once per op)."""

    __slots__ = ("_dst", "_rows", "_src", "_template", "_which")

    def __init__(self, sizes: list[int], tables: list[int], lut, parts: int):
        chunk = max(64, -(-sum(sizes) // max(parts, 1) // 64) * 64)
        records, dst_col, src_col, which, at = [], [], [], [], 0
        for i, (size, table) in enumerate(zip(sizes, tables)):
            for lo, hi in split_range(size, -(-size // chunk), 64):
                if table:
                    records.append((native_address(lut), lo, table, at + lo, 0, 1, 1, hi - lo))
                    dst_col.append(3)
                    src_col.append(1)
                else:
                    records.append((native_address(ctypes.memmove), at + lo, lo, hi - lo))
                    dst_col.append(1)
                    src_col.append(2)
                which.append(i)
            at += size
        self._template = np.zeros((len(records), RECORD), np.int64)
        for k, record in enumerate(records):
            self._template[k, :len(record)] = record
        self._rows = np.arange(len(records))
        self._dst, self._src = np.array(dst_col), np.array(src_col)
        self._which = np.array(which)

    def run(self, out: int, inputs: list[int], threads: int) -> None:
        tasks = NativeTasks(len(self._template))
        records = tasks.records
        records[:] = self._template
        records[self._rows, self._dst] += out
        records[self._rows, self._src] += np.asarray(inputs, np.int64)[self._which]
        tasks.run(threads)
