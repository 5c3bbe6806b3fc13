"""A worker pool that lives in native code: it runs task lists (threads.NativeTasks) with no
Python and no GIL between the caller and its workers.

Each worker is a Python thread that makes ONE ctypes call, ``msc_pool_work``, which loops until
the pool stops: it waits for the control block's generation word to change (polling with
``pause`` for SPIN_SECONDS, then sleeping on a futex), joins the posted task list and claims
tasks from its atomic counter. A caller (``msc_pool_run``, also one ctypes call) takes the
pool's try-lock, publishes (records, n, counter), bumps the generation, wakes sleepers only
when some sleep, runs tasks itself, closes the list and waits until every worker that joined
has left. A worker that comes late finds the list closed (or empty) and goes back to waiting,
so a caller never waits for a worker that did not start. A caller that finds the pool busy
(another thread's VM, or a call made inside a task) runs its tasks alone: no deadlock, and
results do not depend on who ran which task.

Handshakes that must not be missed are store-then-load pairs on both sides, all seq_cst:
the caller stores ``open`` then reads ``active``, a worker adds to ``active`` then reads
``open``; the caller bumps ``generation`` then reads ``sleepers``, a sleeper adds to
``sleepers`` then reads ``generation`` (and the futex re-checks it). x86-64 Linux only (the
futex goes through libc's ``syscall``, passed in by address); elsewhere :func:`get_pool`
returns None and threads.py falls back to its Python pool.
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

__all__ = ["NATIVE_ARGS", "RECORD", "NativePool", "claim_ir", "get_pool", "shutdown"]

NATIVE_ARGS = 10  # integer / pointer arguments a native task may take
RECORD = NATIVE_ARGS + 1  # int64s per task: the function's address, then its arguments
SPIN_SECONDS = 2e-4  # how long a waiting thread polls before it sleeps (a futex wake ~40 us)
WORKER_NAME = "msc-worker-native-"  # threads.WORKER_PREFIX + "native-"

# Control block slots (int64). Words written by different sides sit on their own 64-byte line.
_SLOT_OF = {"GEN": 0, "ACTIVE": 8, "WAITING": 9, "OPEN": 16, "RECORDS": 17, "COUNT": 18,
            "NEXT": 19, "HELPERS": 20, "STOP": 21, "SLEEPERS": 24, "LOCK": 32}
_SLOTS = 40
_SYS_FUTEX, _WAIT, _WAKE = 202, 128, 129  # x86-64 syscall number; FUTEX_*_PRIVATE


def claim_ir(name: str, linkage: str = "") -> str:
    """IR of ``void name(i64* records, i64 n, i64* next)``: claims task indices from ``next``
    (an atomic counter) and calls each record's function with its NATIVE_ARGS int64
    arguments, until n are taken. On x86-64 and AArch64 a function taking fewer integer or
    pointer arguments (int32 included) reads its own from the same registers and stack slots,
    so one call signature serves every kernel entry."""
    args_ty = ", ".join(["i64"] * NATIVE_ARGS)
    loads = "".join(f"  %p{k} = getelementptr inbounds i64, i64* %rec, i64 {k + 1}\n"
                    f"  %a{k} = load i64, i64* %p{k}\n" for k in range(NATIVE_ARGS))
    call_args = ", ".join(f"i64 %a{k}" for k in range(NATIVE_ARGS))
    return f"""
define {linkage} void @{name}(i64* %records, i64 %n, i64* %next) {{
entry:
  br label %claim
claim:
  %i = atomicrmw add i64* %next, i64 1 monotonic
  %more = icmp slt i64 %i, %n
  br i1 %more, label %call, label %done
call:
  %base = mul i64 %i, {RECORD}
  %rec = getelementptr inbounds i64, i64* %records, i64 %base
  %raw = load i64, i64* %rec
  %fn = inttoptr i64 %raw to void ({args_ty})*
{loads}  call void %fn({call_args})
  br label %claim
done:
  ret void
}}
"""


def _fields() -> str:
    """Entry-block IR: ``%<slot>`` = i64* to each control slot (``%gen64`` / ``%active64`` for
    the two futex words, whose i32 views are ``%gen`` / ``%active``), their integer addresses
    and ``%sys``, libc's syscall."""
    names = {"GEN": "gen64", "ACTIVE": "active64"}
    lines = [f"  %{names.get(n, n.lower())} = getelementptr inbounds i64, i64* %ctrl, "
             f"i64 {slot}" for n, slot in _SLOT_OF.items()]
    lines += ["  %gen = bitcast i64* %gen64 to i32*",
              "  %active = bitcast i64* %active64 to i32*",
              "  %genaddr = ptrtoint i32* %gen to i64",
              "  %actaddr = ptrtoint i32* %active to i64",
              "  %sys = inttoptr i64 %syscall to i64 (i64, ...)*"]
    return "\n".join(lines)


def _futex(result: str, addr: str, op: int, value: str) -> str:
    return (f"  {result} = call i64 (i64, ...) %sys(i64 {_SYS_FUTEX}, i64 {addr}, i64 {op}, "
            f"i64 {value}, i64 0, i64 0, i64 0)\n")


def _spin_wait(label: str, ready: str, fail: str, test: str) -> str:
    """Blocks ``label``..: evaluate ``test`` (IR setting %<label>.ok) until true (go to
    ``ready``) or %ticks cycles pass (go to ``fail``), with ``pause`` between polls."""
    return f"""{label}:
  %{label}.start = call i64 @llvm.readcyclecounter()
  br label %{label}.poll
{label}.poll:
{test}  br i1 %{label}.ok, label %{ready}, label %{label}.pause
{label}.pause:
  call void @llvm.x86.sse2.pause()
  %{label}.now = call i64 @llvm.readcyclecounter()
  %{label}.spent = sub i64 %{label}.now, %{label}.start
  %{label}.more = icmp ult i64 %{label}.spent, %ticks
  br i1 %{label}.more, label %{label}.poll, label %{fail}
"""


def _worker_ir() -> str:
    poll = ("  %seen = load i32, i32* %seenp\n"
            "  %g = load atomic i32, i32* %gen acquire, align 4\n"
            "  %wait.ok = icmp ne i32 %g, %seen\n")
    return f"""
define void @msc_pool_work(i64* %ctrl, i64 %syscall, i64 %ticks) {{
entry:
{_fields()}
  %seenp = alloca i32
  %first = load atomic i32, i32* %gen seq_cst, align 4
  store i32 %first, i32* %seenp
  %stop0 = load atomic i64, i64* %stop seq_cst, align 8
  %stopped = icmp ne i64 %stop0, 0
  br i1 %stopped, label %exit, label %wait
{_spin_wait("wait", "woke", "sleep", poll)}sleep:
  %s0 = atomicrmw add i64* %sleepers, i64 1 seq_cst
  %g2 = load atomic i32, i32* %gen seq_cst, align 4
  %seen2 = load i32, i32* %seenp
  %same = icmp eq i32 %g2, %seen2
  br i1 %same, label %futex, label %awake
futex:
  %seen64 = zext i32 %seen2 to i64
{_futex("%r0", "%genaddr", _WAIT, "%seen64")}  br label %awake
awake:
  %s1 = atomicrmw sub i64* %sleepers, i64 1 seq_cst
  br label %wait
woke:
  store i32 %g, i32* %seenp
  %stopv = load atomic i64, i64* %stop acquire, align 8
  %stopping = icmp ne i64 %stopv, 0
  br i1 %stopping, label %exit, label %join
join:
  %old = atomicrmw add i32* %active, i32 1 seq_cst
  %isopen = load atomic i64, i64* %open seq_cst, align 8
  %want = load i64, i64* %helpers
  %old64 = sext i32 %old to i64
  %room = icmp slt i64 %old64, %want
  %opened = icmp ne i64 %isopen, 0
  %go = and i1 %room, %opened
  br i1 %go, label %run, label %leave
run:
  %recv = load i64, i64* %records
  %recp = inttoptr i64 %recv to i64*
  %n = load i64, i64* %count
  %nextv = load i64, i64* %next
  %nextp = inttoptr i64 %nextv to i64*
  call void @msc_pool_claim(i64* %recp, i64 %n, i64* %nextp)
  br label %leave
leave:
  %left = atomicrmw sub i32* %active, i32 1 seq_cst
  %last = icmp eq i32 %left, 1
  br i1 %last, label %check, label %wait
check:
  %w = load atomic i64, i64* %waiting seq_cst, align 8
  %wants = icmp ne i64 %w, 0
  br i1 %wants, label %wake, label %wait
wake:
{_futex("%r1", "%actaddr", _WAKE, "1")}  br label %wait
exit:
  ret void
}}
"""


def _caller_ir() -> str:
    idle = ("  %a = load atomic i32, i32* %active seq_cst, align 4\n"
            "  %drain.ok = icmp eq i32 %a, 0\n")
    return f"""
define i64 @msc_pool_run(i64* %ctrl, i64 %recv, i64 %n, i64* %nextp, i64 %want,
                         i64 %syscall, i64 %ticks) {{
entry:
{_fields()}
  %recp = inttoptr i64 %recv to i64*
  store atomic i64 0, i64* %nextp seq_cst, align 8
  %pair = cmpxchg i64* %lock, i64 0, i64 1 acquire monotonic
  %won = extractvalue {{i64, i1}} %pair, 1
  br i1 %won, label %publish, label %alone
alone:
  call void @msc_pool_claim(i64* %recp, i64 %n, i64* %nextp)
  ret i64 0
publish:
  store i64 %recv, i64* %records
  store i64 %n, i64* %count
  %nextv = ptrtoint i64* %nextp to i64
  store i64 %nextv, i64* %next
  store i64 %want, i64* %helpers
  store atomic i64 1, i64* %open seq_cst, align 8
  %g = atomicrmw add i32* %gen, i32 1 seq_cst
  %s = load atomic i64, i64* %sleepers seq_cst, align 8
  %any = icmp ne i64 %s, 0
  br i1 %any, label %wake, label %work
wake:
{_futex("%r0", "%genaddr", _WAKE, "%want")}  br label %work
work:
  call void @msc_pool_claim(i64* %recp, i64 %n, i64* %nextp)
  store atomic i64 0, i64* %open seq_cst, align 8
  br label %drain
{_spin_wait("drain", "done", "sleep", idle)}sleep:
  store atomic i64 1, i64* %waiting seq_cst, align 8
  %a2 = load atomic i32, i32* %active seq_cst, align 4
  %busy = icmp ne i32 %a2, 0
  br i1 %busy, label %futex, label %woken
futex:
  %a64 = zext i32 %a2 to i64
{_futex("%r1", "%actaddr", _WAIT, "%a64")}  br label %woken
woken:
  store atomic i64 0, i64* %waiting seq_cst, align 8
  %a3 = load atomic i32, i32* %active seq_cst, align 4
  %idle = icmp eq i32 %a3, 0
  br i1 %idle, label %done, label %sleep
done:
  store atomic i64 0, i64* %lock release, align 8
  ret i64 1
}}
"""


def _stop_ir() -> str:
    return f"""
define void @msc_pool_stop(i64* %ctrl, i64 %syscall) {{
entry:
{_fields()}
  store atomic i64 1, i64* %stop seq_cst, align 8
  %g = atomicrmw add i32* %gen, i32 1 seq_cst
{_futex("%r", "%genaddr", _WAKE, "2147483647")}  ret void
}}

define i64 @msc_pool_cycles() {{
entry:
  %t = call i64 @llvm.readcyclecounter()
  ret i64 %t
}}
"""


def pool_ir() -> str:
    """The whole module: worker loop, caller, stop, cycle counter and the claim loop."""
    return ("declare i64 @llvm.readcyclecounter()\ndeclare void @llvm.x86.sse2.pause()\n"
            + claim_ir("msc_pool_claim", "internal") + _worker_ir() + _caller_ir()
            + _stop_ir())


_ENTRIES = ["msc_pool_work", "msc_pool_run", "msc_pool_stop", "msc_pool_cycles"]


@functools.cache
def _native():
    """(work, run, stop, syscall address, ticks per SPIN_SECONDS), or None where the pool
    cannot run (not x86-64 Linux, no libc ``syscall``)."""
    from ..llvm.jit import get_jit, host_target

    if not (sys.platform.startswith("linux") and host_target().triple.startswith("x86_64")):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        syscall = ctypes.cast(libc.syscall, ctypes.c_void_p).value
    except (OSError, AttributeError):
        return None
    lib = get_jit().compile(pool_ir(), _ENTRIES, name="msc_native_pool")
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    work = lib.cfunc("msc_pool_work", None, ptr, i64, i64)
    run = lib.cfunc("msc_pool_run", i64, ptr, i64, i64, ptr, i64, i64, i64)
    stop = lib.cfunc("msc_pool_stop", None, ptr, i64)
    cycles = lib.cfunc("msc_pool_cycles", i64)
    start, t0 = cycles(), time.perf_counter()
    time.sleep(0.002)
    rate = (cycles() - start) / max(time.perf_counter() - t0, 1e-6)
    return work, run, stop, syscall, max(int(rate * SPIN_SECONDS), 1)


class NativePool:
    """The control block and the worker threads (started on demand, daemons, named
    WORKER_NAME + index). :meth:`run` is the only hot path: one ctypes call."""

    def __init__(self, native):
        self._work, self._run, self._stop, self._syscall, self._ticks = native
        self._raw = np.zeros(_SLOTS + 8, np.int64)  # 64-byte aligned view below
        skip = (-self._raw.ctypes.data % 64) // 8
        self.ctrl = self._raw[skip:skip + _SLOTS]
        self._ptr = self.ctrl.ctypes.data
        self.workers: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.stopped = False

    def run(self, records: int, n: int, next_ptr: int, threads: int) -> bool:
        """Run the ``n`` task records at address ``records`` on up to ``threads`` threads
        (this one included); ``next_ptr``: the list's int64 claim counter. False when the
        pool was busy and this thread ran them alone."""
        if len(self.workers) < threads - 1:
            self._grow(threads - 1)
        return bool(self._run(self._ptr, records, n, next_ptr, threads - 1, self._syscall,
                              self._ticks))

    def _grow(self, count: int) -> None:
        with self._lock:
            while len(self.workers) < count and not self.stopped:
                worker = threading.Thread(
                    target=self._work, args=(self._ptr, self._syscall, self._ticks),
                    daemon=True, name=f"{WORKER_NAME}{len(self.workers)}")
                worker.start()
                self.workers.append(worker)

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop the workers (each finishes the task it runs) and join them."""
        with self._lock:
            self.stopped = True
            workers, self.workers = self.workers, []
        self._stop(self._ptr, self._syscall)
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
