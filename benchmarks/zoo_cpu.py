"""The light zoo at one thread in CPU time: msc vs onnxruntime when wall clock is too noisy.

    .venv/bin/python benchmarks/zoo_cpu.py [--models squeezenet shufflenet ...] [--repeats 7]

On this project's shared 2-core machine, other sessions' load stretches wall-clock figures
2-5x; CPU time (time.thread_time of the calling thread) counts only the cycles the call ran,
so its ratio holds under load (both contenders run in the caller's thread at one thread:
MSC_NUM_THREADS=1, onnxruntime intra_op_num_threads=1). Cache and frequency effects of other
processes still show, so rounds are interleaved and each figure is the best of ``--repeats``.
Same models as benchmarks/backend.py --zoo (random weights, logits); wall clock stays that
script's job.
"""

from __future__ import annotations

import os

os.environ["MSC_NUM_THREADS"] = "1"
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (
    ZOO,
    as_logits,
    best_interleaved,
    geomean,
    input_shape,
    light_model,
    ms,
    msc_session,
    ort_session,
    per_call,
    print_table,
    with_random_weights,
)


def model_row(name: str, repeats: int, min_time: float) -> dict:
    shipped = light_model(name)
    x = np.random.default_rng(1).random(input_shape(shipped), dtype=np.float32)
    model = with_random_weights(as_logits(shipped))
    msc_fn = msc_session(model)[0]
    ort_fn = ort_session(model, 1)
    diff = float(np.max(np.abs(msc_fn(x) - ort_fn(x))))
    fns = {"msc": lambda: msc_fn(x), "onnxruntime": lambda: ort_fn(x)}
    best = best_interleaved(fns, repeats, lambda fn: per_call(fn, min_time, time.thread_time),
                            warm=False)
    return {**best, "diff": diff}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=ZOO)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--min-time", type=float, default=0.2, help="CPU seconds per timing")
    args = parser.parse_args()
    print(f"load: {os.getloadavg()[0]:.2f} (1-minute average), CPU ms per call, 1 thread\n")
    ratios = []

    def rows():
        for name in args.models:
            row = model_row(name, args.repeats, args.min_time)
            ratios.append(row["msc"] / row["onnxruntime"])
            yield [name, ms(row["msc"]), ms(row["onnxruntime"]), f"{ratios[-1]:.2f}x",
                   f"{row['diff']:.1e}"]
    print_table(["model", "msc ms", "ORT ms", "msc / ORT", "max abs diff"], rows(), flush=True)
    print(f"\ngeomean msc / onnxruntime: {geomean(ratios):.2f}x over {len(ratios)} models")


if __name__ == "__main__":
    main()
