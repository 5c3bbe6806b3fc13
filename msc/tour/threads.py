"""Demo step: the backend's kernels on every CPU of the process, bitwise equal to one thread."""

from __future__ import annotations

import time

from .shared import banner, small_cnn


def step_threads(out: str) -> None:
    """One build, run on 1 thread and on every CPU (the default): same bits, the time of each."""
    import numpy as np

    from .. import relax
    from ..backend.runtime.threads import cpu_threads, get_num_threads

    mod, x = small_cnn()
    ex = relax.build(mod)
    banner(f"Threads: default {get_num_threads()} (CPUs of this process: {cpu_threads()}), "
            "MSC_NUM_THREADS overrides")
    results, seconds = {}, {}
    for count in sorted({1, max(2, get_num_threads())}):
        f = relax.VirtualMachine(ex, relax.cpu(), num_threads=count)["main"]
        results[count] = f(x).numpy()
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            f(x)
            best = min(best, time.perf_counter() - start)
        seconds[count] = best
        print(f"num_threads={count}: {best * 1e3:.2f} ms (best of 5; other processes share "
              "the cores)")
    first, *others = results.values()
    if not all(np.array_equal(first, other) for other in others):
        raise SystemExit("demo: the thread count changed the result")
    print(f"bitwise equal across {sorted(results)} threads; output {first.shape}, kernels "
          f"{ex.stats['kernels']}")
