"""Demo step: the int8 CNN kernels split into native task lists (one handoff per op, no
Python per task) and give the same bytes on one and two threads."""

from __future__ import annotations

import time

from .shared import banner


def _best_us(fn, repeats: int = 20) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1e6


def step_int8_threads(out: str) -> None:
    """A squeezenet-sized int8 conv, max pool and concat on 1 and 2 threads: bitwise equal,
    with the task counts of the conv's plan and each side's best time."""
    import numpy as np

    from ..backend.kernels.int8.conv import QConv2d
    from ..backend.kernels.int8.lut import QConcat
    from ..backend.kernels.int8.pool import QMaxPool
    from ..backend.runtime.threads import num_threads

    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (1, 16, 54, 54), dtype=np.uint8)
    conv = QConv2d(rng.integers(-127, 128, (64, 16, 3, 3), dtype=np.int8),
                   {"strides": (1, 1), "padding": (1, 1, 1, 1), "dilation": (1, 1)}, "uint8",
                   3, np.float32(0.01), None, ("u8", 0.5, 3), relu=True)
    pool = QMaxPool("uint8", (3, 3), (2, 2), (0, 0, 0, 0))
    cat = QConcat([None, None], 1, np.uint8)
    y = np.empty((1, 64, 54, 54), np.uint8)
    ops = {"int8.conv2d 16->64 3x3 54x54": lambda: conv(x, y),
           "int8.max_pool2d 3x3/2": lambda: pool(y, np.empty((1, 64, 26, 26), np.uint8)),
           "int8.concat 2 x 64ch": lambda: cat(y, y, np.empty((1, 128, 54, 54), np.uint8))}
    banner("int8 CNN kernels on native task lists, 1 vs 2 threads")
    for name, run in ops.items():
        one, t1 = run().copy(), _best_us(run)
        with num_threads(2):
            two, t2 = run().copy(), _best_us(run)
        if not np.array_equal(one, two):
            raise SystemExit(f"{name}: 2 threads differ from 1")
        print(f"{name:32s} 1T {t1:7.1f} us  2T {t2:7.1f} us  bitwise equal")
    plan = conv._plans[(1, 54, 54, 2)]
    print(f"conv plan at 2 threads: {plan.blocks.n} blocks (unfold + pack + GEMM each), "
          f"{plan.arena >> 10} KiB scratch; timings need a quiet machine")
