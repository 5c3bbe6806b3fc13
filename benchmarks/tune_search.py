"""How fast the search finds good schedules: the per-store-feature cost model against random
search, on a matmul, a 3x3 conv and a softmax.

    .venv/bin/python benchmarks/tune_search.py --work-dir DIR [--trials 512] [--per-iter 32]
        [--stages 64,128,256,512] [--searches random,model]
        [--workloads matmul512,conv3x3,softmax] [--min-repeat-ms 10] [--timeout 30]
        [--train-from DIR ...] [--report]

Workloads: ``matmul512`` and ``conv3x3`` (resnet50's res2 conv) of benchmarks/tune.py, the
legalized ``softmax`` of a (256, 1024) tensor, smaller twins and a training pool
(benchmarks/search_workloads.py).

On one thread, without the analytic starting points (both searches start from random
samples, so the figures are the searches' own):

1. random search per workload (``cost_model="random"``), in ``DIR/random_<name>``;
2. model search per workload in ``DIR/model_<name>``, its work_dir seeded with the training
   data (per-store features and times) of the *other* workloads' random runs: the model is
   trained across workloads from the first round, as a work_dir shared by several tunes is;
3. per workload, at the trial count both searches reached: the reference is the fastest
   candidate either found; the table gives, for each search, the trials it took to reach 90%
   of the reference's speed (time <= ref / 0.9; "-" when it never did), its best, and the
   Spearman rank correlation of the model's predictions with the measured times of held-out
   candidates (the random run's, unseen by the model run), once for a model trained on
   everything the model run ended with (its own candidates of the workload and the other
   workloads') and once for one trained on the other workloads only (transfer).

The run is resumable and goes by stages: every search first reaches the first stage's trial
count, then the next, so a run stopped early still compares the searches at one count. Each
candidate is in its work_dir's database as soon as it is measured; a rerun with the same
``--work-dir`` measures only what is missing. ``--searches random`` and ``--searches model``
may run as two processes on the same DIR; ``--report`` prints the table of what is there.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_workloads import load_workloads

TARGET = "llvm --num-cores=1"
SECONDS = "bench_seconds.json"


def measured(work: str, func) -> list:
    """Seconds of every candidate measured in ``work``, in measuring order (failures: inf)."""
    from msc import meta_schedule as ms

    if not os.path.exists(work):
        return []
    db = ms.JSONDatabase(work)
    return [r.mean_secs if r.valid else np.inf for r in db.records_of(func, TARGET)
            if r.trace.insts]


def tune(func, work: str, trials: int, args, cost_model: str) -> None:
    from msc import meta_schedule as ms

    ms.tune_tir(func, TARGET, work, max_trials_global=trials,
                num_trials_per_iter=args.per_iter, cost_model=cost_model, seed=0,
                min_repeat_ms=args.min_repeat_ms, analytic_starts=False,
                runner="popen", timeout=args.timeout)


def _seconds(work: str) -> float:
    path = os.path.join(work, SECONDS)
    return json.loads(Path(path).read_text())["seconds"] if os.path.exists(path) else 0.0


def _add_seconds(work: str, seconds: float) -> None:
    path = os.path.join(work, SECONDS)
    tmp = path + ".tmp"
    Path(tmp).write_text(json.dumps({"seconds": _seconds(work) + seconds}))
    os.replace(tmp, path)


def run_to(root: str, name: str, func, search: str, count: int, names: list, args) -> None:
    """Measure ``search``'s candidates of ``name`` until ``count`` are in its work_dir; a
    model search first takes in the other workloads' random runs and ``--train-from``."""
    work = f"{root}/{search}_{name}"
    done = len(measured(work, func))
    if done >= count:
        return
    os.makedirs(work, exist_ok=True)
    if search == "model":
        merge_training(work, [f"{root}/random_{n}" for n in names if n != name]
                       + pool_dirs(args.train_from))
    start = time.perf_counter()
    tune(func, work, count - done, args, "random" if search == "random" else "xgb")
    _add_seconds(work, time.perf_counter() - start)
    print(f"# {search} {name}: {len(measured(work, func))} trials, "
          f"{_seconds(work):.0f} s in all", flush=True)


def pool_dirs(roots: list) -> list:
    """The work dirs under ``roots`` (each holds a training file)."""
    from msc.meta_schedule.training import FILE

    return [str(p.parent) for root in roots for p in sorted(Path(root).rglob(FILE))]


def trials_to(times: list, goal: float):
    best = np.minimum.accumulate(times)
    hit = np.nonzero(best <= goal)[0]
    return int(hit[0]) + 1 if len(hit) else None


def merge_training(target_dir: str, sources: list) -> None:
    """Add the candidates of ``sources`` (work dirs) to ``target_dir``'s training set."""
    from msc.meta_schedule.training import TrainingSet

    merged = TrainingSet(target_dir)
    for src in sources:
        merged.extend(TrainingSet(src))
    merged.save()


def spearman(a, b) -> float:
    ra, rb = (np.argsort(np.argsort(v)) for v in (a, b))
    return float(np.corrcoef(ra, rb)[0, 1])


def held_out_corr(train_dirs: list, test_dir: str) -> float | None:
    """Rank correlation on the candidates of ``test_dir`` of a model fit on ``train_dirs``."""
    from msc import meta_schedule as ms
    from msc.meta_schedule.training import TrainingSet

    train = TrainingSet(None)
    for src in train_dirs:
        train.extend(TrainingSet(src))
    test = TrainingSet(test_dir)
    keep = [k for k in range(len(test)) if test.secs[k] < 1e10]
    if len(train) < 8 or len(keep) < 8:
        return None
    model = train.fit(ms.GBTModel())
    x = np.concatenate([test.rows[k] for k in keep])
    groups = np.concatenate([np.full(len(test.rows[k]), i) for i, k in enumerate(keep)])
    pred = model.predict(x, groups)
    return spearman(pred, [-test.secs[k] for k in keep])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=512)
    parser.add_argument("--stages", default="64,128,256,512",
                        help="trial counts every search reaches in turn (capped at --trials)")
    parser.add_argument("--searches", default="random,model")
    parser.add_argument("--per-iter", type=int, default=32)
    parser.add_argument("--workloads", default="matmul512,conv3x3,softmax")
    parser.add_argument("--min-repeat-ms", type=float, default=10.0)
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds a candidate may take to compile and run (a worker "
                             "process measures each: a hang in LLVM costs one candidate)")
    parser.add_argument("--work-dir", required=True, help="the work dirs (resumable)")
    parser.add_argument("--train-from", nargs="*", default=[],
                        help="more work dirs (e.g. random runs of other workloads: "
                             "search_workloads.POOL) the model searches train on")
    parser.add_argument("--report", action="store_true", help="only print the table")
    args = parser.parse_args()

    from msc.backend.runtime.threads import num_threads

    names = args.workloads.split(",")
    funcs = dict(load_workloads(names))
    stages = sorted({min(int(s), args.trials) for s in args.stages.split(",")} |
                    {args.trials})
    if not args.report:
        with num_threads(1):
            for count in stages:
                for search in args.searches.split(","):
                    for name in names:
                        run_to(args.work_dir, name, funcs[name], search, count, names, args)
    print_table(names, funcs, args.work_dir, pool_dirs(args.train_from))


def print_table(names, funcs, root, pool: list) -> None:
    head = ["workload", "trials", "reference best ms", "search", "trials to 90%", "best ms",
            "tuning s", "rank corr (same workload)", "rank corr (other workloads only)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name in names:
        runs = {s: measured(f"{root}/{s}_{name}", funcs[name]) for s in ("random", "model")}
        count = min(len(t) for t in runs.values())
        if count == 0:
            continue
        ref = min(min(t[:count]) for t in runs.values())
        same = held_out_corr([f"{root}/model_{name}"], f"{root}/random_{name}")
        other = held_out_corr([f"{root}/random_{n}" for n in names if n != name] + pool,
                              f"{root}/random_{name}")
        for search, times in runs.items():
            hit = trials_to(times[:count], ref / 0.9)
            corr = ["-", "-"] if search == "random" else \
                [f"{c:.2f}" if c is not None else "-" for c in (same, other)]
            print(f"| {name} | {count} | {ref * 1e3:.3f} | {search} | {hit or '-'} | "
                  f"{min(times[:count]) * 1e3:.3f} | {_seconds(f'{root}/{search}_{name}'):.0f} | "
                  + " | ".join(corr) + " |", flush=True)
    print(f"\nwork dirs: {root}")


if __name__ == "__main__":
    main()
