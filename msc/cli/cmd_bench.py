"""``msc bench MODEL``: msc's latency next to the model's own runtime (onnxruntime / torch)."""

from __future__ import annotations

import statistics
import time

from ..errors import ValidationError
from ..progress import progress
from . import options
from .loaders import open_model
from .runners import msc_runner, reference_name, reference_runner
from .stages import Stages

NAME = "bench"
HELP = "time msc against onnxruntime (ONNX) or torch (torch models): a latency table"
EPILOG = """examples:
  msc bench model.onnx                         # msc vs onnxruntime
  msc bench model.onnx --threads 1 --repeat 10
  msc bench net.py:make_model --input-info "x:8,3,224,224"   # msc vs torch
Each round times every runtime in turn (so load from other processes hits all alike) for at
least --min-time seconds; the table shows the best and median round, in ms per call, and
msc / <runtime> (below 1.00x: msc is faster).
"""


def add_arguments(p) -> None:
    p.epilog = EPILOG
    options.add_model(p)
    options.add_inputs(p)
    options.add_threads(p)
    p.add_argument("--repeat", type=options.positive_int, default=5, metavar="R",
                   help="rounds; the best one counts (default 5)")
    p.add_argument("--min-time", type=options.seconds, default=0.2, metavar="SECONDS",
                   help="time of one round of one runtime (default 0.2)")


def timed(fn, min_time: float) -> float:
    """Seconds per call, averaged over at least ``min_time`` seconds (and one call)."""
    calls, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < min_time or not calls:
        fn()
        calls += 1
    return elapsed / calls


def measure(calls: dict, repeat: int, min_time: float) -> dict[str, list[float]]:
    """Seconds per call of each runtime, one entry per round; rounds interleave runtimes."""
    for fn in calls.values():
        fn()  # warm up: lazy kernels, buffers, caches
    seconds = {who: [] for who in calls}
    for _ in progress(range(repeat), desc="bench", unit="round"):
        for who, fn in calls.items():
            seconds[who].append(timed(fn, min_time))
    return seconds


def format_table(seconds: dict[str, list[float]]) -> str:
    base = min(seconds["msc"])
    rows = [f"{'runtime':<14}{'best ms':>10}{'median ms':>11}{'msc / this':>12}"]
    for who, values in seconds.items():
        best = min(values)
        rows.append(f"{who:<14}{best * 1e3:>10.3f}{statistics.median(values) * 1e3:>11.3f}"
                    f"{base / best:>11.2f}x")
    return "\n".join(rows)


def _reference(model, threads):
    """The model's own runtime, or None (said so) when it has none or it is not installed."""
    try:
        reference = reference_runner(model, threads)
    except ValidationError as err:  # onnxruntime not installed: time msc alone
        print(f"({err}; msc only)")
        return None
    if reference is None:
        print(f"({model.kind} model: no runtime of its own to compare with; msc only)")
    return reference


def run(args) -> int:
    with Stages("msc bench", ["load", "build"]) as stage:
        stage("load")
        model = open_model(args.model, options.input_info(args))
        arrays = options.model_inputs(args, model)
        stage("build")
        msc_fn, _ = msc_runner(model, args.threads)
        reference = _reference(model, args.threads)
    calls = {"msc": lambda: msc_fn(arrays)}
    if reference is not None:
        calls[reference_name(model)] = lambda: reference(arrays)
    shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in arrays.items())
    threads = args.threads or "default"
    print(f"{model.spec}: inputs {shapes}; threads {threads}; best of {args.repeat}")
    print(format_table(measure(calls, args.repeat, args.min_time)))
    return 0
