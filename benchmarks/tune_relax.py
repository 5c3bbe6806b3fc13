"""Whole-model tuning on the real corpus: ``tune_relax`` on the models whose time is largely
in legalized TIR (kernels msc has no native code for), end to end untuned vs tuned vs
onnxruntime, with the trials and seconds the tuning took (issue #31, goal 3).

    .venv/bin/python benchmarks/tune_relax.py                       # the default subset, 1 thread
    .venv/bin/python benchmarks/tune_relax.py --models xlnet --trials 16 --batch 4
    .venv/bin/python benchmarks/tune_relax.py --trials 256 --per-task 64   # a bigger budget

Each model of tests/helpers/corpus.py (small config, random weights) is exported to ONNX
(``corpus_speed.export``); msc builds it through ``from_onnx`` -> ``to_relax`` ->
``relax.build`` (untuned), ``tune_relax`` tunes the legalized kernels of that module on
``--threads`` threads (``--trials`` shared by the tasks, a fresh work_dir per run unless
``--work-dir`` keeps one), and ``compile_relax`` builds it tuned. The TIR share is the part
of a profiled call (``vm.profile``'s clocked plan) spent in compiled TIR kernels, untuned.
The tuned output is checked against onnxruntime's (``max|msc - ORT| <= 1e-3 * max|ORT|``).
Timing: the three contenders interleaved, ``--rounds`` rounds of >= ``--min-time`` s of
calls; each one's time is its fastest single call.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

from benchmarks.common import call_times, interleaved, ms, print_table, ratio
from benchmarks.corpus_speed import batched, export, msc_call, ort_runner

# Models with 15% or more of a batch-1 call in legalized TIR on an Intel Xeon (2026-12-02):
# conv1d (whisper, wav2vec2), einsum (xlnet), instance norm (poolformer), softmax (opt).
DEFAULT = ("whisper_encoder", "xlnet", "poolformer", "wav2vec2", "opt")
CHECK_RTOL = 1e-3


def relax_module(model):
    """The user's Relax module of an ONNX model: from_onnx -> to_relax."""
    from msc.codegen import to_relax
    from msc.frontends.translate import from_onnx

    graph, weights = from_onnx(model)
    with tempfile.TemporaryDirectory() as folder:
        return to_relax(graph, weights, build_folder=folder)


def tir_share(ex, inputs: list, runs: int = 9) -> float:
    """Share of a profiled call's instruction time spent in compiled TIR kernels: the median
    over ``runs`` calls (a call another process interrupted does not decide it)."""
    from msc import relax

    fn = relax.VirtualMachine(ex, relax.cpu(), num_threads=1)["main"]
    values, env = fn.check_args(tuple(inputs))
    entry = fn.profiled_entry(env)
    fn.run_checked(values, env, entry)
    timers, found = entry.plan.runner.timers, []
    for _ in range(runs):
        timers[:] = [0.0] * len(timers)
        fn.run_checked(values, env, entry)
        spent = Counter()
        for k, node in enumerate(entry.plan.nodes):
            spent[node.path == "tir"] += timers[k]
        total = sum(spent.values())
        found.append(spent[True] / total if total else 0.0)
    return float(np.median(found))


def first(value) -> np.ndarray:
    value = value[0] if isinstance(value, (list, tuple)) else value
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def measure(name: str, args, tmp: Path) -> dict:
    from msc import meta_schedule as msched
    from msc import relax
    from tests.helpers.corpus import MODELS

    module, _, inputs = MODELS[name]()
    inputs = batched(inputs, args.batch)
    model = export(module, inputs, tmp / f"{name}_b{args.batch}.onnx")
    mod = relax_module(model)
    untuned = relax.build(mod)
    target = f"llvm --num-cores={args.threads}"
    work_dir = args.work_dir / name if args.work_dir else tmp / f"tune_{name}"
    start = time.perf_counter()
    db = msched.relax_integration.tune_relax(
        mod, target=target, work_dir=str(work_dir), max_trials_global=args.trials,
        max_trials_per_task=args.per_task, num_trials_per_iter=8, min_repeat_ms=args.repeat_ms)
    tune_s = time.perf_counter() - start
    tuned = msched.relax_integration.compile_relax(db, mod, target)
    want = ort_runner(model, inputs, args.threads)()
    got = first(msc_call(tuned, inputs, args.threads)())
    err = float(np.abs(got.astype(np.float64) - want).max()) / max(float(np.abs(want).max()),
                                                                   1e-30)
    fns = {"untuned": msc_call(untuned, inputs, args.threads),
           "tuned": msc_call(tuned, inputs, args.threads),
           "ort": ort_runner(model, inputs, args.threads)}
    seen = interleaved(fns, args.rounds, lambda fn: min(call_times(fn, args.min_time)),
                       pause=0.05)
    results = [r for r in db.results if r is not None]
    return {"model": name, "share": tir_share(untuned, inputs), "tasks": len(db.results),
            "trials": sum(r.trials for r in results), "tune_s": tune_s,
            "tuned_calls": tuned.stats["tuned"], "tir_calls": tuned.stats["kernels"]["tir"],
            "err": err, **{who: min(v) for who, v in seen.items()}}


def cells(row: dict) -> list:
    if "error" in row:
        return [row["model"], row["error"], *["-"] * 9]
    check = "ok" if row["err"] <= CHECK_RTOL else f"WRONG {row['err']:.1e}"
    return [row["model"], f"{row['share']:.0%}", row["tasks"],
            f"{row['tuned_calls']}/{row['tir_calls']}", row["trials"], f"{row['tune_s']:.0f}",
            ms(row["untuned"], digits=3), ms(row["tuned"], digits=3), ms(row["ort"], digits=3),
            ratio(row["tuned"], row["untuned"]), ratio(row["tuned"], row["ort"]) + f" {check}"]


COLUMNS = ["model", "TIR share", "tasks", "tuned calls", "trials", "tuning s", "untuned ms",
           "tuned ms", "ORT ms", "tuned / untuned", "tuned / ORT"]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(DEFAULT), help="comma-separated names")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--trials", type=int, default=48, help="max_trials_global per model")
    parser.add_argument("--per-task", type=int, default=None, help="max_trials_per_task")
    parser.add_argument("--repeat-ms", type=float, default=5.0,
                        help="min_repeat_ms of each candidate's measurement")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.2,
                        help="seconds of calls per contender per round")
    parser.add_argument("--work-dir", type=Path, help="keep the databases here (reused)")
    return parser.parse_args(argv)


def rows(args):
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models.split(","):
            start = time.perf_counter()
            try:
                row = measure(name, args, Path(folder))
            except Exception as err:  # noqa: BLE001  (a failure is a row of the table)
                row = {"model": name, "error": f"{type(err).__name__}: {err}"[:160]}
            print(f"{name}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
            yield cells(row)


def main(argv=None) -> int:
    args = parse_args(argv)
    print(f"batch {args.batch}, {args.threads} thread(s), {args.trials} trials per model")
    print_table(COLUMNS, rows(args), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
