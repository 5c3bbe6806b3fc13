"""How fast the search finds good schedules: the per-store-feature cost model against random
search, on a matmul, a 3x3 conv and a softmax.

    .venv/bin/python benchmarks/tune_search.py [--trials 512] [--per-iter 32]
        [--workloads matmul512,conv3x3,softmax] [--min-repeat-ms 10] [--work-dir DIR]

Workloads: ``matmul512`` and ``conv3x3`` (resnet50's res2 conv) of benchmarks/tune.py, the
legalized ``softmax`` of a (256, 1024) tensor, and smaller twins for a loaded machine:
``matmul256`` and ``conv3x3_small`` (32 channels, 28x28).

On one thread, without the analytic starting points (both searches start from random
samples, so the figures are the search's own):

1. random search, ``--trials`` candidates per workload (``cost_model="random"``);
2. model search, ``--trials`` candidates per workload, its work_dir seeded with the training
   data (per-store features and times) of the *other* workloads' random runs: the model is
   trained across workloads from the first round, as a work_dir shared by several tunes is;
3. per workload: the reference is the fastest candidate either run found; the table gives,
   for each run, the trials it took to reach 90% of the reference's speed (time <= ref / 0.9;
   "-" when it never did), its best, and the Spearman rank correlation of the model's
   predictions with the measured times of held-out candidates (the random run's, unseen by
   the model run), once for a model trained on everything the model run ended with (its own
   candidates of the workload and the other workloads') and once for one trained on the
   other workloads only (transfer to an unseen workload).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

TARGET = "llvm --num-cores=1"


def softmax_func():
    """The legalized softmax of a (256, 1024) float32 tensor (max, exp-sum, divide blocks)."""
    from msc import relax
    from msc.relax import op as R

    x = relax.Var("x", relax.TensorStructInfo((256, 1024), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(R.nn.softmax(x, axis=-1))
        bb.emit_func_output(gv)
    mod = relax.transform.LegalizeOps()(bb.get())
    return next(mod[gv] for gv in mod.get_global_vars() if gv.name_hint != "main")


def matmul256():
    from tune import MATMUL

    from msc.tir.parser import parse_tir_text

    return parse_tir_text(MATMUL.replace("512", "256"))["matmul"]


def conv_small():
    """A 3x3 conv of 32 channels on 28x28 (pad 1): the resnet conv's loop structure at 1/16
    of its work, for runs on a loaded machine."""
    from tune import conv_func

    return conv_func(32, 28)[0]


SMALL = {"softmax": softmax_func, "matmul256": matmul256, "conv3x3_small": conv_small}


def load_workloads(names: list) -> list:
    """(name, prim func): the small ones here, the rest from benchmarks/tune.py."""
    from tune import workloads

    out = [(n, f) for n, f, _ in workloads([n for n in names if n not in SMALL])]
    out += [(n, SMALL[n]()) for n in names if n in SMALL]
    return [next(w for w in out if w[0] == n) for n in names]


def tune(func, work: str, trials: int, args, cost_model: str) -> list:
    """Seconds of every measured candidate, in measuring order (failures: inf)."""
    from msc import meta_schedule as ms

    db = ms.tune_tir(func, TARGET, work, max_trials_global=trials,
                     num_trials_per_iter=args.per_iter, cost_model=cost_model, seed=0,
                     min_repeat_ms=args.min_repeat_ms, analytic_starts=False)
    return [r.mean_secs if r.valid else np.inf for r in db.records_of(func, TARGET)
            if r.trace.insts]


def trials_to(times: list, goal: float):
    best = np.minimum.accumulate(times)
    hit = np.nonzero(best <= goal)[0]
    return int(hit[0]) + 1 if len(hit) else None


def merge_training(target_dir: str, sources: list) -> None:
    """Seed ``target_dir``'s training set with the candidates of ``sources`` (work dirs)."""
    from msc.meta_schedule.training import TrainingSet

    merged = TrainingSet(target_dir)
    for src in sources:
        data = TrainingSet(src)
        for k in range(len(data)):
            merged.add(data.workloads[k], data.rows[k], data.secs[k], data._tags[k])
    merged.save()


def spearman(a, b) -> float:
    ra, rb = (np.argsort(np.argsort(v)) for v in (a, b))
    return float(np.corrcoef(ra, rb)[0, 1])


def held_out_corr(train_dirs: list, test_dir: str, workload: str | None) -> float | None:
    """Rank correlation on the candidates of ``test_dir`` of a model fit on ``train_dirs``
    (only candidates of other workloads than ``workload`` when given)."""
    from msc import meta_schedule as ms
    from msc.meta_schedule.training import TrainingSet

    train = TrainingSet(None)
    for src in train_dirs:
        data = TrainingSet(src)
        for k in range(len(data)):
            if workload is None or data.workloads[k] != workload:
                train.add(data.workloads[k], data.rows[k], data.secs[k], data._tags[k])
    test = TrainingSet(test_dir)
    keep = [k for k in range(len(test)) if test.secs[k] < 1e10]
    if len(train) < 8 or len(keep) < 8:
        return None
    model = ms.GBTModel().fit(*train.arrays())
    x = np.concatenate([test.rows[k] for k in keep])
    groups = np.concatenate([np.full(len(test.rows[k]), i) for i, k in enumerate(keep)])
    pred = model.predict(x, groups)
    return spearman(pred, [-test.secs[k] for k in keep])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=512)
    parser.add_argument("--per-iter", type=int, default=32)
    parser.add_argument("--workloads", default="matmul512,conv3x3,softmax")
    parser.add_argument("--min-repeat-ms", type=float, default=10.0)
    parser.add_argument("--work-dir", default=None, help="keep the work dirs here")
    args = parser.parse_args()

    from msc.backend.runtime.threads import num_threads
    root = args.work_dir or tempfile.mkdtemp(prefix="msc_tune_search_")
    names = args.workloads.split(",")
    funcs = dict(load_workloads(names))
    runs, seconds = {}, {}
    with num_threads(1):
        for name in names:  # random search first: the model runs train on the others'
            start = time.perf_counter()
            runs[name, "random"] = tune(funcs[name], f"{root}/random_{name}", args.trials,
                                        args, "random")
            seconds[name, "random"] = time.perf_counter() - start
            print(f"# random {name}: {len(runs[name, 'random'])} trials in "
                  f"{seconds[name, 'random']:.0f} s", flush=True)
        for name in names:
            work = f"{root}/model_{name}"
            shutil.rmtree(work, ignore_errors=True)
            os.makedirs(work)
            merge_training(work, [f"{root}/random_{n}" for n in names if n != name])
            start = time.perf_counter()
            runs[name, "model"] = tune(funcs[name], work, args.trials, args, "xgb")
            seconds[name, "model"] = time.perf_counter() - start
            print(f"# model {name}: {len(runs[name, 'model'])} trials in "
                  f"{seconds[name, 'model']:.0f} s", flush=True)
    print_table(names, runs, seconds, root)


def print_table(names, runs, seconds, root) -> None:
    head = ["workload", "reference best ms", "search", "trials to 90%", "best ms",
            "tuning s", "rank corr (same workload)", "rank corr (other workloads only)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name in names:
        ref = min(min(runs[name, s]) for s in ("random", "model"))
        same = held_out_corr([f"{root}/model_{name}"], f"{root}/random_{name}", None)
        other = held_out_corr([f"{root}/random_{n}" for n in names if n != name],
                              f"{root}/random_{name}", None)
        for search in ("random", "model"):
            times = runs[name, search]
            hit = trials_to(times, ref / 0.9)
            corr = ["-", "-"] if search == "random" else \
                [f"{c:.2f}" if c is not None else "-" for c in (same, other)]
            print(f"| {name} | {ref * 1e3:.3f} | {search} | {hit or '-'} of {len(times)} | "
                  f"{min(times) * 1e3:.3f} | {seconds[name, search]:.0f} | "
                  + " | ".join(corr) + " |", flush=True)
    print(f"\nwork dirs: {root}")


if __name__ == "__main__":
    main()
