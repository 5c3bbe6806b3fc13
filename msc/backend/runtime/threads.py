"""Thread count for the native kernels and the worker pool that splits their outer loops.

The count is process-wide (:func:`set_num_threads`, default ``$MSC_NUM_THREADS``, else the
CPUs this process may run on, :func:`cpu_threads`), and
:func:`num_threads` overrides it for the current thread or asyncio task (a context variable),
so two VMs on two threads can each run with their own count::

    from msc.backend.runtime.threads import num_threads, parallel_for
    with num_threads(2):
        parallel_for(8, lambda i: work(i))    # tasks 0..7, on the caller and one worker

Kernels call native code through ctypes, which releases the GIL, so tasks calling native code
run in parallel. The caller always works on its own tasks too: a call never waits for a worker
to become free, so concurrent and nested calls cannot deadlock. A ``parallel_for`` inside a
task runs serially on that thread (no nested fan-out). The first exception raised by a task is
re-raised in the caller, and tasks not yet started are skipped. Waiting threads poll for
SPIN_SECONDS (200 us, in native code without the GIL) before they sleep, since waking a
sleeping thread costs about 40 us here, and milliseconds when other processes hold the cores.

Most kernels do not call ``parallel_for``: they post a :class:`NativeTasks` list (kernel
address and arguments per task), which on x86-64 Linux runs on the native pool of
native_pool.py, whose workers wait in native code, so handing an op to them takes one ctypes
call and no GIL (about 3 us, against about 20 us on the Python pool). There ``parallel_for``
runs on the same workers too (each task calls back into Python), so two pools never spin
against each other; the Python pool below is the fallback on other hosts.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import itertools
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar

import numpy as np

from ...errors import ValidationError
from . import native_pool
from .native_pool import claim_runner, serial_runner
from .native_pool_ir import BASES, NATIVE_ARGS, RECORD

__all__ = ["BASES", "NATIVE_ARGS", "NativeTasks", "cache_bytes", "copy_into", "cpu_threads",
           "get_num_threads",
           "native_address", "num_threads", "parallel_calls", "parallel_for", "parallel_ranges",
           "set_num_threads", "split_range", "task_threads"]

MAX_THREADS = 256  # a typo such as 10**6 must not try to start a million OS threads
_NO_BASES = (0,) * BASES
WORKER_PREFIX = "msc-worker-"  # the pool's thread names (lowering/compile.py tells them from others)


def _checked(n, where: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_THREADS:
        raise ValidationError(f"expected an int in [1, {MAX_THREADS}], got {n!r}",
                              param="num_threads", key=where,
                              hint="1 runs every kernel on the calling thread")
    return n


def cpu_threads() -> int:
    """CPUs this process may run on (its affinity mask, as ``taskset`` or a container's cpuset
    limit it), at most MAX_THREADS: the default thread count."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        count = os.cpu_count() or 1
    return max(1, min(count, MAX_THREADS))


# Data cache bytes per level when the host does not say (Linux sysfs unreadable): the sizes the
# blocking constants were tuned with (AMD Zen 4: 32 KiB L1d, 1 MiB L2 per core)
_CACHE_DEFAULTS = {1: 32 << 10, 2: 1 << 20, 3: 8 << 20}
_CACHE_DIR = "/sys/devices/system/cpu/cpu0/cache"


@functools.cache
def cache_bytes(level: int, root: str = _CACHE_DIR) -> int:
    """Bytes of the level-``level`` data (or unified) cache of CPU 0, as Linux reports it
    (``index*/size``: "48K", "2048K", "1M"); the Zen 4 sizes the kernels were tuned with when
    it does not. Kernels size their cache blocks from it (direct conv chunks, pixel-conv K
    blocks, int8 conv unfolds), so a 2 MiB-L2 Xeon blocks differently from a 1 MiB-L2 EPYC."""
    try:
        for index in sorted(os.listdir(root)):
            base = os.path.join(root, index)
            with open(os.path.join(base, "level")) as f:
                if int(f.read()) != level:
                    continue
            with open(os.path.join(base, "type")) as f:
                if f.read().strip() == "Instruction":
                    continue
            with open(os.path.join(base, "size")) as f:
                text = f.read().strip().upper()
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            return int(text.rstrip("KMG")) * scale
    except (OSError, ValueError):
        pass
    return _CACHE_DEFAULTS.get(level, _CACHE_DEFAULTS[3])


def _from_env() -> int:
    text = os.environ.get("MSC_NUM_THREADS", "").strip()
    if not text:
        return cpu_threads()
    try:
        value = int(text)
    except ValueError:
        value = text
    return _checked(value, "MSC_NUM_THREADS")


_default = [_from_env()]
_override: ContextVar[int | None] = ContextVar("msc_num_threads", default=None)


def set_num_threads(n: int) -> None:
    """Set the process-wide thread count (``num_threads`` blocks still take precedence)."""
    _default[0] = _checked(n, "set_num_threads")


def task_threads() -> int:
    """Threads a ``parallel_for`` called here would use: 1 inside a task, where calls run
    serially, else :func:`get_num_threads`. Kernels read it to skip splitting work that would
    not run in parallel anyway."""
    return 1 if getattr(_local, "inside", False) else get_num_threads()


def get_num_threads() -> int:
    """Threads a kernel called now may use: the innermost ``num_threads`` block, else the
    process-wide count."""
    n = _override.get()
    return _default[0] if n is None else n


@contextlib.contextmanager
def num_threads(n: int) -> Iterator[int]:
    """Use ``n`` threads inside the block, on this thread or asyncio task only.

        >>> with num_threads(2):
        ...     get_num_threads()
        2
    """
    token = _override.set(_checked(n, "num_threads"))
    try:
        yield n
    finally:
        _override.reset(token)


# ---------------------------------------------------------------------------------------------
# The pool


SPIN_SECONDS = 2e-4  # how long a waiting thread polls before it sleeps

_SPIN_IR = """
declare i64 @llvm.readcyclecounter()
declare void @llvm.x86.sse2.pause()
define i64 @msc_threads_spin(i64* %word, i64 %seen, i64 %ticks) {
entry:
  %start = call i64 @llvm.readcyclecounter()
  br label %poll
poll:
  %value = load atomic volatile i64, i64* %word acquire, align 8
  %changed = icmp ne i64 %value, %seen
  br i1 %changed, label %done, label %wait
wait:
  call void @llvm.x86.sse2.pause()
  %now = call i64 @llvm.readcyclecounter()
  %spent = sub i64 %now, %start
  %more = icmp ult i64 %spent, %ticks
  br i1 %more, label %poll, label %done
done:
  ret i64 %value
}
"""


@functools.cache
def _spinner():
    """(native spin, cycle-counter ticks per SPIN_SECONDS), or None off x86-64. The call
    releases the GIL while it polls."""
    from ..llvm.jit import get_jit, host_target

    if not host_target().triple.startswith("x86_64"):
        return None
    spin = get_jit().compile(_SPIN_IR, ["msc_threads_spin"]).cfunc(
        "msc_threads_spin", ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
    word, ticks = np.zeros(1, np.int64), 10_000_000  # a few ms: calibrates the counter
    start = time.perf_counter()
    spin(word.ctypes.data, 0, ticks)
    rate = ticks / max(time.perf_counter() - start, 1e-6)
    return spin, max(int(rate * SPIN_SECONDS), 1)


def _spin(word: np.ndarray, seen: int) -> None:
    """Poll ``word[0]`` until it differs from ``seen`` or SPIN_SECONDS pass."""
    spinner = _spinner()
    if spinner is not None:
        spinner[0](word.ctypes.data, seen, spinner[1])


class _Region:
    """One ``parallel_for`` call: tasks handed out one at a time to whoever asks."""

    __slots__ = ("active", "done", "error", "finished", "fn", "lock", "n", "next")

    def __init__(self, n: int, fn: Callable[[int], object]):
        self.n, self.fn, self.next, self.active, self.error = n, fn, 0, 0, None
        self.lock = threading.Lock()
        self.done = threading.Condition(self.lock)
        self.finished = np.zeros(1, np.int64)  # set to 1 when active drops to 0

    def work(self) -> None:
        """Run tasks until none is left (or one failed). Called by the caller and helpers."""
        _local.inside = True
        try:
            while (i := self._claim()) >= 0:
                try:
                    self.fn(i)
                except BaseException as error:  # noqa: BLE001 - re-raised by the caller
                    self.fail(error)
        finally:
            _local.inside = False
            with self.lock:
                self.active -= 1
                if not self.active:
                    self.finished[0] = 1
                    self.done.notify_all()

    def fail(self, error: BaseException) -> None:
        """Keep the first error; no task starts after it."""
        with self.lock:
            if self.error is None:
                self.error = error

    def _claim(self) -> int:
        with self.lock:
            if self.error is not None or self.next >= self.n:
                return -1
            self.next += 1
            return self.next - 1

    def join(self) -> None:
        """Wait until no participant is inside a task; by then no task can start."""
        if self.active:
            _spin(self.finished, 0)
        with self.lock:
            while self.active:
                self.done.wait()

    def enter(self) -> bool:
        """Register a participant; False when there is nothing left to do."""
        with self.lock:
            if self.error is not None or self.next >= self.n:
                return False
            self.active += 1
            return True


class _Pool:
    """Daemon worker threads taking regions from one queue; grown on demand."""

    def __init__(self):
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.workers: list[threading.Thread] = []
        self.lock = threading.Lock()
        self.posted = np.zeros(1, np.int64)  # counts regions put on the queue

    def post(self, region: _Region, copies: int) -> None:
        for _ in range(copies):
            self.jobs.put(region)
        self.posted[0] += 1  # under the GIL; wakes workers spinning in _next

    def ensure(self, count: int) -> None:
        if len(self.workers) >= count:
            return
        with self.lock:
            while len(self.workers) < count:
                worker = threading.Thread(target=self._loop, daemon=True,
                                          name=f"{WORKER_PREFIX}{len(self.workers)}")
                worker.start()
                self.workers.append(worker)

    def _loop(self) -> None:
        while (region := self._next()) is not None:
            if region.enter():
                region.work()

    def _next(self):
        """The next job. A model calls kernels back to back, so a worker that just finished
        one spins a little (without the GIL) before it sleeps: waking a sleeping thread costs
        tens of microseconds, and far more when other processes hold the cores."""
        seen = int(self.posted[0])
        try:
            return self.jobs.get_nowait()
        except queue.Empty:
            pass
        _spin(self.posted, seen)
        return self.jobs.get()

    def shutdown(self) -> None:
        with self.lock:
            workers, self.workers = self.workers, []
            for _ in workers:
                self.jobs.put(None)
        for worker in workers:
            worker.join(timeout=5)


_pool = _Pool()
_local = threading.local()


def _reset_after_fork() -> None:
    # A forked child has only the forking thread: the parent's workers do not exist there.
    global _pool, _local
    _pool, _local = _Pool(), threading.local()


os.register_at_fork(after_in_child=_reset_after_fork)
atexit.register(lambda: _pool.shutdown())
atexit.register(native_pool.shutdown)


def parallel_for(n_tasks: int, fn: Callable[[int], object],
                 threads: int | None = None) -> None:
    """Call ``fn(i)`` for i in ``range(n_tasks)``, on up to ``threads`` threads (default
    :func:`get_num_threads`), the caller included. Returns when every task has run; the
    order in which tasks run is unspecified, so each must write its own outputs.

        >>> out = [0] * 4
        >>> parallel_for(4, lambda i: out.__setitem__(i, i * i), threads=2)
        >>> out
        [0, 1, 4, 9]
    """
    threads = min(get_num_threads() if threads is None else _checked(threads, "threads"),
                  n_tasks)
    if threads <= 1 or getattr(_local, "inside", False):
        for i in range(n_tasks):
            fn(i)
        return
    if _PY_ON_NATIVE[0] and native_pool.get_pool() is not None:
        _on_native_pool(n_tasks, fn, threads)
        return
    region = _Region(n_tasks, fn)
    region.active = 1  # the caller, counted before any helper can see the region
    pool = _pool
    pool.ensure(threads - 1)
    pool.post(region, threads - 1)
    try:
        region.work()
        region.join()
    except BaseException as error:  # noqa: BLE001 - interrupted: start no more tasks
        region.fail(error)
        region.join()
    if region.error is not None:
        raise region.error


class _PyRegion:
    """A ``parallel_for`` on the native pool: its tasks call back into Python (_py_task)."""

    __slots__ = ("error", "fn")

    def __init__(self, fn: Callable[[int], object]):
        self.fn, self.error = fn, None

    def task(self, i: int) -> None:
        if self.error is not None:  # no task starts after a failure
            return
        _local.inside = True
        try:
            self.fn(i)
        except BaseException as error:  # noqa: BLE001 - re-raised by the caller
            if self.error is None:
                self.error = error
        finally:
            _local.inside = False


_PY_ON_NATIVE = [True]  # parallel_for on the native pool when there is one (False: Python pool)
_regions: dict[int, _PyRegion] = {}
_region_ids = itertools.count(1)
_PY_LISTS: dict[int, object] = {}  # task count -> task list calling _py_task(region, i)


@ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64)
def _py_task(region: int, i: int) -> None:
    # Called by native pool threads (all Python threads: ctypes takes the GIL for the call)
    _regions[region].task(i)


def _on_native_pool(n_tasks: int, fn: Callable[[int], object], threads: int) -> None:
    """parallel_for on the native pool, so one set of workers serves both kinds of split
    (two pools spinning at once would take each other's cores). A task costs a GIL round
    trip, as on the Python pool."""
    tasks = _PY_LISTS.get(n_tasks)
    if tasks is None:
        tasks = NativeTasks(n_tasks)
        tasks.records[:, 0] = ctypes.cast(_py_task, ctypes.c_void_p).value
        tasks.records[:, 2] = np.arange(n_tasks)
        if len(_PY_LISTS) > 1024:
            _PY_LISTS.clear()
        _PY_LISTS[n_tasks] = tasks
    key = next(_region_ids)
    region = _regions[key] = _PyRegion(fn)
    try:
        tasks.launch(1, (key,), threads)  # column 1 (0) + key: the region's id
    finally:
        del _regions[key]
    if region.error is not None:
        raise region.error


def split_range(total: int, parts: int, align: int = 1) -> list[tuple[int, int]]:
    """``parts`` balanced ``[lo, hi)`` ranges covering ``range(total)``; every boundary but the
    last is a multiple of ``align`` (whole vectors or tiles per part). Empty parts are dropped.

        >>> split_range(10, 3)
        [(0, 3), (3, 6), (6, 10)]
    """
    units = -(-total // align)
    parts = max(1, min(parts, units))
    edges = [min(total, units * i // parts * align) for i in range(parts + 1)]
    return [(lo, hi) for lo, hi in itertools.pairwise(edges) if hi > lo]


def parallel_ranges(total: int, fn: Callable[[int, int], object], work: float,
                    min_work: float, align: int = 1, per_thread: int = 1) -> None:
    """``fn(lo, hi)`` over balanced ranges of ``range(total)``: one call on this thread when
    ``work`` (any unit) is below ``min_work`` or only one thread is available, else
    ``per_thread`` ranges per thread in one ``parallel_for``."""
    threads = task_threads() if work >= min_work else 1
    parts = split_range(total, threads * per_thread, align) if threads > 1 else ()
    if len(parts) > 1:
        parallel_for(len(parts), lambda i: fn(*parts[i]), threads)
    elif total:
        fn(0, total)


# ---------------------------------------------------------------------------------------------
# Native task lists: one ctypes call per thread and op, not one Python call per task.


def native_address(cfunc) -> int:
    """The address of a ctypes function (a compiled kernel entry), for :func:`parallel_calls`."""
    return ctypes.cast(cfunc, ctypes.c_void_p).value


def parallel_calls(address: int, args: np.ndarray, threads: int | None = None) -> None:
    """Call the native function at ``address`` once per row of ``args`` (int64, up to
    NATIVE_ARGS columns: integers and pointers), on up to ``threads`` threads (see
    :class:`NativeTasks`, which kernels keep to call the same tasks again)."""
    tasks = NativeTasks(len(args))
    tasks.records[:, 0] = address
    tasks.records[:, 1:1 + args.shape[1]] = args
    tasks.run(threads)


class NativeTasks:
    """``n`` native calls, ``records[i] = (function address, NATIVE_ARGS int64 arguments)``,
    run by :meth:`launch` / :meth:`run`: the rows are handed out by an atomic counter inside
    native code, so a task costs no Python and no GIL. On several threads the list goes to
    the native pool (native_pool.py: one ctypes call in all, the workers wait in native
    code), elsewhere to :func:`parallel_for` (one ctypes call per thread). Kernels keep one
    per plan with byte offsets in the pointer columns and pass the tensors' addresses per
    call (:meth:`launch`). The functions must not fail (they return void)."""

    __slots__ = ("_busy", "_ptr", "keep", "n", "records")

    def __init__(self, n: int):
        self.n = n
        self.keep = None  # what the records point into (task_wrap's argument rows)
        self.records = np.zeros((n, RECORD), np.int64)
        self._ptr = self.records.ctypes.data
        self._busy = threading.Lock()

    def launch(self, first: int, bases: tuple, threads: int | None = None) -> None:
        """Every task once, with ``bases`` (up to BASES ints: addresses) added to the
        arguments in record columns ``first``.. (which hold byte offsets), on up to
        ``threads`` threads (default :func:`task_threads`). The records are not written, so
        concurrent callers may share the list."""
        n = self.n
        count = min(n, task_threads() if threads is None else threads)
        if count > 1:
            pool = native_pool.get_pool()
            if pool is not None:
                pool.run(self._ptr, n, count, first, bases)
            else:
                self._on_python_pool(first, bases, count)
        elif n:
            serial_runner()(self._ptr, n, first, *bases, *_NO_BASES[len(bases):])

    def run(self, threads: int | None = None) -> None:
        """Every task once, as its records say (see :meth:`launch`)."""
        self.launch(1, (), threads)

    def call(self, first: int, values, threads: int | None = None) -> None:
        """Set columns ``first..`` of every record to ``values`` (a row, or one row per
        task), then :meth:`run`. A concurrent caller of the same list (two VMs running one
        model on two threads) works on a copy."""
        tasks = self
        if not self._busy.acquire(blocking=False):
            tasks = NativeTasks(self.n)
            tasks.records[:] = self.records
            tasks._busy.acquire()
        try:
            tasks.records[:, first:first + np.shape(values)[-1]] = values
            tasks.run(threads)
        finally:
            tasks._busy.release()

    def _on_python_pool(self, first: int, bases: tuple, count: int) -> None:
        records = self.records.copy()
        records[:, first:first + len(bases)] += np.asarray(bases, np.int64)
        claim, next_ = claim_runner(), np.zeros(1, np.int64)
        ptr, next_ptr = records.ctypes.data, next_.ctypes.data
        parallel_for(count, lambda _: claim(ptr, self.n, next_ptr), count)


_COPY_PARALLEL = 1 << 18  # bytes from which copy_into splits (a 256 KiB copy takes ~20 us)
_COPY_SPLITS: dict = {}  # (bytes, threads) -> memmove task list (byte offsets, sizes)


def copy_into(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src``; a large copy between C-contiguous arrays of one dtype and shape
    runs as byte ranges of libc's memmove on the threads (densenet's concats copy megabytes)."""
    nbytes = dst.nbytes
    threads = task_threads() if nbytes >= _COPY_PARALLEL else 1
    if (threads == 1 or type(src) is not np.ndarray or src.dtype != dst.dtype
            or src.shape != dst.shape
            or not (src.flags.c_contiguous and dst.flags.c_contiguous)):
        dst[...] = src
        return
    key = (nbytes, threads)
    found = _COPY_SPLITS.get(key)
    if found is None:
        if len(_COPY_SPLITS) > 4096:  # sizes of many models in one process: start over
            _COPY_SPLITS.clear()
        ranges = split_range(nbytes, threads, 64)
        found = _COPY_SPLITS[key] = NativeTasks(len(ranges))
        found.records[:, 0] = native_address(ctypes.memmove)
        found.records[:, 1:4] = [(lo, lo, hi - lo) for lo, hi in ranges]  # dst, src offsets
    found.launch(1, (dst.ctypes.data, src.ctypes.data), threads)
