"""What handing a kernel to the second thread costs: one native-pool round trip, beside what
a whole corpus model costs in onnxruntime in the same run.

    .venv/bin/python benchmarks/pool_roundtrip.py                   # inception_v3 at batch 16
    .venv/bin/python benchmarks/pool_roundtrip.py --models resnet,repvgg --batch 16

Rows (microseconds, fastest and median of the calls):

- ``serial``: two empty native tasks on the calling thread (what a kernel that does not split
  pays for its task loop);
- ``warm``: the same two tasks on the native pool at 2 threads, calls back to back (the
  worker is still polling from the previous call: the hand-off between two kernels of one
  model call);
- ``cold``: the same after ``--idle`` seconds of sleep (the worker has gone to sleep on its
  futex: the first kernel of a model call after a pause);
- ``python``: the warm round trip entered as kernels enter it (``NativeTasks.launch``).

Then per model: msc's pool dispatches per call at 2 threads (the plan's parallel steps, one
native dispatch each from inside the chains, plus ``NativePool.run`` calls from Python,
counted), msc's and onnxruntime's whole-model times at 1 and 2 threads (interleaved, fastest
call of ``--rounds`` rounds), and dispatches x warm round trip as a share of onnxruntime's
2-thread time: what the hand-offs alone cost against the whole model of the competitor. The
host's calibrated split costs (runtime/split_cost.py) are printed first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

from benchmarks.common import call_times, interleaved, msc_executable

_NOOP_IR = "define void @msc_bench_noop(i64 %a) {\nentry:\n  ret void\n}\n"


def noop_tasks(n: int = 2):
    """A task list of ``n`` calls of an empty native function."""
    from msc.backend.llvm.jit import get_jit
    from msc.backend.runtime.threads import NativeTasks

    library = get_jit().compile(_NOOP_IR, ["msc_bench_noop"], name="msc_bench_noop")
    tasks = NativeTasks(n)
    tasks.records[:, 0] = library.address("msc_bench_noop")
    tasks.keep = library
    return tasks


def round_trips(calls: int, idle: float) -> dict:
    """{row: seconds of each call} of the rows in the module's docstring."""
    from msc.backend.runtime import native_pool

    tasks = noop_tasks()
    pool = native_pool.get_pool()
    serial = native_pool.serial_runner()
    zeros = (0,) * 8
    rows = {"serial": [], "warm": [], "cold": [], "python": []}
    if pool is None:
        raise SystemExit("no native pool on this host (x86-64 Linux only)")
    pool.run(tasks.records.ctypes.data, 2, 2)  # starts the worker
    ptr = tasks.records.ctypes.data
    for row, fn in (("serial", lambda: serial(ptr, 2, 1, *zeros)),
                    ("warm", lambda: pool.run(ptr, 2, 2)),
                    ("python", lambda: tasks.launch(1, (), 2))):
        for _ in range(calls):
            before = time.perf_counter()
            fn()
            rows[row].append(time.perf_counter() - before)
    for _ in range(max(calls // 20, 20)):
        time.sleep(idle)
        before = time.perf_counter()
        pool.run(ptr, 2, 2)
        rows["cold"].append(time.perf_counter() - before)
    return rows


def count_dispatches(fn) -> int:
    """Native-pool dispatches (jobs handed to workers) of one call of ``fn``."""
    from msc.backend.runtime import native_pool

    seen = [0]
    original = native_pool.NativePool.run

    def counting(self, *args, **kwargs):
        seen[0] += 1
        return original(self, *args, **kwargs)

    native_pool.NativePool.run = counting
    try:
        fn()
    finally:
        native_pool.NativePool.run = original
    return seen[0]


def model_row(name: str, batch: int, rounds: int, folder: Path) -> dict:
    from benchmarks.corpus_speed import MODELS, batched, export, msc_call, ort_runner

    module, _, inputs = MODELS[name]()
    inputs = batched(inputs, batch)
    model = export(module, inputs, folder / f"{name}_b{batch}.onnx")
    ex = msc_executable(model)
    row = {"model": f"{name} b{batch}"}
    for count in (1, 2):
        fns = {"msc": msc_call(ex, inputs, count), "ort": ort_runner(model, inputs, count)}
        fns["msc"]()
        if count == 2:  # in-chain dispatches (one per parallel step) + those from Python
            row["dispatches"] = count_dispatches(fns["msc"]) + ex.plan(
                "main", (), {}).stats.get("parallel_steps", 0)
        seen = interleaved(fns, rounds, lambda fn: min(call_times(fn, 0.05)), pause=0.05)
        for who, values in seen.items():
            row[f"{who} {count}T"] = min(values)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="inception_v3")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--idle", type=float, default=0.005,
                        help="seconds of sleep before each cold call")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    from msc.backend.runtime import split_cost

    print(f"load average {os.getloadavg()[0]:.2f}; host split costs: "
          f"{split_cost.describe(split_cost.host_costs())}\n")
    rows = round_trips(args.calls, args.idle)
    print("| round trip | fastest us | median us |\n|---|---|---|")
    for row, seconds in rows.items():
        print(f"| {row} | {min(seconds) * 1e6:.2f} | {statistics.median(seconds) * 1e6:.2f} |")
    warm = statistics.median(rows["warm"])
    print("\n| model | dispatches (2T) | msc 1T ms | msc 2T ms | ORT 1T ms | ORT 2T ms "
          "| msc 2T/1T | msc/ORT 2T | dispatches x warm / ORT 2T |\n|" + "---|" * 9)
    with tempfile.TemporaryDirectory(prefix="msc_pool_roundtrip_") as tmp:
        for name in args.models.split(","):
            r = model_row(name, args.batch, args.rounds, Path(tmp))
            print(f"| {r['model']} | {r['dispatches']} | {r['msc 1T'] * 1e3:.3f} | "
                  f"{r['msc 2T'] * 1e3:.3f} | {r['ort 1T'] * 1e3:.3f} | {r['ort 2T'] * 1e3:.3f}"
                  f" | {r['msc 2T'] / r['msc 1T']:.2f} | {r['msc 2T'] / r['ort 2T']:.2f} | "
                  f"{r['dispatches'] * warm / r['ort 2T']:.2f} |", flush=True)
    print(f"\nload average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
