"""Native task lists for the int8 kernels that split over ranges (planes, channels, elements).

Each kernel keeps its task lists per shape and thread count (:class:`Plans`): the records
hold byte offsets and range bounds, and a call passes the tensors' addresses as the launch's
bases (threads.NativeTasks.launch), so a split op costs one ctypes call and no Python per
task. Entries taking floats or more than ten arguments go through task_wrap.wrapped_tasks.

The same one-thread task lists are the kernels' native chain steps (runtime/native_run
.KernelStep): :class:`ChainSteps` turns ``[(tasks, bases)]`` into one chain entry that runs
each list on the calling thread, its bases the step's buffers (``Buffer(i)``, ``At(i, byte
offset)``: the inputs, the outputs, then the register file's scratch). A kernel's
``native_signature`` checks the buffers' shapes and dtypes as its ``__call__`` does, once,
when the plan is made, and returns None for anything its ``__call__`` would refuse::

    steps = ChainSteps()
    steps.signature(key, lambda: ([(tasks, (Buffer(0), Buffer(1)))], scratch_bytes, splits))
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable

import numpy as np

from ...runtime.native_pool import serial_runner
from ...runtime.native_pool_ir import BASES, RECORD
from ...runtime.task_wrap import ChainEntry, wrapped_tasks
from ...runtime.threads import NativeTasks, native_address, split_range

__all__ = ["ChainSteps", "GatherPlan", "Plans", "range_tasks", "serial_entry"]


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


def serial_entry(launches) -> ChainEntry:
    """One chain entry running each ``(tasks, bases)`` of ``launches`` in order on the calling
    thread, as ``tasks.launch(1, bases, 1)`` does (the bases added to record columns 1..); a
    base is a ``Buffer`` / ``At`` of the step or an int. The entry keeps the lists alive."""
    runner = serial_runner()
    calls = []
    for tasks, bases in launches:
        if len(bases) > BASES:
            raise ValueError(f"at most {BASES} bases, got {len(bases)}")
        calls.append((runner, [tasks.records.ctypes.data, tasks.n, 1, *bases,
                               *(0,) * (BASES - len(bases))]))
    entry = ChainEntry.sequence(calls)
    entry.keep = [tasks for tasks, _ in launches]
    return entry


class ChainSteps:
    """A kernel's chain steps, one per buffer specs, kept as long as the kernel (a plan's
    chain reads the entry's row and the task lists' records on every call; :class:`Plans`
    may drop its lists, these stay)."""

    __slots__ = ("_found",)

    def __init__(self):
        self._found: dict = {}

    def signature(self, key, build: Callable[[], tuple | None]) -> tuple | None:
        """(entry address, dims, scratch bytes, splits) for ``key``; ``build()`` gives
        ``(launches or a ChainEntry, scratch bytes, splits)``, or None: no step."""
        if key not in self._found:
            made = build()
            if made is not None:
                launches, scratch, splits = made
                entry = launches if isinstance(launches, ChainEntry) else serial_entry(launches)
                made = (entry, int(scratch), bool(splits))
            self._found[key] = made
        made = self._found[key]
        return None if made is None else (*made[0].signature, made[1], made[2])


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
