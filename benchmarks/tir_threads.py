"""Parallel TensorIR loops on 1 and 2 threads: a tuned 512^3 matmul and resnet50's 3x3 conv.

    .venv/bin/python benchmarks/tir_threads.py [--trials 64] [--workloads matmul512,conv3x3]

For each workload: ``tune_tir`` with 2 threads (so candidates that mark loops parallel are
measured as they will run), then the best schedule timed at 1 and at 2 threads, interleaved,
best of 5 runs of at least 50 ms each. Hand-written schedules are timed the same way: the
matmul's 4x16 register tiles with the outer tile loop parallel and 16 lanes vectorized, and the
conv's tiles of 4 output channels (the row innermost) with the tile loop parallel. The speedup
column is time(1 thread) / time(2 threads); 2.0 is the ideal on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def hand_matmul(func):
    from msc import tir

    sch = tir.Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, factors=[None, 4])
    j0, j1 = sch.split(j, factors=[None, 16])
    sch.reorder(i0, j0, k, i1, j1)
    sch.parallel(i0)
    sch.vectorize(j1)
    sch.decompose_reduction(block, k)  # last: TVM refuses loop kinds over the update block
    return sch.mod["main"]


def hand_conv(func):
    """The 3x3 conv: 4 output channels by the output row innermost, channel tiles parallel."""
    from msc import tir

    sch = tir.Schedule(func)
    block = sch.get_block("conv2d_nchw")
    n, f, y, x, rc, rh, rw = sch.get_loops(block)
    f0, f1 = sch.split(f, factors=[None, 4])
    sch.reorder(n, f0, y, rc, rh, rw, f1, x)
    sch.parallel(f0)
    sch.decompose_reduction(block, rc)
    return sch.mod["main"]


def on_threads(kernel, args, count: int):
    """``kernel(*args)`` as a no-argument call running on ``count`` threads."""
    from msc.backend.runtime import threads

    def call():
        with threads.num_threads(count):
            kernel(*args)
    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--workloads", default="matmul512,conv3x3")
    args = parser.parse_args()

    from common import best_interleaved, per_call, print_table
    from tune import workloads

    from msc import meta_schedule as ms
    from msc.backend.lowering.compile import compile_prim_func
    from msc.backend.runtime import threads
    from msc.meta_schedule.runner import Workload

    print(f"cpu: {os.cpu_count()} threads visible")
    print_table(["kernel", "schedule", "1 thread ms", "2 threads ms", "speedup",
                 "GFLOP/s (2T)"], rows(args, workloads, ms, threads, compile_prim_func,
                                       Workload, best_interleaved, per_call), flush=True)


def rows(args, workloads, ms, threads, compile_prim_func, Workload, best_interleaved,
         per_call):
    with tempfile.TemporaryDirectory(prefix="msc_threads_") as work:
        for name, func, flops in workloads(args.workloads.split(",")):
            call = Workload(func).fresh_args()
            with threads.num_threads(2):
                db = ms.tune_tir(func, "llvm --num-cores=2", os.path.join(work, name),
                                 max_trials_global=args.trials, num_trials_per_iter=16,
                                 seed=0)
            found = [("tuned", ms.tir_integration.compile_tir(db, func).mod["main"])]
            if name == "matmul512":
                found.append(("hand (parallel i0, vectorize j1)", hand_matmul(func)))
            if name == "conv3x3":
                found.append(("hand (parallel f0)", hand_conv(func)))
            for label, f in found:
                kernel = compile_prim_func(f)
                t = best_interleaved({n: on_threads(kernel, call, n) for n in (1, 2)}, 5,
                                     lambda fn: per_call(fn, 0.05))
                yield [name, label, f"{t[1] * 1e3:.3f}", f"{t[2] * 1e3:.3f}",
                       f"{t[1] / t[2]:.2f}x", f"{flops / t[2] / 1e9:.1f}"]

if __name__ == "__main__":
    main()
