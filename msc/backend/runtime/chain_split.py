"""Kernel steps that split across threads from inside a native chain.

A kernel step big enough to split used to leave its chain at more than one thread: the plan's
Python line called the kernel object, which launched its task lists on the native pool (for a
direct conv at batch 16, two launches per image: 32 pool round trips and a Python call per
conv). Here a kernel that can describe its work as independent *units* (the images of a batch,
the planes of a pool) gets a second entry for the chains run at more than one thread:

    dispatch(buffers..., scratch, want)   # one native call: msc_pool_run on a task list

The task list holds ``parts`` ranges of units, each a :class:`~.task_wrap.ChainEntry` sequence
of the kernel's own calls (exactly the calls its one-thread step makes for those units) with
its own part of the scratch, so any thread may run any part and the results do not depend on
who ran which. The step's buffers reach the tasks as the job's base pointers; ``want`` (the
helpers to wake, threads - 1) is a table slot the plan writes once per call. One pool round
trip per kernel, no Python between kernels: the chain stays whole at two threads.

A kernel offers this through ``native_parts(buffers)`` -> :class:`Parts` (or None), or, when
it already keeps a task list of its split whose columns take the step's buffers as bases
(the flat elementwise passes), ``native_tasks(buffers, parts)`` -> (task list, the step's
buffer index of each base, one-thread seconds). A kernel whose split is task lists of its
own, run one after another (the int8 kernels: a pad pass, then the windows), gives a *split
form* as the fifth item of its native signature: ``form(parts)`` -> :class:`Launches` (or
Parts, or None); the parallel entry then hands each list to the pool in turn from inside the
chain (one native dispatch per list, a list of one task run on the calling thread). Whether a
step splits is :mod:`.split_cost`'s measured break-even of this host (the kernel's
``splits`` flag where it gives no time).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .native_pool import get_pool, serial_runner
from .native_pool_ir import BASES, NATIVE_ARGS
from .split_cost import split_mode, worth_splitting
from .task_wrap import Buffer, ChainEntry
from .threads import NativeTasks, cpu_threads, split_range

__all__ = ["Launches", "ParallelEntry", "Parts", "split_step"]

PARTS_PER_THREAD = 2  # parts a thread may take: one slowed by other load takes fewer


@dataclass(frozen=True)
class Parts:
    """A kernel's work on fixed buffers as ``units`` independent units. ``calls(lo, hi,
    scratch, offset)``: the ``(cfunc, args)`` calls computing units ``lo..hi`` (args as for
    ChainEntry: ``Buffer(i)``, ``At(i, bytes)``, constants), their scratch at byte ``offset``
    of buffer ``scratch``; ``part_bytes``: the scratch bytes of a part of so many units (an
    int: the same for any part); ``seconds``: the one-thread time of one unit, as
    :mod:`.split_cost` estimates it (None: unknown, then the kernel's ``splits`` flag alone
    decides)."""

    units: int
    calls: Callable
    part_bytes: Callable | int
    seconds: float | None = None

    def scratch(self, units: int) -> int:
        """Scratch bytes of a part of ``units`` units, a whole number of cache lines."""
        found = self.part_bytes(units) if callable(self.part_bytes) else self.part_bytes
        return -(-int(found) // 64) * 64


@dataclass(frozen=True)
class Launches:
    """A kernel's split as task lists run one after another: ``launches`` holds ``(tasks,
    bases)`` pairs, each list's tasks independent of each other (any thread may run any),
    ``bases`` (up to BASES) added to its record columns 1.. as ``NativeTasks.launch`` adds
    them, each a ``Buffer(i)`` / ``At(i, bytes)`` of the step (inputs, outputs, then its
    scratch) or an int; an item may also be one ``(cfunc, args)`` call (args as for
    ChainEntry, on the step's buffers), run on the calling thread between the lists (a
    batch-1 conv's transposes around its split GEMM); ``scratch``: the bytes of step scratch the lists use; ``seconds``:
    the one-thread time of the whole step (None: unknown, then the kernel's ``splits`` flag
    decides)."""

    launches: tuple
    scratch: int = 0
    seconds: float | None = None

    @property
    def splits(self) -> bool:
        """Whether any list has two tasks or more: else there is nothing to hand over."""
        return any(tasks.n > 1 for tasks in self.lists())

    def lists(self) -> list:
        """The task lists among the items (the calls left out)."""
        return [item[0] for item in self.launches if isinstance(item[0], NativeTasks)]


class ParallelEntry:
    """The dispatch step of one kernel on fixed buffers (see the module docstring):
    ``address``, ``dims`` (its adapter and row), ``scratch`` bytes, ``status`` False (a task
    cannot fail), ``parts``. It keeps the pool, the task lists and the entries alive."""

    status = False

    def __init__(self, dispatch: ChainEntry, scratch: int, parts: int, keep=None):
        """``dispatch``: the ChainEntry of the step's calls, taking the step's buffers, its
        scratch and the helpers to wake (``want``) as parameters; ``scratch``: bytes."""
        self.dispatch, self.keep, self.parts = dispatch, keep, parts
        self.pool = get_pool()
        self.address, self.dims = int(dispatch.signature[0]), tuple(
            int(d) for d in dispatch.signature[1])
        self.scratch = scratch

    @classmethod
    def of_tasks(cls, tasks: NativeTasks, n_buffers: int, bases: tuple,
                 scratch: int = 0) -> ParallelEntry:
        """``tasks``, whose columns 1.. take the job's ``bases`` (the step's buffer indices,
        ``n_buffers`` being its scratch) added, as one dispatch."""
        launch = (tasks, tuple(Buffer(i) for i in bases))
        return cls.of_launches(Launches((launch,), scratch), n_buffers)

    @classmethod
    def of_launches(cls, launches: Launches, n_buffers: int) -> ParallelEntry:
        """Each list of ``launches`` in order: handed to the pool (one ``msc_pool_run``, the
        helpers to wake read from the step's parameter after its scratch), or run on this
        thread when it has one task."""
        pool, serial = get_pool(), serial_runner()
        want = Buffer(n_buffers + 1)
        calls = []
        for tasks, bases in launches.launches:
            if not isinstance(tasks, NativeTasks):  # a call on this thread
                calls.append((tasks, bases))
                continue
            if len(bases) > BASES:
                raise ValueError(f"at most {BASES} bases, got {len(bases)}")
            vector = [*bases, *(0,) * (BASES - len(bases))]
            records = tasks.records.ctypes.data
            calls.append((pool.run_entry, [pool.control, records, tasks.n, want, 1, *vector])
                         if tasks.n > 1 else (serial, [records, tasks.n, 1, *vector]))
        dispatch = ChainEntry.sequence(calls, buffers=n_buffers + 2)
        lists = launches.lists()
        return cls(dispatch, launches.scratch, max(tasks.n for tasks in lists), lists)

    @classmethod
    def of_parts(cls, parts: Parts, n_buffers: int, count: int) -> ParallelEntry:
        """``count`` ranges of the units of ``parts``, each a ChainEntry sequence of its
        calls (its own part of the scratch), as one task list."""
        scratch = n_buffers  # the step's buffer index of its scratch
        ranges = split_range(parts.units, count)
        step = max(parts.scratch(hi - lo) for lo, hi in ranges)
        entries = [ChainEntry.sequence(parts.calls(lo, hi, scratch, k * step),
                                       buffers=n_buffers + 1)
                   for k, (lo, hi) in enumerate(ranges)]
        tasks = NativeTasks(len(ranges))
        for k, entry in enumerate(entries):
            adapter, (row,) = entry.signature
            # columns 1..: the step's buffers and its scratch (the job's bases), then the row
            tasks.records[k, 0], tasks.records[k, n_buffers + 2] = adapter, row
        found = cls.of_tasks(tasks, n_buffers, tuple(range(n_buffers + 1)), len(ranges) * step)
        found.keep = (found.keep, entries)
        return found

    def __repr__(self) -> str:
        return f"ParallelEntry(parts={self.parts}, scratch={self.scratch})"


def split_step(kernel, buffers: list, splits: bool,
               form: Callable | None = None) -> ParallelEntry | bool | None:
    """How a chain step of ``kernel`` on ``buffers`` ((shape, dtype) of its inputs, then
    outputs) runs at more than one thread: a :class:`ParallelEntry` (split from inside the
    chain), False (on one thread, inside the chain: the measured cost says a split does not
    pay), or None (the kernel has no parts for these buffers: the kernel object splits when
    ``splits``, as before). ``splits`` is the kernel's own guess, used when it gives no time
    estimate; ``form``: the split form its native signature gave (the module docstring)."""
    if get_pool() is None or len(buffers) + 1 > min(BASES, NATIVE_ARGS - 1):
        return None
    # at least two parts, so that a forced split on a one-CPU host still runs the tasks
    count = PARTS_PER_THREAD * max(cpu_threads(), 2)
    if form is not None:
        return _formed(form(count), len(buffers), count, splits)
    tasks_of = getattr(kernel, "native_tasks", None)
    if tasks_of is not None:
        found = tasks_of(buffers, count)
        if found is None:
            return None
        tasks, bases, seconds = found
        if not _wanted(seconds, tasks.n, splits):
            return False
        return ParallelEntry.of_tasks(tasks, len(buffers), bases)
    parts_of = getattr(kernel, "native_parts", None)
    return _formed(parts_of(buffers) if parts_of is not None else None, len(buffers), count,
                   splits)


def _formed(found, n_buffers: int, count: int, splits: bool) -> ParallelEntry | bool | None:
    """The parallel entry of a kernel's :class:`Parts` or :class:`Launches` (None: it has
    none), or False when the split does not pay."""
    if isinstance(found, Launches):
        if not found.splits:
            return None
        # each list is a round trip of the pool: the step's time shared among them must
        # repay each one (a batch-1 conv's pad pass, parts and transpose are three)
        lists = len(found.lists())
        seconds = None if found.seconds is None else found.seconds / max(lists, 1)
        if not _wanted(seconds, count, splits):
            return False
        return ParallelEntry.of_launches(found, n_buffers)
    if found is None or found.units < 2:
        return None
    seconds = None if found.seconds is None else found.seconds * found.units
    if not _wanted(seconds, found.units, splits):
        return False
    return ParallelEntry.of_parts(found, n_buffers, min(found.units, count))


def _wanted(seconds: float | None, units: int, splits: bool) -> bool:
    """Whether a step of ``seconds`` on one thread (None: unknown, then the kernel's own
    ``splits``) in ``units`` independent units splits; ``$MSC_SPLIT`` overrides."""
    mode = split_mode()
    if mode != "measured":
        return mode == "always"
    if seconds is None:
        return splits
    return worth_splitting(seconds, min(units, cpu_threads()))
