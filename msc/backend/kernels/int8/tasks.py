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

At more than one thread the same step splits from inside the chain (runtime/chain_split.py)
when the build also gives a *split form*, ``split(threads)`` -> the lists of ``__call__`` at
that many threads as :class:`~...runtime.chain_split.Launches` (each list's tasks
independent, the lists run in order) with the step's one-thread seconds at this host's
measured rate (:func:`int8_seconds`), or Parts; the chain hands each list to the pool with
one native dispatch::

    steps.signature(key, lambda: (launches, scratch, splits, lambda threads: Launches(
        [(self._tasks(n, threads), (Buffer(0), Buffer(1)))], scratch, seconds)))
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable

import numpy as np

from ...runtime.chain_split import PARTS_PER_THREAD
from ...runtime.native_pool import serial_runner
from ...runtime.native_pool_ir import BASES, RECORD
from ...runtime.split_cost import unit_seconds
from ...runtime.task_wrap import ChainEntry, wrapped_tasks
from ...runtime.threads import NativeTasks, native_address, num_threads, split_range

__all__ = ["ChainSteps", "GatherPlan", "Plans", "copy_seconds", "int8_seconds", "mac_seconds",
           "range_tasks", "serial_entry"]


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
        """(entry address, dims, scratch bytes, splits[, split form]) for ``key``;
        ``build()`` gives ``(launches or a ChainEntry, scratch bytes, splits[, split])``, or
        None: no step. ``split(threads)``: see the module docstring; the form handed on
        takes the chain's part count (runtime/chain_split.py)."""
        if key not in self._found:
            made = build()
            if made is not None:
                launches, scratch, splits, *split = made
                entry = launches if isinstance(launches, ChainEntry) else serial_entry(launches)
                made = (entry, int(scratch), bool(splits), _parts_form(split[0])
                        if split and split[0] is not None else None)
            self._found[key] = made
        made = self._found[key]
        if made is None:
            return None
        entry, scratch, splits, form = made
        return (*entry.signature, scratch, splits) + ((form,) if form else ())


def _parts_form(split: Callable) -> Callable:
    """The split form a chain calls with its part count: ``split`` at the threads those
    parts are for (a kernel's lists hold PARTS_PER_THREAD ranges per thread)."""
    return lambda parts: split(max(2, parts // PARTS_PER_THREAD))


def int8_seconds(kind: str, work: float, make: Callable[[], tuple]) -> float:
    """One-thread seconds of ``work`` units of int8 kernel kind ``kind`` at this host's rate
    (runtime/split_cost.py), measured once per host: ``make()`` -> (call, units) of one
    representative call (its arrays made before the clock starts), timed on one thread, the
    fastest of a few calls."""
    def probe() -> tuple:
        call, units = make()
        best = float("inf")
        with num_threads(1):
            call()
            for _ in range(5):
                start = time.perf_counter()
                call()
                best = min(best, time.perf_counter() - start)
        return best, units

    return unit_seconds(kind, work, probe)


def mac_seconds(macs: float) -> float:
    """One-thread seconds of ``macs`` int8 multiply-adds (a conv's, a GEMM's), at the rate of
    a 64 x 288 x 256 requantized GEMM (a 3x3 conv of 32 -> 64 channels on a 16x16 plane)."""
    def make() -> tuple:
        from .gemm import QGemmConfig, host_vnni, pack_vnni, qgemm_driver, run_qgemm

        m, k, n = 64, 288, 256
        cfg = QGemmConfig("row", "u8", host_vnni())
        a = np.random.default_rng(0).integers(-128, 128, (m, k), dtype=np.int8)
        bp = pack_vnni(np.full((k, n), 7, np.uint8))
        comp, scale, bias = np.zeros(m, np.int32), np.full(m, 0.01, np.float32), \
            np.zeros(m, np.float32)
        c = np.empty((m, n), np.uint8)
        epi = (comp.ctypes.data, scale.ctypes.data, bias.ctypes.data, 1.0, 0, 0,
               scale.ctypes.data, bias.ctypes.data, 1.0, 0, 0)
        keep = (a, bp, comp, scale, bias, c)
        return lambda: run_qgemm(qgemm_driver(cfg), cfg, a.ctypes.data, bp.ctypes.data,
                                 c.ctypes.data, m, n, k // 4, k, n, epi) or keep, m * k * n

    return int8_seconds("int8_mac", macs, make)


def copy_seconds(nbytes: float) -> float:
    """One-thread seconds of copying ``nbytes`` (int8 concats, slices, permutes), at the rate
    of one 1 MiB memmove."""
    def make() -> tuple:
        src, dst = np.ones(1 << 20, np.uint8), np.empty(1 << 20, np.uint8)
        return lambda: ctypes.memmove(dst.ctypes.data, src.ctypes.data, src.size), src.size

    return int8_seconds("int8_copy", nbytes, make)


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
