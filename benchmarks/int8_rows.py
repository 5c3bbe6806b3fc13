"""int8 transformers between the GEMMs: msc with the QDQ softmax / layer norm / split chains
on bytes (msc/backend/fuse/qdq/rows.py) against msc with them as float passes, and onnxruntime
running the same QDQ model, at 1 and 2 threads, in one run of interleaved rounds.

    .venv/bin/python benchmarks/int8_rows.py                         # BERT-base and GPT-2
    .venv/bin/python benchmarks/int8_rows.py --models bert --rounds 5
    .venv/bin/python benchmarks/int8_rows.py --cache out/qdq          # keep the QDQ models
    .venv/bin/python benchmarks/int8_rows.py --cpu --threads 1       # CPU time, load-proof

Models: benchmarks/speed.py's BERT-base and GPT-2 (transformers configs, random weights,
sequence 128), quantized by onnxruntime's ``quantize_static`` (QDQ, per-channel int8 weights,
uint8 activations; benchmarks/int8.py). Each cell is the fastest call over the rounds; the
ratios against onnxruntime are what a loaded machine supports (report ``uptime`` with them).
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
# As a script, this folder is sys.path[0] and benchmarks/transformers.py would shadow the
# transformers package: import from the repository root instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))


from benchmarks import speed
from benchmarks.common import (
    best_interleaved,
    cached_model,
    msc_executable,
    msc_runner,
    ort_qdq,
    ort_session,
    single_calls,
)


def qdq_model(name: str, cache: Path | None):
    """onnxruntime's QDQ model of speed.py's ``name`` and one timed input."""
    case = speed.transformer_case(name, False)
    float_model = case["float"]
    model = cached_model(cache / f"{name}.int8.onnx" if cache else None,
                         lambda: ort_qdq(float_model, float_model.graph.input[0].name,
                                         case["draw"](speed.CALIBRATION, 1)))
    return model, case["draw"](1, 2)[0]


def rows_off_executable(model):
    """msc's build with the byte rows off: softmax / layer norm / split as float passes."""
    from msc.backend.fuse.qdq import fold as qdq_fold

    with mock.patch.object(qdq_fold, "fold_rows", lambda program: {}), \
            mock.patch.object(qdq_fold, "permute_bytes", lambda program: {}):
        return msc_executable(model)


def best_times(runners: dict, x, rounds: int, cpu: bool) -> dict:
    """{key: fastest call in ms} over interleaved rounds of 3 calls each; with ``cpu`` the
    1-thread calls are timed in the calling thread's CPU time (the other sessions' load
    does not count; every 1-thread contender computes on the calling thread)."""
    def timing(key):
        clock = time.thread_time if cpu and key[1] == 1 else time.perf_counter
        run = partial(runners[key], x)

        def one_round() -> float:
            run()  # each round warms its contender again after the others ran
            return min(single_calls(run, 3, clock)) * 1e3
        return one_round
    return best_interleaved({key: timing(key) for key in runners}, rounds,
                            lambda one_round: one_round(), warm=False)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["bert", "gpt2"],
                        choices=["bert", "gpt2"])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--cpu", action="store_true",
                        help="time the 1-thread calls in CPU time (a loaded machine)")
    parser.add_argument("--cache", type=Path, default=None,
                        help="folder keeping the QDQ models between runs")
    args = parser.parse_args(argv)
    print(f"{'model':6s} {'thr':>3s} {'msc':>8s} {'rows off':>9s} {'ORT':>8s} "
          f"{'msc/ORT':>8s} {'off/ORT':>8s}")
    for name in args.models:
        model, x = qdq_model(name, args.cache)
        builds = {"msc": msc_executable(model), "off": rows_off_executable(model)}
        runners = {}
        for threads in args.threads:
            for who, ex in builds.items():
                runners[(who, threads)] = msc_runner(ex, threads)
            runners[("ORT", threads)] = ort_session(model, threads)
        best = best_times(runners, x, args.rounds, args.cpu)
        for t in args.threads:
            msc, off, ort = best[("msc", t)], best[("off", t)], best[("ORT", t)]
            print(f"{name:6s} {t:3d} {msc:8.2f} {off:9.2f} {ort:8.2f} {msc / ort:8.2f} "
                  f"{off / ort:8.2f}")


if __name__ == "__main__":
    main()
