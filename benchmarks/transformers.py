"""BERT-base and GPT-2 on msc's backend vs onnxruntime and torch eager, 1 and 2 threads.

    .venv/bin/python benchmarks/transformers.py                   # both models, both routes
    .venv/bin/python benchmarks/transformers.py --models bert --threads 1 --profile
    .venv/bin/python benchmarks/transformers.py --tiny            # hidden 64: a quick check

Models are built from transformers configs with random weights (seed 0, nothing downloaded):
BERT-base (``BertConfig()``: 12 layers, hidden 768, 12 heads) and GPT-2 (``GPT2Config()``, the
124M model), batch 1, sequence 128, ``input_ids`` only. Each is imported into msc twice:
through ``from_torch`` (torch.export) and through ONNX (``torch.onnx.export``, the dynamo
exporter; the written file is cached under ``out/bench_transformers/``). Both routes are built
with ``relax.build``; onnxruntime runs the same ONNX file (all graph optimizations, its fused
attention / layer norm / gelu included) with ``intra_op_num_threads``; torch runs the eager
model under ``torch.set_num_threads``. Every msc output is checked against torch's before
timing (max abs difference <= ``ATOL`` + ``RTOL`` * |torch|, else the row says FAIL).

Timing: per thread count, the four contenders run interleaved (one chunk of calls of at least
``--min-time`` s each per round, ``--repeats`` rounds) and each figure is the fastest single
call seen (a chunk's mean would count the time other processes held the core). The
table gives msc / onnxruntime and msc / torch per route and the geomean over models. On this
shared machine only ratios from one run mean anything; ``uptime`` is printed with them.

``--profile``: msc's time per op (top ops by total time, one thread) for each model and route,
measured by calling every op by itself (no native chains), so the total is a little above the
timed latency.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import hashlib
import math
import subprocess
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# Run as a script, this file's folder is sys.path[0], and this file would shadow the
# transformers package it benchmarks: import from the repository root instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

from benchmarks.common import best_call_seconds, geomean, ms, print_table, ratio
from msc.progress import progress

SEQ = 128
ATOL, RTOL = 1e-4, 1e-4
CACHE = ROOT / "out" / "bench_transformers"
WEIGHTS = "seed0+noise0.02"  # part of the cached ONNX file's key: how make_model fills weights


# ---------------------------------------------------------------------------------------------
# Models


def configs(transformers, tiny: bool) -> dict:
    """name -> a builder of the model (eval mode, random weights)."""
    T = transformers
    if tiny:
        from tests.helpers.hf_models import tiny_hf_models

        small = tiny_hf_models(T, layers=2)
        return {"bert": small["bert"], "gpt2": small["gpt2"]}
    return {
        "bert": lambda: T.BertModel(T.BertConfig()),
        "gpt2": lambda: T.GPT2Model(T.GPT2Config(use_cache=False)),
    }


def make_model(builder):
    """The model with every parameter moved by N(0, 0.02) noise: Hugging Face initializes
    biases to 0 and layer norms to 1, which would hide a bias or gamma mix-up."""
    import torch

    torch.manual_seed(0)
    model = builder().eval()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.02)
    return model


def input_ids(model) -> np.ndarray:
    vocab = model.config.vocab_size
    seq = min(SEQ, getattr(model.config, "max_position_embeddings", None)
              or model.config.n_positions)
    return np.random.default_rng(1).integers(0, vocab, (1, seq), dtype=np.int64)


def onnx_file(name: str, model, ids: np.ndarray) -> Path:
    """The model written by torch.onnx.export (dynamo), cached by config and versions."""
    import torch
    import transformers

    key = hashlib.sha256("|".join([WEIGHTS, model.config.to_json_string(), torch.__version__,
                                   transformers.__version__, str(ids.shape)]).encode())
    path = CACHE / f"{name}-{key.hexdigest()[:12]}.onnx"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.onnx")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, (torch.from_numpy(ids),), str(tmp), dynamo=True,
                              input_names=["input_ids"], external_data=False, verbose=False)
        os.replace(tmp, path)
    return path


# ---------------------------------------------------------------------------------------------
# Contenders


def leaves(value) -> list:
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in leaves(v)]
    return [np.asarray(value.numpy() if hasattr(value, "numpy") else value)]


def msc_builds(model, ids: np.ndarray, path: Path) -> dict:
    """route -> (executable, build seconds incl. import) for from_torch and ONNX."""
    import onnx

    from msc import relax
    from msc.frontends.onnx.api import from_onnx
    from msc.frontends.torch import translate_torch

    out = {}
    for route in ("from_torch", "onnx"):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if route == "from_torch":
                mod = translate_torch(model, [(list(ids.shape), "int64")]).mod
            else:
                mod, _ = from_onnx(onnx.load(str(path)), as_msc=False)
        ex = relax.build(mod)
        out[route] = (ex, time.perf_counter() - start)
    return out


def msc_runner(ex, ids: np.ndarray, threads: int):
    from msc import relax

    fn = relax.VirtualMachine(ex, relax.cpu(), num_threads=threads)["main"]
    return lambda: fn(ids)


def ort_runner(path: Path, ids: np.ndarray, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feeds = {session.get_inputs()[0].name: ids}
    return lambda: session.run(None, feeds)


def torch_runner(model, ids: np.ndarray, threads: int):
    import torch

    x = torch.from_numpy(ids)

    def run():
        torch.set_num_threads(threads)  # contenders interleave: set it for every call
        with torch.no_grad():
            return model(x)

    return run


def max_error(got: list, expected: list) -> float:
    """The largest |msc - torch| / (ATOL + RTOL |torch|) over all outputs (<= 1 passes)."""
    if len(got) != len(expected):
        return math.inf
    worst = 0.0
    for g, e in zip(got, expected):
        if g.shape != e.shape:
            return math.inf
        err = np.abs(g.astype(np.float64) - e) / (ATOL + RTOL * np.abs(e))
        worst = max(worst, float(err.max()) if err.size else 0.0)
    return worst


# ---------------------------------------------------------------------------------------------
# Per-op profile


def profile(ex, ids: np.ndarray, rounds: int = 3) -> list[tuple[str, float, int]]:
    """(op [path], ms per run, calls per run), slowest first: each call node's function
    wrapped with a timer, planned without native chains, run on one thread."""
    from msc import relax
    from msc.backend.runtime.plan import make_plan
    from msc.backend.runtime.vm import _PlanEntry

    program = ex.programs["main"]
    totals: dict = defaultdict(float)
    calls: dict = defaultdict(int)
    saved = []
    for node in program.walk():
        if node.kind == "call" and node.fn is not None:
            saved.append((node, node.fn, node.tir))
            key = f"{node.op} [{node.path}]"
            node.fn, node.tir = _timed(node.fn, key, totals, calls), None
    try:
        fn = relax.VirtualMachine(ex, relax.cpu(), num_threads=1)["main"]
        fn._entries[()] = _PlanEntry(make_plan(program, {}, native=False, chains=False))
        fn(ids)
        totals.clear()
        calls.clear()
        for _ in range(rounds):
            fn(ids)
    finally:
        for node, f, tir in saved:
            node.fn, node.tir = f, tir
    rows = [(op, t * 1e3 / rounds, calls[op] // rounds) for op, t in totals.items()]
    return sorted(rows, key=lambda r: -r[1])


def _timed(fn, key: str, totals: dict, calls: dict):
    clock = time.perf_counter

    def timed(*args):
        start = clock()
        result = fn(*args)
        totals[key] += clock() - start
        calls[key] += 1
        return result

    return timed


def print_profile(name: str, route: str, rows: list, top: int = 14) -> None:
    total = sum(r[1] for r in rows)
    print(f"\n{name} / {route}: msc per op, 1 thread, {total:.1f} ms in ops")
    print_table(["op [path]", "ms", "calls", "share"],
                ([op, f"{op_ms:.2f}", n, f"{op_ms / total:.0%}"] for op, op_ms, n in rows[:top]))


# ---------------------------------------------------------------------------------------------
# The run


def bench_model(name: str, builder, args) -> list[dict]:
    """Rows (one per route and thread count) for one model."""
    model = make_model(builder)
    ids = input_ids(model)
    path = onnx_file(name + ("-tiny" if args.tiny else ""), model, ids)
    import torch

    with torch.no_grad():
        expected = [t.numpy() for t in leaves_torch(model(torch.from_numpy(ids)))]
    builds = msc_builds(model, ids, path)
    errors = {}
    for route, (ex, _) in builds.items():
        errors[route] = max_error(leaves(msc_runner(ex, ids, 1)()), expected)
        if args.profile:
            print_profile(name, route, profile(ex, ids))
    rows = []
    for threads in args.threads:
        fns = {f"msc {route}": msc_runner(ex, ids, threads) for route, (ex, _) in builds.items()}
        fns["ort"] = ort_runner(path, ids, threads)
        fns["torch"] = torch_runner(model, ids, threads)
        best = best_call_seconds(fns, args.repeats, args.min_time)
        for route, (ex, build_s) in builds.items():
            msc = best[f"msc {route}"]
            rows.append({"model": name, "route": route, "threads": threads, "msc": msc,
                         "ort": best["ort"], "torch": best["torch"], "error": errors[route],
                         "build": build_s, "kernels": ex.stats["kernels"]})
    return rows


def leaves_torch(value) -> list:
    import torch

    flat, _ = torch.utils._pytree.tree_flatten(value)
    return [leaf.detach() for leaf in flat if isinstance(leaf, torch.Tensor)]


COLUMNS = ["model", "route", "threads", "msc ms", "ORT ms", "torch ms", "msc / ORT",
           "msc / torch", "error / tol", "msc build s", "msc kernels"]


def _cells(r: dict) -> list[str]:
    k = r["kernels"]
    ok = f"{r['error']:.3f}" if r["error"] <= 1 else f"FAIL {r['error']:.3g}"
    return [r["model"], r["route"], r["threads"], ms(r["msc"], digits=1), ms(r["ort"], digits=1),
            ms(r["torch"], digits=1), ratio(r["msc"], r["ort"]), ratio(r["msc"], r["torch"]), ok,
            f"{r['build']:.1f}", f"{k['native']} native / {k['tir']} tir / {k['numpy']} numpy"]


def print_report(rows: list) -> None:
    print()
    print_table(COLUMNS, (_cells(r) for r in rows))
    print()
    for threads in sorted({r["threads"] for r in rows}):
        for route in ("from_torch", "onnx"):
            sel = [r for r in rows if r["threads"] == threads and r["route"] == route]
            if sel:
                ort = geomean([r["msc"] / r["ort"] for r in sel], math.nan)
                tor = geomean([r["msc"] / r["torch"] for r in sel], math.nan)
                print(f"geomean {threads} thread(s), {route}: msc / onnxruntime {ort:.2f}x, "
                      f"msc / torch {tor:.2f}x over {len(sel)} models")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=["bert", "gpt2"])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.5)
    parser.add_argument("--profile", action="store_true", help="msc's time per op")
    parser.add_argument("--tiny", action="store_true", help="hidden 32, 2 layers: a smoke run")
    args = parser.parse_args(argv)
    import transformers

    transformers.logging.set_verbosity_error()
    builders = configs(transformers, args.tiny)
    rows = []
    for name in progress(args.models, desc="models"):
        rows += bench_model(name, builders[name], args)
    print_report(rows)
    print(subprocess.run(["uptime"], check=False, capture_output=True, text=True).stdout.strip())
    return 0 if all(r["error"] <= 1 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
