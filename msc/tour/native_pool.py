"""Demo step: the native worker pool, which hands a kernel's task list to the other cores in one
ctypes call without the GIL."""

from __future__ import annotations

import time

from .shared import banner, small_cnn


def _handoff_us(run, repeats: int = 2000) -> float:
    """Best microseconds per call of ``run()`` over 5 rounds."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeats):
            run()
        best = min(best, (time.perf_counter() - start) / repeats)
    return best * 1e6


def step_native_pool(out: str) -> None:
    """Every task of a list runs exactly once on the pool, a 2-thread conv model gives the bits
    of one thread, and the cost of handing an op to the pool vs the Python pool."""
    import numpy as np

    from .. import relax
    from ..backend.llvm.jit import get_jit
    from ..backend.runtime import native_pool
    from ..backend.runtime.threads import NativeTasks, num_threads, parallel_for

    pool = native_pool.get_pool()
    banner("Native worker pool: " + ("workers wait in native code (x86-64 Linux)" if pool
                                      else "not on this host: task lists use the Python pool"))
    bump = get_jit().compile("define void @msc_demo_bump(i64* %c) {\n"
                             "  %o = atomicrmw add i64* %c, i64 1 seq_cst\n  ret void\n}\n",
                             ["msc_demo_bump"]).address("msc_demo_bump")
    counts = np.zeros(1000, np.int64)
    tasks = NativeTasks(len(counts))
    tasks.records[:, 0], tasks.records[:, 1] = bump, 8 * np.arange(len(counts))
    for _ in range(10):
        tasks.launch(1, (counts.ctypes.data,), 2)  # byte offsets + the array's address
    if not (counts == 10).all():
        raise SystemExit("demo: a pool task ran more or less than once")
    print("1000 tasks x 10 launches on 2 threads: every task ran exactly 10 times")
    mod, x = small_cnn()
    f = relax.VirtualMachine(relax.build(mod), relax.cpu())["main"]
    with num_threads(1):
        one = f(x).numpy()
    with num_threads(2):
        two = f(x).numpy()
    if not np.array_equal(one, two):
        raise SystemExit("demo: 2 threads changed the result")
    small = NativeTasks(2)
    small.records[:, 0], small.records[:, 1] = bump, (0, 8)
    native = _handoff_us(lambda: small.launch(1, (counts.ctypes.data,), 2))
    python = _handoff_us(lambda: parallel_for(2, lambda i: None, 2), 500)
    print(f"conv model on 2 threads: bitwise equal to 1 thread; handing a 2-task op to the "
          f"pool: {native:.1f} us (a parallel_for of Python tasks: {python:.1f} us; other "
          "processes share the cores)")
