"""What stays serial at 2 threads, per zoo model: a load-independent view of thread scaling.

    .venv/bin/python benchmarks/thread_serial.py [--models squeezenet resnet50 ...] [--top 3]

The kernels run inside native chains (runtime/plan_code.py), so this reads the plan: each
native step either splits at more than one thread (a parallel entry that hands its task lists
to the pool from inside the chain, runtime/chain_split.py, or a chain of its own whose kernel
object splits) or runs on the calling thread; Python lines (in-place concats, tuples, views)
run on it too. The profiled plan (every instruction between two clock reads) then runs best of
5 at 1 thread with the clock in CPU time of the calling thread (time.thread_time, so other
processes' load does not count). The serial share is (1-thread CPU time of the steps that do
not split + the Python lines) / the 1-thread total; the Amdahl bound 1 / (s + (1 - s) / 2) is
the best 2-thread speed-up those splits allow (how evenly a split divides its work is not in
it: that is benchmarks/speed.py --threads 1 2, which needs a quiet machine).
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (
    ZOO,
    as_logits,
    input_shape,
    light_model,
    ms,
    print_table,
    with_random_weights,
)
from msc.backend.runtime import plan_code, threads
from msc.backend.runtime.plan_code import NativeCall


def serial_share(name: str) -> dict:
    from msc import relax
    from msc.frontends.onnx.api import from_onnx

    shipped = light_model(name)
    x = np.random.default_rng(1).random(input_shape(shipped), dtype=np.float32)
    mod, _ = from_onnx(with_random_weights(as_logits(shipped)), as_msc=False)
    fn = relax.VirtualMachine(relax.build(mod), relax.cpu())["main"]
    return share_of(fn, x)


def share_of(fn, x) -> dict:
    """The serial share of ``fn(x)`` (a VMFunction), from its profiled plan."""
    clock, plan_code.perf_counter = plan_code.perf_counter, time.thread_time
    try:  # the profiled plan's clock: CPU time of the calling thread
        values, env = fn.check_args((x,))
        entry = fn.profiled_entry(env)
    finally:
        plan_code.perf_counter = clock
    plan, timers = entry.plan, entry.plan.runner.timers
    best = None
    with threads.num_threads(1):
        fn.run_checked(values, env, entry)
        for _ in range(5):
            timers[:] = [0.0] * len(timers)
            values, env = fn.check_args((x,))
            fn.run_checked(values, env, entry)
            if best is None or sum(timers) < sum(best):
                best = list(timers)
    serial, outside = collections.Counter(), 0.0
    for instr, seconds in zip(plan.instructions, best):
        call = instr[4]
        if not isinstance(call, NativeCall):
            outside += seconds
        elif getattr(call.step, "parallel", None) is None and \
                not getattr(call.step, "splits", False):
            shape = call.step.specs[0].shape if call.step.specs else ""
            serial[f"{call.step.op} {tuple(shape)}"] += seconds
    total = sum(best)
    share = (sum(serial.values()) + outside) / total
    return {"total": total, "serial": serial, "outside": outside, "share": share,
            "bound": 1 / (share + (1 - share) / 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=[m for m in ZOO if m != "vgg19"],
                        help="light zoo models (vgg19 takes minutes)")
    parser.add_argument("--top", type=int, default=3, help="largest serial calls to list")
    args = parser.parse_args()
    print_table(COLUMNS, (cells(name, serial_share(name), args.top) for name in args.models),
                flush=True)


COLUMNS = ["model", "1T CPU ms", "serial kernels ms", "Python lines ms", "serial share",
           "Amdahl bound at 2T", "largest serial calls"]


def cells(name: str, r: dict, top: int) -> list[str]:
    """One model's row of COLUMNS from a :func:`share_of` result."""
    calls = ", ".join(f"{call} {s * 1e3:.2f}" for call, s in r["serial"].most_common(top))
    return [name, ms(r["total"]), ms(sum(r["serial"].values())), ms(r["outside"]),
            f"{r['share']:.0%}", f"{r['bound']:.2f}x", calls]

if __name__ == "__main__":
    main()
