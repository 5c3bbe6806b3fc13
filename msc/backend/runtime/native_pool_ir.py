"""LLVM IR of the native pool (native_pool.py) and of the task loops threads.py runs without it.

A task record is NATIVE_ARGS + 1 int64s: the function's address, then its arguments. A job may
add BASES pointers to the arguments from a column on (``first``), so a kernel keeps byte
offsets in its records and passes only the tensors' addresses per call (no record rewrite).

Control block (int64 slots; words written by different sides on their own 64-byte line):
GEN, the generation workers poll; CLAIM, (job id << 32 | next task index); DONE, tasks
finished in the current job (futex word of a waiting caller) and WAITING, whether one sleeps
on it; CALLER_CPU / WORKER_CPU, the CPUs the last caller and the last worker to take a task
ran on; LOCK, the callers' try-lock; STOP; SYSCALL and GETCPU, libc's syscall and
sched_getcpu; TICKS, cycles a waiter polls before it sleeps; DESC, four job descriptors used in turn: seq (the job id once complete, -1 while written),
records, n, want (helpers wanted: worker i joins when i < want), the job's base vector; then
from WORKERS one line per worker: its bell (futex word it sleeps on) and its asleep flag.
"""

from __future__ import annotations

__all__ = ["BASES", "DESC_SLOTS", "NATIVE_ARGS", "POOL_ENTRIES", "RECORD", "SLOTS", "SLOT_OF",
           "TASKS_ENTRIES", "pool_ir", "tasks_ir"]

NATIVE_ARGS = 10  # integer / pointer arguments a native task may take
RECORD = NATIVE_ARGS + 1  # int64s per task: the function's address, then its arguments
BASES = 8  # pointers a job may add to its tasks' arguments
_VECTOR = NATIVE_ARGS + BASES  # base vector slots: zeros, the bases from column first - 1
DESC_SLOTS = 32  # per descriptor: seq, records, n, want, base vector (4 + 18), padded
SLOT_OF = {"GEN": 0, "CALLER_CPU": 1, "CLAIM": 8, "DONE": 16, "WAITING": 17, "WORKER_CPU": 18,
           "LOCK": 32, "STOP": 33, "SYSCALL": 40, "GETCPU": 41, "TICKS": 42,
           "DESC": 48}
WORKERS = SLOT_OF["DESC"] + 4 * DESC_SLOTS  # then one line per worker: its bell and asleep flag
MAX_WORKERS = 255
SLOTS = WORKERS + 8 * MAX_WORKERS
_SYS_FUTEX, _WAIT, _WAKE = 202, 128, 129  # x86-64 syscall number; FUTEX_*_PRIVATE
_LOW32 = 4294967295

POOL_ENTRIES = ["msc_pool_work", "msc_pool_run", "msc_pool_stop", "msc_pool_cycles"]
TASKS_ENTRIES = ["msc_tasks_claim", "msc_tasks_serial"]
_BASE_ARGS = ", ".join(f"i64 %b{j}" for j in range(BASES))


def _call(p: str, records: str, index: str, bases: str | None) -> str:
    """IR: call task ``index`` of the records at integer address ``records``, adding the
    i64* vector ``bases`` (NATIVE_ARGS entries) to its arguments. On x86-64 and AArch64 a
    function taking fewer integer or pointer arguments (int32 included) reads its own from the
    same registers and stack slots, so one call signature serves every kernel entry."""
    args_ty = ", ".join(["i64"] * NATIVE_ARGS)
    lines = [f"  {p}.rp = inttoptr i64 {records} to i64*",
             f"  {p}.at = mul i64 {index}, {RECORD}",
             f"  {p}.rec = getelementptr inbounds i64, i64* {p}.rp, i64 {p}.at",
             f"  {p}.raw = load i64, i64* {p}.rec",
             f"  {p}.fn = inttoptr i64 {p}.raw to void ({args_ty})*"]
    for k in range(NATIVE_ARGS):
        value = f"{p}.a{k}" if bases is None else f"{p}.v{k}"
        lines += [f"  {p}.p{k} = getelementptr inbounds i64, i64* {p}.rec, i64 {k + 1}",
                  f"  {value} = load i64, i64* {p}.p{k}"]
        if bases is not None:
            lines += [f"  {p}.q{k} = getelementptr inbounds i64, i64* {bases}, i64 {k}",
                      f"  {p}.o{k} = load i64, i64* {p}.q{k}",
                      f"  {p}.a{k} = add i64 {value}, {p}.o{k}"]
    args = ", ".join(f"i64 {p}.a{k}" for k in range(NATIVE_ARGS))
    lines.append(f"  call void {p}.fn({args})")
    return "\n".join(lines) + "\n"


def _fill_bases(vector: str) -> str:
    """IR: zero the i64* ``vector`` (_VECTOR slots), then store %b0.. at %first - 1 on."""
    lines = [f"  %fz{k} = getelementptr inbounds i64, i64* {vector}, i64 {k}\n"
             f"  store i64 0, i64* %fz{k}" for k in range(_VECTOR)]
    lines.append("  %fat = add i64 %first, -1")
    for j in range(BASES):
        lines += [f"  %fi{j} = add i64 %fat, {j}",
                  f"  %fb{j} = getelementptr inbounds i64, i64* {vector}, i64 %fi{j}",
                  f"  store i64 %b{j}, i64* %fb{j}"]
    return "\n".join(lines) + "\n"


def _serial(name: str, linkage: str) -> str:
    """``void name(i64 records, i64 n, i64 first, i64 b0..)``: every task, in order, on this
    thread, with the bases added."""
    return f"""
define {linkage} void @{name}(i64 %recv, i64 %n, i64 %first, {_BASE_ARGS}) {{
entry:
  %vector = alloca [{_VECTOR} x i64]
  %vec = getelementptr inbounds [{_VECTOR} x i64], [{_VECTOR} x i64]* %vector, i64 0, i64 0
{_fill_bases("%vec")}  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %call]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %call, label %done
call:
{_call("%t", "%recv", "%i", "%vec")}  %i1 = add i64 %i, 1
  br label %loop
done:
  ret void
}}
"""


def tasks_ir() -> str:
    """Host-neutral module: ``msc_tasks_claim(records*, n, next*)`` claims task indices from
    the atomic counter ``next`` until n are taken (each thread of a Python ``parallel_for``
    runs one), and ``msc_tasks_serial`` (see _serial)."""
    return f"""
define void @msc_tasks_claim(i64* %records, i64 %n, i64* %next) {{
entry:
  %recv = ptrtoint i64* %records to i64
  br label %claim
claim:
  %i = atomicrmw add i64* %next, i64 1 monotonic
  %more = icmp slt i64 %i, %n
  br i1 %more, label %call, label %done
call:
{_call("%t", "%recv", "%i", None)}  br label %claim
done:
  ret void
}}
""" + _serial("msc_tasks_serial", "")


def _fields() -> str:
    """Entry-block IR: ``%<slot>64`` = i64* to each control slot, the i32 views ``%gen`` and
    ``%done`` (futex words) and their integer addresses, ``%sys`` (libc's syscall) and
    ``%ticks``."""
    lines = [f"  %{n.lower()}64 = getelementptr inbounds i64, i64* %ctrl, i64 {slot}"
             for n, slot in SLOT_OF.items()]
    for word in ("gen", "done"):
        lines += [f"  %{word} = bitcast i64* %{word}64 to i32*",
                  f"  %{word}addr = ptrtoint i32* %{word} to i64"]
    lines += ["  %syscall = load i64, i64* %syscall64",
              "  %sys = inttoptr i64 %syscall to i64 (i64, ...)*",
              "  %getcpuv = load i64, i64* %getcpu64",
              "  %getcpu = inttoptr i64 %getcpuv to i32 ()*",
              "  %ticks = load i64, i64* %ticks64"]
    return "\n".join(lines)


def _futex(result: str, addr: str, op: int, value: str) -> str:
    return (f"  {result} = call i64 (i64, ...) %sys(i64 {_SYS_FUTEX}, i64 {addr}, i64 {op}, "
            f"i64 {value}, i64 0, i64 0, i64 0)\n")


def _spin_wait(label: str, ready: str, fail: str, test: str, other_cpu: str) -> str:
    """Blocks ``label``..: evaluate ``test`` (IR setting %<label>.ok) until true (go to
    ``ready``), with ``pause`` between polls, or go to ``fail`` (sleep) after %ticks cycles
    or as soon as this thread runs on the CPU in slot ``other_cpu``: the thread it waits for
    shares its core then, and polling would only take time from it."""
    return f"""{label}:
  %{label}.start = call i64 @llvm.readcyclecounter()
  br label %{label}.poll
{label}.poll:
{test}  br i1 %{label}.ok, label %{ready}, label %{label}.pause
{label}.pause:
  call void @llvm.x86.sse2.pause()
  %{label}.now = call i64 @llvm.readcyclecounter()
  %{label}.spent = sub i64 %{label}.now, %{label}.start
  %{label}.early = icmp ult i64 %{label}.spent, %ticks
  %{label}.cpu32 = call i32 %getcpu()
  %{label}.cpu = sext i32 %{label}.cpu32 to i64
  %{label}.other = load atomic i64, i64* %{other_cpu} monotonic, align 8
  %{label}.apart = icmp ne i64 %{label}.cpu, %{label}.other
  br i1 %{label}.apart, label %{label}.time, label %{fail}
{label}.time:
  br i1 %{label}.early, label %{label}.poll, label %{fail}
"""


def _desc(p: str, jid: str) -> str:
    """IR: pointers %<p>.seq/.records/.n/.want/.vector to job ``jid``'s descriptor."""
    lines = [f"  {p}.slot = and i64 {jid}, 3",
             f"  {p}.off = mul i64 {p}.slot, {DESC_SLOTS}",
             f"  {p}.base = getelementptr inbounds i64, i64* %desc64, i64 {p}.off"]
    for k, field in enumerate(("seq", "records", "n", "want", "vector")):
        lines.append(f"  {p}.{field} = getelementptr inbounds i64, i64* {p}.base, i64 {k}")
    return "\n".join(lines) + "\n"


def _worker_ir() -> str:
    poll = ("  %seen = load i32, i32* %seenp\n"
            "  %g = load atomic i32, i32* %gen acquire, align 4\n"
            "  %wait.ok = icmp ne i32 %g, %seen\n")
    return f"""
define void @msc_pool_work(i64* %ctrl, i64 %index) {{
entry:
{_fields()}
  %seenp = alloca i32
  %mine = mul i64 %index, 8
  %mine0 = add i64 %mine, {WORKERS}
  %mine1 = add i64 %mine, {WORKERS + 1}
  %bell64 = getelementptr inbounds i64, i64* %ctrl, i64 %mine0
  %bell = bitcast i64* %bell64 to i32*
  %belladdr = ptrtoint i32* %bell to i64
  %asleep = getelementptr inbounds i64, i64* %ctrl, i64 %mine1
  %first = load atomic i32, i32* %gen seq_cst, align 4
  store i32 %first, i32* %seenp
  %stop0 = load atomic i64, i64* %stop64 seq_cst, align 8
  %stopped = icmp ne i64 %stop0, 0
  br i1 %stopped, label %exit, label %claim  ; a new worker joins the job posted before it ran
{_spin_wait("wait", "woke", "sleep", poll, "caller_cpu64")}sleep:
  ; each worker sleeps on its own bell, so a caller wakes exactly the workers it wants
  %b0 = load atomic i32, i32* %bell seq_cst, align 4
  store atomic i64 1, i64* %asleep seq_cst, align 8
  %g2 = load atomic i32, i32* %gen seq_cst, align 4
  %seen2 = load i32, i32* %seenp
  %same = icmp eq i32 %g2, %seen2
  br i1 %same, label %futex, label %awake
futex:
  %b064 = zext i32 %b0 to i64
{_futex("%r0", "%belladdr", _WAIT, "%b064")}  br label %awake
awake:
  store atomic i64 0, i64* %asleep seq_cst, align 8
  br label %wait
woke:
  store i32 %g, i32* %seenp
  %stopv = load atomic i64, i64* %stop64 acquire, align 8
  %stopping = icmp ne i64 %stopv, 0
  br i1 %stopping, label %exit, label %claim
claim:
  %c = load atomic i64, i64* %claim64 acquire, align 8
  %jid = lshr i64 %c, 32
  %idx = and i64 %c, {_LOW32}
{_desc("%d", "%jid")}  %seq1 = load atomic i64, i64* %d.seq acquire, align 8
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
  ; the job cannot change before this task is counted done: its descriptor stays valid
  %mycpu32 = call i32 %getcpu()
  %mycpu = sext i32 %mycpu32 to i64
  store atomic i64 %mycpu, i64* %worker_cpu64 monotonic, align 8
  %recv = load i64, i64* %d.records
{_call("%t", "%recv", "%idx", "%d.vector")}  %before = atomicrmw add i32* %done, i32 1 seq_cst
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


def _caller_ir() -> str:
    drained = ("  %left = load atomic i32, i32* %done acquire, align 4\n"
               "  %drain.ok = icmp eq i32 %left, %n32\n")
    return f"""
define i64 @msc_pool_run(i64* %ctrl, i64 %recv, i64 %n, i64 %want, i64 %first,
                         {_BASE_ARGS}) {{
entry:
{_fields()}
  %n32 = trunc i64 %n to i32
  %pair = cmpxchg i64* %lock64, i64 0, i64 1 acquire monotonic
  %won = extractvalue {{i64, i1}} %pair, 1
  br i1 %won, label %publish, label %alone
alone:
  call void @msc_pool_serial(i64 %recv, i64 %n, i64 %first, {_BASE_ARGS})
  ret i64 0
publish:
  %c0 = load atomic i64, i64* %claim64 monotonic, align 8
  %j0 = lshr i64 %c0, 32
  %j1 = add i64 %j0, 1
  %jid = and i64 %j1, {_LOW32}
{_desc("%d", "%jid")}  store atomic i64 -1, i64* %d.seq monotonic, align 8
  fence release
  store atomic i64 %recv, i64* %d.records monotonic, align 8
  store atomic i64 %n, i64* %d.n monotonic, align 8
  store atomic i64 %want, i64* %d.want monotonic, align 8
{_fill_bases("%d.vector")}  store atomic i32 0, i32* %done monotonic, align 4
  store atomic i64 %jid, i64* %d.seq release, align 8
  %opened = shl i64 %jid, 32
  store atomic i64 %opened, i64* %claim64 seq_cst, align 8
  %mycpu32 = call i32 %getcpu()
  %mycpu = sext i32 %mycpu32 to i64
  store atomic i64 %mycpu, i64* %caller_cpu64 monotonic, align 8
  store atomic i64 -1, i64* %worker_cpu64 monotonic, align 8
  %jid32 = trunc i64 %jid to i32
  store atomic i32 %jid32, i32* %gen seq_cst, align 4
{_ring("ring", "%want", "claim", True)}claim:
  %c = atomicrmw add i64* %claim64, i64 1 acq_rel
  %idx = and i64 %c, {_LOW32}
  %more = icmp ult i64 %idx, %n
  br i1 %more, label %run, label %drain
run:
{_call("%t", "%recv", "%idx", "%d.vector")}  %before = atomicrmw add i32* %done, i32 1 seq_cst
  br label %claim
{_spin_wait("drain", "finish", "sleep", drained, "worker_cpu64")}sleep:
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


def _ring(label: str, count: str, done: str, asleep_only: bool) -> str:
    """Blocks ``label``..: ring the bells of workers 0..``count`` - 1 (those asleep, or all),
    then go to ``done``."""
    check = (f"  %{label}.flag = load atomic i64, i64* %{label}.asleep seq_cst, align 8\n"
             f"  %{label}.is = icmp ne i64 %{label}.flag, 0\n") if asleep_only else (
             f"  %{label}.is = icmp eq i64 0, 0\n")
    return f"""  br label %{label}.pre
{label}.pre:
  br label %{label}
{label}:
  %{label}.i = phi i64 [0, %{label}.pre], [%{label}.next, %{label}.step]
  %{label}.more = icmp ult i64 %{label}.i, {count}
  br i1 %{label}.more, label %{label}.look, label %{done}
{label}.look:
  %{label}.at = mul i64 %{label}.i, 8
  %{label}.at0 = add i64 %{label}.at, {WORKERS}
  %{label}.at1 = add i64 %{label}.at, {WORKERS + 1}
  %{label}.bell64 = getelementptr inbounds i64, i64* %ctrl, i64 %{label}.at0
  %{label}.bell = bitcast i64* %{label}.bell64 to i32*
  %{label}.asleep = getelementptr inbounds i64, i64* %ctrl, i64 %{label}.at1
{check}  br i1 %{label}.is, label %{label}.wake, label %{label}.step
{label}.wake:
  %{label}.old = atomicrmw add i32* %{label}.bell, i32 1 seq_cst
  %{label}.addr = ptrtoint i32* %{label}.bell to i64
{_futex(f"%{label}.r", f"%{label}.addr", _WAKE, "1")}  br label %{label}.step
{label}.step:
  %{label}.next = add i64 %{label}.i, 1
  br label %{label}
"""


def _stop_ir() -> str:
    return f"""
define void @msc_pool_stop(i64* %ctrl, i64 %count) {{
entry:
{_fields()}
  store atomic i64 1, i64* %stop64 seq_cst, align 8
  %g = atomicrmw add i32* %gen, i32 1 seq_cst
{_ring("ring", "%count", "stopped", False)}stopped:
  ret void
}}

define i64 @msc_pool_cycles() {{
entry:
  %t = call i64 @llvm.readcyclecounter()
  ret i64 %t
}}
"""


def pool_ir() -> str:
    """The x86-64 module: worker loop, caller, stop, cycle counter, serial loop."""
    return ("declare i64 @llvm.readcyclecounter()\ndeclare void @llvm.x86.sse2.pause()\n"
            + _serial("msc_pool_serial", "internal") + _worker_ir() + _caller_ir()
            + _stop_ir())
