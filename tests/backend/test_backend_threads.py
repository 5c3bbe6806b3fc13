"""num_threads and the worker pool (msc/backend/runtime/threads.py); threaded kernels equal one
thread.

Threaded GEMM, dense and conv results must be bitwise equal to one thread: a split never
changes the reduction order of an output element. The size thresholds below which kernels stay
on one thread are set to 0 here, so small shapes take the threaded paths; a spy on
``parallel_for`` checks that they did.
"""

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from msc import relax
from msc.backend.kernels import Gemm, direct_conv
from msc.backend.kernels import conv as conv_kernels
from msc.backend.kernels import gemm as gemm_kernels
from msc.backend.kernels.pixel_conv import pixel_conv_available
from msc.backend.runtime import native_run, threads
from msc.backend.runtime.threads import (
    get_num_threads,
    num_threads,
    parallel_for,
    set_num_threads,
    task_threads,
)
from msc.errors import ValidationError
from msc.relax import op as R
from tests.helpers.concurrency import run_on_threads
from tests.helpers.relax_modules import one_function_module

RNG = np.random.default_rng(0)
TOL = {"rtol": 1e-4, "atol": 1e-4}  # against float64 / torch: a different summation order
NR = gemm_kernels.GemmConfig(gemm_kernels.vector_lanes()).nr


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# The thread count.


DEFAULT = get_num_threads()  # the process default: MSC_NUM_THREADS, else every usable CPU


def test_default_is_every_cpu_of_the_process():
    want = int(os.environ.get("MSC_NUM_THREADS") or 0) or len(os.sched_getaffinity(0))
    assert get_num_threads() == task_threads() == want


def test_default_follows_the_affinity_mask():
    code = "from msc.backend.runtime.threads import get_num_threads; print(get_num_threads())"
    env = {k: v for k, v in os.environ.items() if k != "MSC_NUM_THREADS"}
    out = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "1"


def test_set_and_context_override():
    before = get_num_threads()
    try:
        set_num_threads(3)
        assert get_num_threads() == 3
        with num_threads(2) as n:
            assert n == 2 and get_num_threads() == 2
            with num_threads(1):
                assert get_num_threads() == 1
            assert get_num_threads() == 2
        assert get_num_threads() == 3
    finally:
        set_num_threads(before)
    assert get_num_threads() == before


def test_override_is_local_to_its_thread():
    seen = []
    with num_threads(4):
        other = threading.Thread(target=lambda: seen.append(get_num_threads()))
        other.start()
        other.join()
        assert get_num_threads() == 4
    assert seen == [get_num_threads()]


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, None, threads.MAX_THREADS + 1])
def test_bad_counts_are_rejected(bad):
    calls = [set_num_threads, lambda n: num_threads(n).__enter__()]
    if bad is not None:  # parallel_for(threads=None) means the current count
        calls.append(lambda n: parallel_for(2, print, threads=n))
    for call in calls:
        with pytest.raises(ValidationError, match="num_threads") as info:
            call(bad)
        assert info.value.context["param"] == "num_threads"
    assert get_num_threads() == DEFAULT


@pytest.mark.parametrize("text, want", [("", threads.cpu_threads()), ("2", 2), (" 3 ", 3)])
def test_env_default(monkeypatch, text, want):
    monkeypatch.setenv("MSC_NUM_THREADS", text)
    assert threads._from_env() == want


@pytest.mark.parametrize("text", ["0", "two", "1.5"])
def test_bad_env_is_rejected(monkeypatch, text):
    monkeypatch.setenv("MSC_NUM_THREADS", text)
    with pytest.raises(ValidationError, match="MSC_NUM_THREADS"):
        threads._from_env()


def test_env_sets_the_process_default():
    code = "from msc.backend.runtime.threads import get_num_threads; print(get_num_threads())"
    env = dict(os.environ, MSC_NUM_THREADS="2")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "2"


# ---------------------------------------------------------------------------------------------
# parallel_for.


@pytest.mark.parametrize("n_tasks", [0, 1, 2, 3, 17, 1000])
@pytest.mark.parametrize("count", [1, 2, 4])
def test_every_task_runs_once(n_tasks, count):
    hits = [0] * n_tasks

    def task(i):
        hits[i] += 1

    with num_threads(count):
        parallel_for(n_tasks, task)
    assert hits == [1] * n_tasks


def test_tasks_run_concurrently():
    # Two tasks that wait for each other: done only if a worker runs one of them.
    barrier, names = threading.Barrier(2, timeout=30), set()

    def task(i):
        names.add(threading.current_thread().name)
        barrier.wait()

    parallel_for(2, task, threads=2)
    assert len(names) == 2


class _Boom(Exception):
    pass


def test_error_in_the_caller_propagates():
    def task(i):
        if i == 3:
            raise _Boom(f"task {i}")

    with pytest.raises(_Boom, match="task 3"):
        parallel_for(8, task, threads=2)


def test_error_in_a_worker_propagates_and_stops_new_tasks():
    barrier, started = threading.Barrier(2, timeout=30), []

    def task(i):
        started.append(i)
        if i < 2:
            barrier.wait()  # tasks 0 and 1 run on two threads at once
            if threading.current_thread() is not threading.main_thread():
                raise KeyError("worker")
            time.sleep(0.05)  # the caller is busy while the worker fails

    with pytest.raises(KeyError, match="worker"):
        parallel_for(100, task, threads=2)
    assert len(started) < 100
    # The pool still works afterwards.
    out = []
    parallel_for(4, out.append, threads=2)
    assert sorted(out) == [0, 1, 2, 3]


def test_nested_calls_run_serially_in_their_task():
    table = np.zeros((6, 5), int)

    def row(i):
        assert task_threads() == 1
        parallel_for(5, lambda j: table.__setitem__((i, j), i * 10 + j), threads=2)

    parallel_for(6, row, threads=2)
    assert (table == np.arange(6)[:, None] * 10 + np.arange(5)).all()
    assert task_threads() == get_num_threads()


def test_concurrent_callers():
    results = {}

    def caller(c):
        with num_threads(2):
            for rep in range(50):
                out = [None] * 9
                parallel_for(9, lambda i, out=out, rep=rep: out.__setitem__(i, (c, rep, i)))
                assert out == [(c, rep, i) for i in range(9)]
        results[c] = True

    assert run_on_threads(caller, 4, timeout=60) == []
    assert len(results) == 4


def test_forked_child_gets_a_fresh_pool():
    parallel_for(4, lambda i: None, threads=2)  # the parent has a worker now
    pid = os.fork()
    if pid == 0:  # child: the parent's worker does not exist here
        try:
            out = []
            parallel_for(6, out.append, threads=2)
            os._exit(0 if sorted(out) == list(range(6)) else 1)
        finally:
            os._exit(2)
    deadline = time.monotonic() + 60
    while (status := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    if status[0] == 0:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung in parallel_for")
    assert os.waitstatus_to_exitcode(status[1]) == 0


def test_process_exits_cleanly_with_workers():
    code = ("from msc.backend.runtime.threads import parallel_for\n"
            "import time\n"
            "parallel_for(8, lambda i: time.sleep(0.01), threads=3)\n"
            "print('done')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "done", out.stderr


# ---------------------------------------------------------------------------------------------
# Kernels: two threads == one thread, bitwise.


@pytest.fixture
def spy(monkeypatch):
    """Thresholds off; records the task count of every parallel_for a kernel makes."""
    calls = []

    def recording(n_tasks, fn, count=None):
        calls.append(n_tasks)
        return parallel_for(n_tasks, fn, count)

    def native(self, first, bases, count=None):
        if self.n and self.records[0, 0] != python_tasks:  # not a parallel_for's own list
            calls.append(self.n)
        return launch(self, first, bases, count)

    python_tasks = threads.native_address(threads._py_task)

    launch = threads.NativeTasks.launch
    monkeypatch.setattr(native_run, "split_step", lambda *args: None)  # kernel objects split
    monkeypatch.setattr(gemm_kernels, "PARALLEL_FLOPS", 0)
    monkeypatch.setattr(conv_kernels, "_DEPTHWISE_PARALLEL", 0)
    monkeypatch.setattr(direct_conv, "_PARALLEL_MACS", 0)
    monkeypatch.setattr(conv_kernels, "parallel_for", recording)
    monkeypatch.setattr(threads.NativeTasks, "launch", native)  # GEMM and direct conv tasks
    return calls


def _one_and_two(fn, *args):
    with num_threads(1):
        one = np.array(fn(*args), copy=True)
    with num_threads(2):
        two = np.array(fn(*args), copy=True)
    return one, two


GEMM_SHAPES = [  # M x K x N: N split (N > M), M split, M = 1, N % NR != 0, tiny and odd
    (1, 300, 1000), (1, 64, 2 * NR + 1), (3, 100, 5 * NR - 7), (2 * 6, 50, 7), (7, 33, 130),
    (97, 129, 65), (600, 200, 129), (1000, 64, 3), (130, 2 * gemm_kernels.KC + 5, 200),
]


@pytest.mark.parametrize("m, k, n", GEMM_SHAPES)
@pytest.mark.parametrize("relu", [False, True])
def test_gemm_two_threads_equal_one(spy, m, k, n, relu):
    a, b, bias = _rand(m, k), _rand(k, n), _rand(n)
    g = Gemm(b, bias, relu)
    one, two = _one_and_two(g, a)
    assert spy and all(t > 1 for t in spy), "the GEMM was not split"
    assert np.array_equal(one, two)
    ref = a.astype(np.float64) @ b + bias
    np.testing.assert_allclose(two, np.maximum(ref, 0) if relu else ref, **TOL)


def test_small_gemm_stays_on_one_thread(monkeypatch):
    calls = []
    monkeypatch.setattr(threads.NativeTasks, "launch", lambda *a: calls.append(a))
    a, b = _rand(8, 16), _rand(16, 8)
    with num_threads(2):
        out = Gemm(b)(a)
    assert not calls
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, **TOL)


def _build(params, body):
    ex = relax.build(one_function_module(params, body))
    vm = relax.VirtualMachine(ex, relax.cpu())["main"]
    return (lambda *args: vm(*args).numpy()), ex


@pytest.mark.parametrize("op, xs, ws", [
    ("nn.dense", (1, 512), (1000, 512)),       # batch-1 FC: panels split
    ("nn.dense", (70, 96), (33, 96)),          # rows split, N < NR
    ("matmul", (3, 50, 40), (40, 2 * NR + 3)),
])
def test_dense_two_threads_equal_one(spy, op, xs, ws):
    w = _rand(*ws)
    x = relax.Var("x", relax.TensorStructInfo(xs, "float32"))
    run, ex = _build([x], lambda bb, x: relax.op.make_call(op, x, relax.const(w)))
    assert ex.stats["ops"][op] == {"native": 1}
    xv = _rand(*xs)
    one, two = _one_and_two(run, xv)
    assert spy and np.array_equal(one, two)
    np.testing.assert_allclose(two, xv @ (w.T if op == "nn.dense" else w), **TOL)


def _torch_conv(x, w, b, groups=1, padding=1, strides=1, layout="NCHW"):
    torch = pytest.importorskip("torch")
    x_nchw = x if layout == "NCHW" else np.transpose(x, (0, 3, 1, 2))
    out = torch.conv2d(torch.from_numpy(np.ascontiguousarray(x_nchw)), torch.from_numpy(w),
                       torch.from_numpy(b), stride=strides, padding=padding, groups=groups)
    out = np.maximum(out.numpy(), 0)
    return out if layout == "NCHW" else np.transpose(out, (0, 2, 3, 1))


CONV_CASES = [  # x (in data_layout), weight OIHW, groups, strides, data_layout, dispatches
    # NCHW runs as DirectConv2d: per image, one pad task, then 4 output parts (2 per thread):
    # row bands, or channel blocks when the weights outweigh the input
    ((3, 16, 24, 24), (16, 16, 3, 3), 1, 1, "NCHW", [1, 4] * 3),
    # pixel tiles (pixel_conv.py, AVX-512): the pad on the caller, then 4 pixel ranges
    ((3, 64, 24, 24), (16, 64, 3, 3), 1, 1, "NCHW",
     [4] * 3 if pixel_conv_available() else [1, 4] * 3),
    ((1, 40, 30, 30), (70, 40, 3, 3), 1, 1, "NCHW", [1, 4]),
    ((1, 8, 7, 9), (130, 8, 1, 1), 1, 1, "NCHW", [1, 4]),        # 17 channel blocks
    ((3, 12, 11, 13), (18, 6, 3, 3), 2, 2, "NCHW", [1, 2] * 3),  # grouped, strided: groups
    ((1, 24, 15, 17), (24, 1, 3, 3), 24, 1, "NCHW", [4]),   # depthwise, batch 1: channel ranges
    ((3, 6, 10, 9), (12, 1, 3, 3), 6, 2, "NCHW", [6]),      # depthwise, multiplier 2, batch 3
    ((2, 9, 10, 5), (20, 5, 3, 3), 1, 1, "NHWC", [2]),      # images in parallel
    ((1, 9, 10, 5), (20, 5, 3, 3), 1, 1, "NHWC", [4]),      # one image: its GEMM in row blocks
]


@pytest.mark.parametrize("xs, ws, groups, strides, layout, tasks", CONV_CASES)
def test_conv_two_threads_equal_one(spy, xs, ws, groups, strides, layout, tasks):
    w, b = _rand(*ws), _rand(ws[0])
    x = relax.Var("x", relax.TensorStructInfo(xs, "float32"))

    def body(bb, x):
        y = bb.emit(R.nn.conv2d(x, relax.const(w), strides=strides, padding=1, groups=groups,
                                data_layout=layout))
        channel = (1, -1, 1, 1) if layout == "NCHW" else (1, 1, 1, -1)
        return R.nn.relu(bb.emit(R.add(y, relax.const(b.reshape(channel)))))

    run, ex = _build([x], body)
    assert ex.stats["ops"]["nn.conv2d"] == {"native": 1}
    xv = _rand(*xs)
    one, two = _one_and_two(run, xv)
    assert spy == tasks, f"expected parallel_for calls of {tasks} tasks, got {spy}"
    assert np.array_equal(one, two)
    np.testing.assert_allclose(two, _torch_conv(xv, w, b, groups, 1, strides, layout), **TOL)


def test_concurrent_vm_calls_with_threads(spy):
    w = _rand(32, 16, 3, 3)
    x = relax.Var("x", relax.TensorStructInfo((2, 16, 12, 12), "float32"))
    run, _ = _build([x], lambda bb, x: R.nn.conv2d(x, relax.const(w), padding=1))
    inputs = [_rand(2, 16, 12, 12) for _ in range(4)]
    want = [run(xv) for xv in inputs]
    got = {}

    def caller(c):
        with num_threads(2):
            for _ in range(10):
                got.setdefault(c, []).append(run(inputs[c]))

    assert run_on_threads(caller, 4) == []
    assert all(np.array_equal(out, want[c]) for c, outs in got.items() for out in outs)


def test_llvm_crashes_stay_isolated_while_the_worker_pool_lives(tmp_path, monkeypatch):
    """The kernel workers never call LLVM, so they do not turn off the forked optimizer."""
    from msc.backend.legalize import legalize_call
    from msc.backend.legalize.testing import build_call
    from msc.backend.llvm.cache import KernelCache
    from msc.backend.llvm.jit import JIT
    from msc.backend.lowering.compile import compile_prim_func
    from msc.errors import BuildError

    # Threads an earlier test in this worker left alive (torch's exporter, ...) would turn the
    # isolating fork off, and the abort would take the test process with it: hide them.
    leftovers = {t for t in threading.enumerate() if t is not threading.current_thread()
                 and not t.name.startswith(threads.WORKER_PREFIX)}
    every = threading.enumerate
    monkeypatch.setattr(threading, "enumerate", lambda: [t for t in every() if t not in leftovers])
    parallel_for(4, lambda i: None, 2)  # starts the pool
    assert any(t.name.startswith(threads.WORKER_PREFIX) for t in threading.enumerate())
    jit = JIT(KernelCache(tmp_path))
    monkeypatch.setattr(jit, "_codegen", lambda *args: os.abort())
    func = legalize_call(build_call("exp", [np.zeros(5, "float32")]))
    with pytest.raises(BuildError, match="LLVM crashed"):
        compile_prim_func(func, jit=jit)


def test_tqdm_monitor_does_not_turn_the_isolated_compile_off():
    """torch.export's decompositions leave tqdm's monitor thread alive; it never calls LLVM,
    so compiles stay forked beside it. Any other live thread still turns the fork off."""
    import tqdm

    from msc.backend.lowering.compile import _foreign_threads

    bar = tqdm.tqdm(range(3), disable=True)  # starts the monitor (monitor_interval 10 s)
    try:
        assert any(t.name == "tqdm_monitor" for t in threading.enumerate())
        assert not _foreign_threads() or any(
            not t.name.startswith((threads.WORKER_PREFIX, "tqdm_monitor"))
            for t in threading.enumerate() if t is not threading.current_thread())
        stop = threading.Event()
        other = threading.Thread(target=stop.wait, name="user-thread")
        other.start()
        try:
            assert _foreign_threads()
        finally:
            stop.set()
            other.join()
    finally:
        bar.close()
