"""The native worker pool (msc/backend/runtime/native_pool.py): every task of a list runs exactly
once whatever the task count, concurrent callers and calls made inside a task do not corrupt
each other or deadlock, a forked child and interpreter exit do not hang, and a small conv model
gives bitwise the same output on one and two threads.

Tasks are a tiny native kernel that atomically adds 1 to its own counter, so a task run twice
or skipped shows as a count other than the number of runs.
"""

import ctypes
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from msc import relax
from msc.backend.kernels import direct_conv, direct_conv_plan
from msc.backend.kernels import elementwise as ew_kernels
from msc.backend.kernels import pool as pool_kernels
from msc.backend.llvm.jit import get_jit
from msc.backend.runtime import native_pool, native_run
from msc.backend.runtime.native_pool_ir import WORKERS
from msc.backend.runtime.threads import NativeTasks, num_threads
from msc.relax import op as R
from tests.helpers.concurrency import run_on_threads
from tests.helpers.relax_modules import one_function_module

POOL = native_pool.get_pool()
pytestmark = pytest.mark.skipif(POOL is None, reason="the native pool runs on x86-64 Linux")

_BUMP_IR = """
define void @msc_test_pool_bump(i64* %counter) {
  %old = atomicrmw add i64* %counter, i64 1 seq_cst
  ret void
}
"""


def _bump_address() -> int:
    return get_jit().compile(_BUMP_IR, ["msc_test_pool_bump"]).address("msc_test_pool_bump")


def _bump_tasks(counts: np.ndarray) -> NativeTasks:
    """One task per element of ``counts`` (int64), adding 1 to it."""
    tasks = NativeTasks(len(counts))
    tasks.records[:, 0] = _bump_address()
    tasks.records[:, 1] = counts.ctypes.data + 8 * np.arange(len(counts))
    return tasks


@pytest.mark.parametrize("n", [0, 1, 2, 3, 17, 1000])
@pytest.mark.parametrize("count", [2, 3])
def test_every_task_runs_exactly_once(n, count):
    counts = np.zeros(n, np.int64)
    tasks = _bump_tasks(counts)
    for rep in range(1, 21):
        tasks.run(count)
        assert (counts == rep).all(), f"run {rep}: counts {np.unique(counts)}"


def test_workers_join_and_sleep_between_calls():
    counts = np.zeros(4000, np.int64)
    tasks = _bump_tasks(counts)
    tasks.run(2)
    assert len(POOL.workers) >= 1 and all(w.is_alive() for w in POOL.workers)
    # After SPIN_SECONDS the workers sleep on the futex; a call must still wake them.
    asleep = WORKERS + 1  # worker 0's flag
    deadline = time.monotonic() + 10
    while POOL.ctrl[asleep] != 1 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert POOL.ctrl[asleep] == 1
    tasks.run(2)
    assert (counts == 2).all()


def test_concurrent_callers_from_two_threads():
    lists = [np.zeros(300, np.int64) for _ in range(2)]
    task_lists = [_bump_tasks(c) for c in lists]

    def caller(c):
        for _ in range(200):
            task_lists[c].run(2)

    assert run_on_threads(caller, 2, timeout=60) == []
    assert all((c == 200).all() for c in lists)


def test_a_call_inside_a_task_runs_alone():
    """Outer tasks call msc_pool_run themselves, each on its own inner list, while the outer
    caller holds the pool: the inner calls must run on their own thread and complete."""
    run = native_pool._native()[1]
    inner = [np.zeros(50, np.int64) for _ in range(4)]
    inner_tasks = [_bump_tasks(c) for c in inner]
    outer = NativeTasks(len(inner))
    outer.records[:, 0] = ctypes.cast(run, ctypes.c_void_p).value
    outer.records[:, 1] = POOL._ptr
    outer.records[:, 2] = [t._ptr for t in inner_tasks]
    # 50 tasks, one helper wanted, bases from column 10 on (the bump reads only column 1)
    outer.records[:, 3:6] = (50, 1, 10)
    for rep in range(1, 11):
        outer.run(2)
        assert all((c == rep).all() for c in inner)


def test_bases_are_added_to_the_arguments():
    counts = np.zeros(64, np.int64)
    tasks = NativeTasks(8)
    tasks.records[:, 0] = _bump_address()
    tasks.records[:, 1] = 8 * 8 * np.arange(8)  # byte offsets of counts[0], counts[8], ..
    for count in (1, 2, 3):
        tasks.launch(1, (counts.ctypes.data + 8 * count,), count)
    assert (counts.reshape(8, 8)[:, 1:4] == 1).all() and counts.sum() == 24


def _run_child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=60, check=False)


CHILD_SETUP = f"""
    import os, time
    import numpy as np
    from msc.backend.llvm.jit import get_jit
    from msc.backend.runtime.threads import NativeTasks
    bump = get_jit().compile({_BUMP_IR!r}, ["msc_test_pool_bump"]).address("msc_test_pool_bump")
    counts = np.zeros(64, np.int64)
    tasks = NativeTasks(64)
    tasks.records[:, 0], tasks.records[:, 1] = bump, counts.ctypes.data + 8 * np.arange(64)
"""  # imports only the pool (a child importing the whole test module takes 3x as long)


@pytest.mark.parametrize("pause", [0.0, 0.05])  # workers spinning / asleep on the futex
def test_interpreter_exits_with_workers(pause):
    out = _run_child(CHILD_SETUP + f"""
    tasks.run(3)
    time.sleep({pause})
    print("done", int(counts.sum()))
    """)
    assert out.returncode == 0 and out.stdout.split() == ["done", "64"], out.stderr


def test_forked_child_starts_a_new_pool():
    out = _run_child(CHILD_SETUP + """
    tasks.run(2)
    pid = os.fork()
    if pid == 0:
        tasks.run(2)
        os._exit(0 if (counts == 2).all() else 1)
    _, status = os.waitpid(pid, 0)
    tasks.run(2)
    print("child", os.waitstatus_to_exitcode(status), "parent", int(counts.min()))
    """)
    assert out.returncode == 0 and out.stdout.split() == ["child", "0", "parent", "2"], out.stderr


def test_shutdown_then_a_new_pool():
    code = """
    from msc.backend.runtime import native_pool
    tasks.run(2)
    workers = native_pool.get_pool().workers
    native_pool.shutdown()
    alive = sum(w.is_alive() for w in workers)
    tasks.run(2)
    print(alive, int(counts.min()), int(counts.max()))
    """
    out = _run_child(CHILD_SETUP + code)
    assert out.returncode == 0 and out.stdout.split() == ["0", "2", "2"], out.stderr


@pytest.fixture
def split_everything(monkeypatch):
    """Size thresholds off: small shapes take the kernel objects' split paths (the chains'
    own parallel steps off: tests/backend/vm/test_chain_split.py runs those)."""
    monkeypatch.setattr(native_run, "split_step", lambda *args: None)
    monkeypatch.setattr(ew_kernels, "_PARALLEL_ELEMENTS", 1)
    monkeypatch.setattr(pool_kernels, "_PARALLEL_READS", 0)
    monkeypatch.setattr(direct_conv, "_PARALLEL_MACS", 0)
    monkeypatch.setattr(direct_conv_plan, "_PARALLEL_PREP", 0)


def test_small_conv_model_two_threads_equal_one(split_everything, monkeypatch):
    pooled, run = [], native_pool.NativePool.run
    monkeypatch.setattr(native_pool.NativePool, "run",
                        lambda self, *args: pooled.append(args[1]) or run(self, *args))
    rng = np.random.default_rng(3)
    w1, w2 = (rng.standard_normal(s).astype(np.float32) for s in [(16, 8, 3, 3), (16, 16, 1, 1)])
    x = relax.Var("x", relax.TensorStructInfo((1, 8, 20, 20), "float32"))

    def body(bb, x):
        y = bb.emit(R.nn.relu(bb.emit(R.nn.conv2d(x, relax.const(w1), padding=1))))
        y = bb.emit(R.nn.max_pool2d(y, pool_size=(2, 2), strides=(2, 2)))
        return R.add(y, bb.emit(R.nn.conv2d(y, relax.const(w2))))

    ex = relax.build(one_function_module([x], body))
    vm = relax.VirtualMachine(ex, relax.cpu())["main"]
    xv = rng.standard_normal((1, 8, 20, 20)).astype(np.float32)
    outs = {}
    for count in (1, 2, 1, 2):
        with num_threads(count):
            outs.setdefault(count, []).append(vm(xv).numpy().copy())
    assert all(np.array_equal(out, outs[1][0]) for runs in outs.values() for out in runs)
    assert len(pooled) >= 2 * 4 and min(pooled) > 1  # convs, pool and add on the pool, twice
    y = np.maximum(_conv_ref(xv, w1, 1), 0)
    y = y.reshape(1, 16, 10, 2, 10, 2).max(axis=(3, 5))
    np.testing.assert_allclose(outs[2][0], y + _conv_ref(y, w2, 0), rtol=1e-4, atol=1e-4)


def _conv_ref(x, w, pad):
    """Stride-1 NCHW convolution in float64 (numpy), the reference."""
    kh, kw = w.shape[2:]
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", windows, w.astype(np.float64))


def test_hosts_without_the_pool_run_lists_on_the_python_pool(monkeypatch):
    """Off x86-64 Linux get_pool() is None: task lists and parallel_for use the Python pool,
    with the same results (bases added, every task once)."""
    from msc.backend.runtime import threads

    monkeypatch.setattr(native_pool, "get_pool", lambda: None)
    counts = np.zeros(64, np.int64)
    tasks = NativeTasks(8)
    tasks.records[:, 0] = _bump_address()
    tasks.records[:, 1] = 8 * 8 * np.arange(8)
    for count in (1, 2, 3):
        tasks.launch(1, (counts.ctypes.data + 8 * count,), count)
    out = [0] * 9
    threads.parallel_for(9, lambda i: out.__setitem__(i, out[i] + i), 2)
    assert (counts.reshape(8, 8)[:, 1:4] == 1).all() and counts.sum() == 24
    assert out == list(range(9))
