"""A worker pool that lives in native code: it runs task lists (threads.NativeTasks) with no
Python and no GIL between the caller and its workers.

Each worker is a Python thread that makes ONE ctypes call, ``msc_pool_work``, which loops until
the pool stops: it waits for the control block's generation word to change (polling with
``pause`` for SPIN_SECONDS, then asleep on a futex, its own "bell") and then claims tasks of
the posted job. A caller (``msc_pool_run``, also one ctypes call) takes the pool's try-lock,
writes the job (records, n, helpers wanted, base pointers) into the next of four descriptors,
opens it in the CLAIM word (job id << 32 | next task), bumps the generation, rings the bells
of the wanted workers that sleep, claims tasks itself and, when none is left, waits until
the DONE count reaches n.

A worker claims with a compare-and-swap on CLAIM after reading the job's descriptor between
two reads of its sequence word (a seqlock), so a worker that comes late, or was preempted
while reading, cannot take a task of another job; and the caller waits only for tasks that
were claimed, never for a worker that did not start (which matters when other processes hold
the cores). A caller that finds the pool busy (another thread's VM, or a call made inside a
task) runs its tasks alone: no deadlock, and results do not depend on who ran which task.
Sleep / wake handshakes are store-then-load pairs, all seq_cst, on both sides, and the futex
re-checks the word.

On a loaded machine the kernel may run a worker on the caller's CPU (no CPU is idle), where
the two can only take turns: a waiter stops polling (and sleeps) as soon as it shares a CPU
with the thread it waits for. (Moving such a worker off with sched_setaffinity on every job
was tried: the migrations cost more than they won, 11-18 ms against 6.6 ms for shufflenet at
load 5.) So each worker is pinned once, to a CPU of its own, and moved only when the caller
turns up on that CPU (:meth:`NativePool.keep_off`, checked once per model call): left free,
the kernel puts a worker the caller wakes on the caller's CPU whenever no CPU is idle, and
the two take turns there. x86-64 Linux only (libc's ``syscall`` and ``sched_getcpu`` are passed in
by address); elsewhere :func:`get_pool` returns None and threads.py falls back to its Python
pool.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys
import threading
import time

import numpy as np

from .native_pool_ir import (
    BASES,
    MAX_WORKERS,
    POOL_ENTRIES,
    SLOT_OF,
    SLOTS,
    TASKS_ENTRIES,
    pool_ir,
    tasks_ir,
)

__all__ = ["NativePool", "get_pool", "serial_runner", "shutdown"]

SPIN_SECONDS = 2e-4  # how long a waiting thread polls before it sleeps (a futex wake ~40 us)
WORKER_NAME = "msc-worker-native-"  # threads.WORKER_PREFIX + "native-"
_I64 = ctypes.c_int64
_NO_BASES = (0,) * BASES


@functools.cache
def _tasks_library():
    from ..llvm.jit import get_jit

    return get_jit().compile(tasks_ir(), TASKS_ENTRIES, name="msc_tasks")


@functools.cache
def serial_runner():
    """``serial(records, n, first, b0, .., b7)``: every task on this thread, with the bases
    added to the arguments from column ``first`` on."""
    return _tasks_library().cfunc("msc_tasks_serial", None, *[_I64] * (3 + BASES))


@functools.cache
def claim_runner():
    """``claim(records, n, next)``: tasks claimed from the int64 counter at ``next``, for the
    threads of a Python ``parallel_for`` (hosts without the native pool)."""
    return _tasks_library().cfunc("msc_tasks_claim", None, _I64, _I64, _I64)


@functools.cache
def _native():
    """(work, run, stop, addresses of libc's syscall and sched_getcpu, ticks per
    SPIN_SECONDS), or None where the pool cannot run (not x86-64 Linux, no such libc)."""
    from ..llvm.jit import get_jit, host_target

    if not (sys.platform.startswith("linux") and host_target().triple.startswith("x86_64")):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        syscall, getcpu = (ctypes.cast(f, ctypes.c_void_p).value
                           for f in (libc.syscall, libc.sched_getcpu))
    except (OSError, AttributeError):
        return None
    lib = get_jit().compile(pool_ir(), POOL_ENTRIES, name="msc_native_pool")
    work = lib.cfunc("msc_pool_work", None, _I64, _I64)
    run = lib.cfunc("msc_pool_run", _I64, *[_I64] * (5 + BASES))
    stop = lib.cfunc("msc_pool_stop", None, _I64, _I64)
    cycles = lib.cfunc("msc_pool_cycles", _I64)
    start, t0 = cycles(), time.perf_counter()
    time.sleep(0.002)
    rate = (cycles() - start) / max(time.perf_counter() - t0, 1e-6)
    return work, run, stop, (syscall, getcpu), max(int(rate * SPIN_SECONDS), 1)


class NativePool:
    """The control block and the worker threads (started on demand, daemons, named
    WORKER_NAME + index). :meth:`run` is the only hot path: one ctypes call."""

    def __init__(self, native):
        self._work, self._run, self._stop, (syscall, getcpu), ticks = native
        self._raw = np.zeros(SLOTS + 8, np.int64)  # 64-byte aligned view below
        skip = (-self._raw.ctypes.data % 64) // 8
        self.ctrl = self._raw[skip:skip + SLOTS]
        for slot, value in (("SYSCALL", syscall), ("GETCPU", getcpu), ("TICKS", ticks)):
            self.ctrl[SLOT_OF[slot]] = value
        self._ptr = self.ctrl.ctypes.data
        self.workers: list[threading.Thread] = []
        self.pinned: dict[int, int | None] = {}  # worker index -> the CPU it is pinned to
        self.caller_cpu = getcpu  # libc's sched_getcpu (its address)
        self._lock = threading.Lock()
        self.stopped = False

    def run(self, records: int, n: int, threads: int, first: int = 1,
            bases: tuple = ()) -> bool:
        """Run the ``n`` task records at address ``records`` on up to ``threads`` threads
        (this one included), adding ``bases`` (up to BASES ints) to the arguments from
        record column ``first`` on. False when the pool was busy and this thread ran them
        alone."""
        if len(self.workers) < threads - 1:
            self._grow(threads - 1)
        return bool(self._run(self._ptr, records, n, threads - 1, first, *bases,
                              *_NO_BASES[len(bases):]))

    @property
    def control(self) -> int:
        """The control block's address: what ``msc_pool_run`` takes first."""
        return self._ptr

    @property
    def run_entry(self):
        """``msc_pool_run(control, records, n, want, first, b0, .., b7)`` as a ctypes
        function: what a native chain calls to hand a task list to the workers
        (chain_split.py), with no Python in between."""
        return self._run

    def ensure_workers(self, count: int) -> None:
        """Start workers until ``count`` exist (a chain's dispatch cannot start them)."""
        if len(self.workers) < count:
            self._grow(count)

    def _grow(self, count: int) -> None:
        with self._lock:
            while len(self.workers) < min(count, MAX_WORKERS) and not self.stopped:
                worker = threading.Thread(target=self._pinned_work, args=(len(self.workers),),
                                          daemon=True, name=f"{WORKER_NAME}{len(self.workers)}")
                worker.start()
                self.workers.append(worker)

    def _pinned_work(self, index: int) -> None:
        """The worker loop, on one CPU of the process's set: worker i on the (i + 1)-th.
        Left free, the kernel's wake-up placement puts a worker woken by the caller on the
        caller's CPU whenever no CPU is idle (other processes' work), and the balancer does
        not move a thread that ran a moment ago: the two then take turns on one core (a
        batch-16 conv split in 4 parts measured 514 us on two threads, 510 us on one,
        269 us with the worker pinned away, at load 10). The caller is left free: the
        balancer moves it off a CPU that has two runnable threads."""
        try:
            cpus = sorted(os.sched_getaffinity(0))
            if len(cpus) > 1:
                os.sched_setaffinity(0, {cpus[(index + 1) % len(cpus)]})
                self.pinned[index] = cpus[(index + 1) % len(cpus)]
        except (AttributeError, OSError):  # not Linux, or not allowed: stay free
            pass
        self._work(self._ptr, index)

    def keep_off(self, cpu: int) -> None:
        """Move a worker pinned to ``cpu`` (the caller's now: the balancer moved the caller
        there) to a CPU no worker holds, or let it run anywhere when none is left; a
        worker sharing the caller's CPU only takes turns with it."""
        for index, pinned in list(self.pinned.items()):
            if pinned != cpu or index >= len(self.workers):
                continue
            try:
                allowed = sorted(os.sched_getaffinity(0))
                free = [c for c in allowed if c != cpu and c not in self.pinned.values()]
                os.sched_setaffinity(self.workers[index].native_id, free[:1] or allowed)
                self.pinned[index] = free[0] if free else None
            except (AttributeError, OSError):
                self.pinned[index] = None

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop the workers (each finishes the task it runs) and join them."""
        with self._lock:
            self.stopped = True
            workers, self.workers = self.workers, []
        self._stop(self._ptr, len(workers))
        for worker in workers:
            worker.join(timeout)


_pool: list = [None]
_pool_lock = threading.Lock()


def get_pool() -> NativePool | None:
    """The process's native pool, created on first use; None where it cannot run."""
    pool = _pool[0]
    if pool is None:
        native = _native()
        if native is None:
            return None
        with _pool_lock:
            if _pool[0] is None:
                _pool[0] = NativePool(native)
            pool = _pool[0]
    return pool


def shutdown() -> None:
    """Stop the pool's workers (at interpreter exit); a later call starts a new pool."""
    with _pool_lock:
        pool, _pool[0] = _pool[0], None
    if pool is not None:
        pool.shutdown()


def _after_fork_in_child() -> None:
    # The child has only the forking thread; its copy of the control block may even show the
    # lock held by a thread that does not exist there. Start over with a new block.
    _pool[0] = None


os.register_at_fork(after_in_child=_after_fork_in_child)
