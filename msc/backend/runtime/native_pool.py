"""A worker pool that lives in native code: it runs task lists (threads.NativeTasks) with no
Python and no GIL between the caller and its workers.

Each worker is a Python thread that makes ONE ctypes call, ``msc_pool_work``, which loops until
the pool stops: it waits for the control block's generation word to change (polling with
``pause`` for SPIN_SECONDS, then sleeping on a futex) and then claims tasks of the posted job.
A caller (``msc_pool_run``, also one ctypes call) takes the pool's try-lock, writes the job
(records, n, threads wanted) into the next of four descriptors, opens it in the CLAIM word
(job id << 32 | next task), bumps the generation, wakes sleepers only when some sleep, claims
tasks itself and, when none is left, waits until the DONE count reaches n.

A worker claims with a compare-and-swap on CLAIM after reading the job's descriptor between
two reads of its sequence word (a seqlock), so a worker that comes late, or was preempted
while reading, cannot take a task of another job; and the caller waits only for tasks that
were claimed, never for a worker that did not start (which matters when other processes hold
the cores). A caller that finds the pool busy (another thread's VM, or a call made inside a
task) runs its tasks alone: no deadlock, and results do not depend on who ran which task.
Sleep / wake handshakes are store-then-load pairs, all seq_cst, on both sides, and the futex
re-checks the word. x86-64 Linux only (the futex goes through libc's ``syscall``, passed in
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

__all__ = ["NATIVE_ARGS", "RECORD", "NativePool", "claim_ir", "get_pool", "shutdown"]

NATIVE_ARGS = 10  # integer / pointer arguments a native task may take
RECORD = NATIVE_ARGS + 1  # int64s per task: the function's address, then its arguments
SPIN_SECONDS = 2e-4  # how long a waiting thread polls before it sleeps (a futex wake ~40 us)
WORKER_NAME = "msc-worker-native-"  # threads.WORKER_PREFIX + "native-"

# Control block slots (int64). Words written by different sides sit on their own 64-byte line.
# CLAIM packs (job id << 32 | next task index); DESC: four job descriptors (seq, records, n,
# want) that jobs use in turn, so a worker that read a stale job id finds another seq.
_SLOT_OF = {"GEN": 0, "CLAIM": 8, "DONE": 16, "WAITING": 17, "SLEEPERS": 24, "LOCK": 32,
            "STOP": 33, "DESC": 40}
_SLOTS = 56
_SYS_FUTEX, _WAIT, _WAKE = 202, 128, 129  # x86-64 syscall number; FUTEX_*_PRIVATE


def claim_ir(name: str, linkage: str = "") -> str:
    """IR of ``void name(i64* records, i64 n, i64* next)``: claims task indices from ``next``
    (an atomic counter) and calls each record's function with its NATIVE_ARGS int64
    arguments, until n are taken. On x86-64 and AArch64 a function taking fewer integer or
    pointer arguments (int32 included) reads its own from the same registers and stack slots,
    so one call signature serves every kernel entry."""
    return f"""
define {linkage} void @{name}(i64* %records, i64 %n, i64* %next) {{
entry:
  %recv = ptrtoint i64* %records to i64
  br label %claim
claim:
  %i = atomicrmw add i64* %next, i64 1 monotonic
  %more = icmp slt i64 %i, %n
  br i1 %more, label %call, label %done
call:
{_call("%t", "%recv", "%i")}  br label %claim
done:
  ret void
}}
"""


def _fields() -> str:
    """Entry-block IR: ``%<slot>`` = i64* to each control slot, the i32 views ``%gen`` and
    ``%done`` (futex words) and their integer addresses, and ``%sys``, libc's syscall."""
    lines = [f"  %{n.lower()}64 = getelementptr inbounds i64, i64* %ctrl, i64 {slot}"
             for n, slot in _SLOT_OF.items()]
    for word in ("gen", "done"):
        lines += [f"  %{word} = bitcast i64* %{word}64 to i32*",
                  f"  %{word}addr = ptrtoint i32* %{word} to i64"]
    lines.append("  %sys = inttoptr i64 %syscall to i64 (i64, ...)*")
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


def _desc(prefix: str, jid: str) -> str:
    """IR: pointers %<prefix>.seq/.records/.n/.want to the fields of job ``jid``'s descriptor."""
    lines = [f"  {prefix}.slot = and i64 {jid}, 3",
             f"  {prefix}.off = mul i64 {prefix}.slot, 4",
             f"  {prefix}.base = getelementptr inbounds i64, i64* %desc64, i64 {prefix}.off"]
    for k, field in enumerate(("seq", "records", "n", "want")):
        lines.append(f"  {prefix}.{field} = getelementptr inbounds i64, i64* {prefix}.base, "
                     f"i64 {k}")
    return "\n".join(lines) + "\n"


def _worker_ir() -> str:
    poll = ("  %seen = load i32, i32* %seenp\n"
            "  %g = load atomic i32, i32* %gen acquire, align 4\n"
            "  %wait.ok = icmp ne i32 %g, %seen\n")
    return f"""
define void @msc_pool_work(i64* %ctrl, i64 %syscall, i64 %ticks, i64 %index) {{
entry:
{_fields()}
  %seenp = alloca i32
  %first = load atomic i32, i32* %gen seq_cst, align 4
  store i32 %first, i32* %seenp
  %stop0 = load atomic i64, i64* %stop64 seq_cst, align 8
  %stopped = icmp ne i64 %stop0, 0
  br i1 %stopped, label %exit, label %wait
{_spin_wait("wait", "woke", "sleep", poll)}sleep:
  %s0 = atomicrmw add i64* %sleepers64, i64 1 seq_cst
  %g2 = load atomic i32, i32* %gen seq_cst, align 4
  %seen2 = load i32, i32* %seenp
  %same = icmp eq i32 %g2, %seen2
  br i1 %same, label %futex, label %awake
futex:
  %seen64 = zext i32 %seen2 to i64
{_futex("%r0", "%genaddr", _WAIT, "%seen64")}  br label %awake
awake:
  %s1 = atomicrmw sub i64* %sleepers64, i64 1 seq_cst
  br label %wait
woke:
  store i32 %g, i32* %seenp
  %stopv = load atomic i64, i64* %stop64 acquire, align 8
  %stopping = icmp ne i64 %stopv, 0
  br i1 %stopping, label %exit, label %claim
claim:
  %c = load atomic i64, i64* %claim64 acquire, align 8
  %jid = lshr i64 %c, 32
  %idx = and i64 %c, 4294967295
{_desc("%d", "%jid")}  %seq1 = load atomic i64, i64* %d.seq acquire, align 8
  %recv = load atomic i64, i64* %d.records monotonic, align 8
  %n = load atomic i64, i64* %d.n monotonic, align 8
  %want = load atomic i64, i64* %d.want monotonic, align 8
  fence acquire
  %seq2 = load atomic i64, i64* %d.seq monotonic, align 8
  %ok1 = icmp eq i64 %seq1, %jid
  %ok2 = icmp eq i64 %seq2, %jid
  %ok3 = icmp ult i64 %idx, %n
  %ok4 = icmp ult i64 %index, %want
  %ok12 = and i1 %ok1, %ok2
  %ok34 = and i1 %ok3, %ok4
  %ok = and i1 %ok12, %ok34
  br i1 %ok, label %take, label %wait
take:
  %c1 = add i64 %c, 1
  %pair = cmpxchg i64* %claim64, i64 %c, i64 %c1 acq_rel monotonic
  %won = extractvalue {{i64, i1}} %pair, 1
  br i1 %won, label %run, label %claim
run:
{_call("%t", "%recv", "%idx")}  %before = atomicrmw add i32* %done, i32 1 seq_cst
  %after = add i32 %before, 1
  %n32 = trunc i64 %n to i32
  %last = icmp eq i32 %after, %n32
  br i1 %last, label %check, label %claim
check:
  %w = load atomic i64, i64* %waiting64 seq_cst, align 8
  %wants = icmp ne i64 %w, 0
  br i1 %wants, label %wake, label %claim
wake:
{_futex("%r1", "%doneaddr", _WAKE, "1")}  br label %claim
exit:
  ret void
}}
"""


def _call(prefix: str, records: str, index: str) -> str:
    """IR: call task ``index`` of the records at integer address ``records``."""
    args_ty = ", ".join(["i64"] * NATIVE_ARGS)
    lines = [f"  {prefix}.rp = inttoptr i64 {records} to i64*",
             f"  {prefix}.base = mul i64 {index}, {RECORD}",
             f"  {prefix}.rec = getelementptr inbounds i64, i64* {prefix}.rp, i64 {prefix}.base",
             f"  {prefix}.raw = load i64, i64* {prefix}.rec",
             f"  {prefix}.fn = inttoptr i64 {prefix}.raw to void ({args_ty})*"]
    for k in range(NATIVE_ARGS):
        lines += [f"  {prefix}.p{k} = getelementptr inbounds i64, i64* {prefix}.rec, i64 {k + 1}",
                  f"  {prefix}.a{k} = load i64, i64* {prefix}.p{k}"]
    args = ", ".join(f"i64 {prefix}.a{k}" for k in range(NATIVE_ARGS))
    lines.append(f"  call void {prefix}.fn({args})")
    return "\n".join(lines) + "\n"


def _caller_ir() -> str:
    drained = ("  %left = load atomic i32, i32* %done acquire, align 4\n"
               "  %drain.ok = icmp eq i32 %left, %n32\n")
    return f"""
define i64 @msc_pool_run(i64* %ctrl, i64 %recv, i64 %n, i64* %nextp, i64 %want,
                         i64 %syscall, i64 %ticks) {{
entry:
{_fields()}
  %n32 = trunc i64 %n to i32
  %pair = cmpxchg i64* %lock64, i64 0, i64 1 acquire monotonic
  %won = extractvalue {{i64, i1}} %pair, 1
  br i1 %won, label %publish, label %alone
alone:
  %recp = inttoptr i64 %recv to i64*
  store i64 0, i64* %nextp
  call void @msc_pool_claim(i64* %recp, i64 %n, i64* %nextp)
  ret i64 0
publish:
  %c0 = load atomic i64, i64* %claim64 monotonic, align 8
  %j0 = lshr i64 %c0, 32
  %j1 = add i64 %j0, 1
  %jid = and i64 %j1, 4294967295
{_desc("%d", "%jid")}  store atomic i64 -1, i64* %d.seq monotonic, align 8
  fence release
  store atomic i64 %recv, i64* %d.records monotonic, align 8
  store atomic i64 %n, i64* %d.n monotonic, align 8
  store atomic i64 %want, i64* %d.want monotonic, align 8
  store atomic i32 0, i32* %done monotonic, align 4
  store atomic i64 %jid, i64* %d.seq release, align 8
  %opened = shl i64 %jid, 32
  store atomic i64 %opened, i64* %claim64 seq_cst, align 8
  %jid32 = trunc i64 %jid to i32
  store atomic i32 %jid32, i32* %gen seq_cst, align 4
  %s = load atomic i64, i64* %sleepers64 seq_cst, align 8
  %any = icmp ne i64 %s, 0
  br i1 %any, label %wake, label %claim
wake:
{_futex("%r0", "%genaddr", _WAKE, "%want")}  br label %claim
claim:
  %c = atomicrmw add i64* %claim64, i64 1 acq_rel
  %idx = and i64 %c, 4294967295
  %more = icmp ult i64 %idx, %n
  br i1 %more, label %run, label %drain
run:
{_call("%t", "%recv", "%idx")}  %before = atomicrmw add i32* %done, i32 1 seq_cst
  br label %claim
{_spin_wait("drain", "finish", "sleep", drained)}sleep:
  store atomic i64 1, i64* %waiting64 seq_cst, align 8
  %now = load atomic i32, i32* %done seq_cst, align 4
  %busy = icmp ne i32 %now, %n32
  br i1 %busy, label %futex, label %woken
futex:
  %now64 = zext i32 %now to i64
{_futex("%r1", "%doneaddr", _WAIT, "%now64")}  br label %woken
woken:
  store atomic i64 0, i64* %waiting64 seq_cst, align 8
  %after = load atomic i32, i32* %done acquire, align 4
  %all = icmp eq i32 %after, %n32
  br i1 %all, label %finish, label %sleep
finish:
  store atomic i64 0, i64* %lock64 release, align 8
  ret i64 1
}}
"""


def _stop_ir() -> str:
    return f"""
define void @msc_pool_stop(i64* %ctrl, i64 %syscall) {{
entry:
{_fields()}
  store atomic i64 1, i64* %stop64 seq_cst, align 8
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
    work = lib.cfunc("msc_pool_work", None, ptr, i64, i64, i64)
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
                    target=self._work,
                    args=(self._ptr, self._syscall, self._ticks, len(self.workers)),
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
