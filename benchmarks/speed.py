"""msc vs onnxruntime vs torch in one run: the light zoo, BERT-base and GPT-2, float and int8,
1 and 2 threads, one table with geomeans per group.

    .venv/bin/python benchmarks/speed.py                      # everything (~15 min, 2 cores)
    .venv/bin/python benchmarks/speed.py --models resnet50 bert --threads 1 --precision int8
    .venv/bin/python benchmarks/speed.py --quick              # squeezenet + a tiny BERT, seconds
    .venv/bin/python benchmarks/speed.py --json out/speed.json

Models (random weights, nothing downloaded, batch 1): every onnx light zoo model
(benchmarks/common.py's random-weight copies, logits), BERT-base and GPT-2 from transformers
configs (benchmarks/transformers.py: exported once by torch.onnx.export, sequence 128).

Float: msc runs the ONNX model through from_onnx -> to_relax -> relax.build, onnxruntime the
same file (its own graph optimizations on). int8: onnxruntime's ``quantize_static`` (QDQ,
per-channel int8 weights, uint8 activations, MinMax over a few random calibration batches,
fixed seed; benchmarks/int8.py) makes ONE QDQ model that msc and onnxruntime both run. The
zoo models are first put through onnxruntime's ``quant_pre_process`` (batch norms folded into
convs); the float contenders run that same pre-processed model.

torch: for BERT-base / GPT-2, the Hugging Face model in eager mode, and for int8
``torch.ao.quantization.quantize_dynamic`` on its Linear layers (GPT-2's Conv1D layers turned
into the equivalent Linear first). For the zoo, torch eager runs msc's generated torch module
(``codegen.to_torch`` of the same graph), and int8 is that module through torch's FX static
quantization (x86 backend, the same calibration batches); where a step fails the cell says
n/a, never a made-up number.

SQNR (dB) of each int8 output against the float model's (onnxruntime float) on held-out
inputs. Timing: every contender of a model (all precisions and thread counts) runs in the same
interleaved rounds, a chunk of at least ``--min-time`` s each per round; the table shows the
best chunk mean, the JSON also the median. Geomeans per group (zoo, transformers, all) and per
(precision, threads) close the table, "ahead" where msc's time is below the anchor's, "even"
where the printed ratio rounds to 1.00x.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# As a script, this folder is sys.path[0] and benchmarks/transformers.py would shadow the
# transformers package: import from the repository root instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

import onnx

from benchmarks import int8
from benchmarks import transformers as hf
from benchmarks.common import (
    batches,
    geomean,
    interleaved,
    light_names,
    ms,
    msc_executable,
    ort_qdq,
    ort_session,
    per_call,
    print_table,
    sqnr,
)
from msc.progress import progress

ZOO = light_names()
TRANSFORMERS = ["bert", "gpt2"]
PRECISIONS = ["float", "int8"]
CONTENDERS = ["msc", "ORT", "torch"]
CALIBRATION, HELD_OUT = 4, 2
# idle time before each contender's chunk: onnxruntime's and torch's worker threads keep
# spinning for a while after a call returns, and on 2 cores that would slow whoever runs next
PAUSE = 0.1


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Contenders: per model, {(precision, who): factory(threads) -> run(x)}, plus the SQNRs.


def first(value) -> np.ndarray:
    return hf.leaves(value)[0]


def msc_factory(ex):
    from msc import relax

    def make(threads: int):
        fn = relax.VirtualMachine(ex, relax.cpu(), num_threads=threads)["main"]
        return lambda x: first(fn(x))
    return make


def ort_factory(model):
    return lambda threads: ort_session(model, threads)


def torch_factory(module):
    import torch

    def make(threads: int):
        def run(x):
            torch.set_num_threads(threads)  # contenders interleave: set it on every call
            with torch.no_grad():
                return hf.leaves_torch(module(torch.from_numpy(x)))[0].numpy()
        return run
    return make


def attempt(what: str, fn, *args):
    """``fn(*args)``, or None (reported on stderr) when it fails: that cell then says n/a."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(*args)
    except Exception as error:  # noqa: BLE001 - any failure of a contender is a n/a cell
        log(f"  n/a: {what}: {type(error).__name__}: {str(error)[:300]}")
        return None


def msc_graph(model):
    from msc.frontends.translate import from_onnx

    return from_onnx(model)


def torch_of_graph(model):
    """msc's generated torch module of ``model`` (codegen.to_torch of from_onnx's graph)."""
    from msc.codegen import to_torch

    graph, weights = msc_graph(model)
    with tempfile.TemporaryDirectory() as folder:
        return to_torch(graph, weights, build_folder=folder).eval()


def torch_static_int8(module, calib: list):
    """torch's own int8 of a CNN: FX static quantization, x86 backend, calibrated on ``calib``."""
    import torch
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    example = (torch.from_numpy(calib[0]),)
    prepared = prepare_fx(module, get_default_qconfig_mapping("x86"), example)
    with torch.no_grad():
        for x in calib:
            prepared(torch.from_numpy(x))
    return convert_fx(prepared)


def torch_dynamic_int8(model):
    """torch's int8 of a transformer: quantize_dynamic on every Linear (GPT-2's Conv1D is a
    Linear with its weight transposed: turned into one first so that it is quantized too)."""
    import copy

    import torch

    model = copy.deepcopy(model)
    for parent in list(model.modules()):
        for name, child in parent.named_children():
            if type(child).__name__ == "Conv1D":
                linear = torch.nn.Linear(*child.weight.shape)
                linear.weight.data = child.weight.data.T.contiguous()
                linear.bias.data = child.bias.data
                setattr(parent, name, linear)
    return torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)


def zoo_case(name: str, quick: bool) -> dict:
    """The float model, its input shape and a draw of inputs for a zoo model."""
    model, shape = int8.model_and_input(name, quick)
    model = int8.preprocessed(model)  # batch norms folded, as onnxruntime recommends
    return {"float": model, "draw": lambda n, seed: batches(shape, n, seed, True),
            "torch": lambda: torch_of_graph(model), "torch int8": torch_static_int8}


def transformer_case(name: str, quick: bool) -> dict:
    """The HF model's ONNX file, its eager model and a draw of input_ids."""
    import transformers

    transformers.logging.set_verbosity_error()
    model = hf.make_model(hf.configs(transformers, quick)[name])
    ids = hf.input_ids(model)
    path = hf.onnx_file(name + ("-tiny" if quick else ""), model, ids)
    vocab = model.config.vocab_size

    def draw(n: int, seed: int) -> list:
        rng = np.random.default_rng(seed)
        return [rng.integers(0, vocab, ids.shape, dtype=np.int64) for _ in range(n)]

    # no quant_pre_process here: onnxruntime fails to load its output of BERT-base
    return {"float": onnx.load(path), "draw": draw, "torch": lambda: model,
            "torch int8": lambda module, calib: torch_dynamic_int8(module)}


def contenders(name: str, args) -> tuple[dict, dict, np.ndarray]:
    """({(precision, who): factory or None}, {who: SQNR dB}, the timed input)."""
    case = (transformer_case if name in TRANSFORMERS else zoo_case)(name, args.quick)
    model, calib, held_out = case["float"], case["draw"](CALIBRATION, 1), case["draw"](HELD_OUT, 2)
    made: dict = {}
    module = attempt(f"{name} torch", case["torch"])
    made[("float", "ORT")] = model  # also the reference of the SQNRs
    if "float" in args.precision:
        made[("float", "msc")] = attempt(f"{name} msc float", msc_executable, model)
        made[("float", "torch")] = module
    if "int8" in args.precision:
        qmodel = attempt(f"{name} quantize_static", ort_qdq, model,
                         model.graph.input[0].name, calib)
        made[("int8", "msc")] = qmodel and attempt(f"{name} msc int8", msc_executable,
                                                   qmodel)
        made[("int8", "ORT")] = qmodel
        made[("int8", "torch")] = module and attempt(f"{name} torch int8", case["torch int8"],
                                                     module, calib)
    kinds = {"msc": msc_factory, "ORT": ort_factory, "torch": torch_factory}
    factories = {key: None if value is None else kinds[key[1]](value)
                 for key, value in made.items()}
    return factories, quality(factories, held_out), held_out[0]


def quality(factories: dict, held_out: list) -> dict:
    """SQNR (dB) of each int8 contender against onnxruntime float, one thread."""
    ref_fn = factories.get(("int8", "ORT")) and attempt("ORT float", factories[("float", "ORT")], 1)
    ref = ref_fn and attempt("ORT float reference", lambda: [ref_fn(x) for x in held_out])
    if ref is None:
        return {}
    out = {}
    for who in CONTENDERS:
        make = factories.get(("int8", who))
        if make is not None:
            out[who] = attempt(f"SQNR {who}", lambda fn: sqnr(ref, [fn(x) for x in held_out]),
                               make(1))
    return out


# ---------------------------------------------------------------------------------------------
# Timing


def rounds(fns: dict, repeats: int, min_time: float) -> dict[str, list[float]]:
    """Seconds per call of each contender in every round; rounds interleave the contenders, so
    load from other processes hits all alike."""
    return interleaved(fns, repeats, lambda fn: per_call(fn, min_time),
                       pause=min(PAUSE, min_time))


def measure(name: str, args) -> dict:
    """One model's row: {"cells": {(precision, threads, who): [seconds...] or None}, "sqnr"}."""
    factories, db, x = contenders(name, args)
    fns, cells = {}, {}
    for (precision, who), make in factories.items():
        for threads in args.threads if precision in args.precision else []:
            key = (precision, threads, who)
            fn = make and attempt(f"{name} {key}", make, threads)
            if fn is not None and attempt(f"{name} {key} run", fn, x) is not None:
                fns[key] = lambda fn=fn: fn(x)
            cells[key] = None
    cells.update(rounds(fns, args.repeats, args.min_time))
    return {"model": name, "group": "transformers" if name in TRANSFORMERS else "zoo",
            "cells": cells, "sqnr": db}


# ---------------------------------------------------------------------------------------------
# Report


def configs(args) -> list[tuple[str, int]]:
    return [(p, t) for p in PRECISIONS if p in args.precision for t in args.threads]


def best(row: dict, precision: str, threads: int, who: str, pick=min) -> float | None:
    seen = row["cells"].get((precision, threads, who))
    return float(pick(seen)) if seen else None


def ratio(row: dict, config: tuple, anchor: str, pick=min) -> float | None:
    msc, other = best(row, *config, "msc", pick), best(row, *config, anchor, pick)
    return msc / other if msc and other else None


def groups(rows: list) -> dict[str, list]:
    found = {g: [r for r in rows if r["group"] == g] for g in ("zoo", "transformers")}
    return {**{g: sel for g, sel in found.items() if sel}, "all": rows}


def columns(args) -> list[str]:
    cols = ["model", "group"]
    for precision, threads in configs(args):
        tag = f"{precision} {threads}T"
        cols += [f"{tag} {who} ms" for who in CONTENDERS]
        cols += [f"{tag} msc/ORT", f"{tag} msc/torch"]
    if "int8" in args.precision:
        cols += [f"int8 SQNR {who} dB" for who in CONTENDERS]
    return cols


def _times(value: float | None, mark: bool = False) -> str:
    if value is None:
        return "n/a"
    shown = f"{value:.2f}"
    if not mark:
        return shown + "x"
    # the word follows the printed figure, so 0.997 is "1.00x even", never "1.00x ahead"
    word = "even" if shown == "1.00" else ("ahead" if float(shown) < 1 else "behind")
    return f"{shown}x {word}"


def model_cells(row: dict, args) -> list[str]:
    cells = [row["model"], row["group"]]
    for config in configs(args):
        cells += [ms(best(row, *config, who), "n/a") for who in CONTENDERS]
        cells += [_times(ratio(row, config, anchor)) for anchor in ("ORT", "torch")]
    if "int8" in args.precision:
        cells += ["n/a" if row["sqnr"].get(w) is None else f"{row['sqnr'][w]:.1f}"
                  for w in CONTENDERS]
    return cells


def geomean_cells(group: str, sel: list, args, pick=min) -> list[str]:
    cells = [f"geomean {group}", f"{len(sel)} models"]
    for config in configs(args):
        cells += ["-"] * len(CONTENDERS)
        cells += [_times(geomean([ratio(r, config, a, pick) for r in sel]), mark=True)
                  for a in ("ORT", "torch")]
    return cells + ["-"] * (len(CONTENDERS) if "int8" in args.precision else 0)


def print_report(rows: list, args) -> None:
    print_table(columns(args), [*(model_cells(row, args) for row in rows),
                                *(geomean_cells(group, sel, args)
                                  for group, sel in groups(rows).items())])
    print("\nThe same geomeans from each contender's median round (best-of above):")
    for group, sel in groups(rows).items():
        cells = geomean_cells(group, sel, args, pick=np.median)
        pairs = [f"{p} {t}T msc/ORT {cells[2 + 5 * i + 3]}, msc/torch {cells[2 + 5 * i + 4]}"
                 for i, (p, t) in enumerate(configs(args))]
        print(f"  {group}: " + "; ".join(pairs))


def header(args) -> list[str]:
    load = subprocess.run(["uptime"], check=False, capture_output=True, text=True).stdout.strip()
    return [f"uptime: {load}",
            (f"interleaved rounds: {args.repeats}, chunks of >= {args.min_time} s per contender; "
             "times are the best round's mean per call (ms)"),
            ("msc and ORT run the same ONNX model; int8 = one onnxruntime quantize_static QDQ "
             "model for both (random calibration, seed 1)"),
            ("torch: transformers = Hugging Face eager, int8 quantize_dynamic(Linear); zoo = "
             "msc's generated module (codegen.to_torch of the same graph), int8 FX static (x86)")]


def to_json(rows: list, args) -> dict:
    def cell(seen):
        return None if not seen else {"best": min(seen), "median": float(np.median(seen)),
                                      "rounds": seen}
    out_rows = [{"model": r["model"], "group": r["group"], "sqnr_db": r["sqnr"],
                 "seconds": {f"{p} {t}T {w}": cell(seen)
                             for (p, t, w), seen in r["cells"].items()}} for r in rows]
    means = {f"{g} {p} {t}T msc/{a}": geomean([ratio(r, (p, t), a) for r in sel])
             for g, sel in groups(rows).items() for p, t in configs(args) for a in ("ORT", "torch")}
    return {"header": header(args), "rows": out_rows, "geomean": means}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=ZOO + TRANSFORMERS,
                        help=f"any of {ZOO + TRANSFORMERS}")
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--precision", nargs="+", choices=PRECISIONS, default=PRECISIONS)
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--min-time", type=float, default=0.1, help="seconds per chunk")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: squeezenet + a tiny BERT, 1 thread, 1 round")
    parser.add_argument("--json", help="also write every figure (best, median, rounds) here")
    args = parser.parse_args(argv)
    if args.quick:
        args.models, args.threads, args.repeats, args.min_time = (
            ["squeezenet", "bert"], [1], 1, 0.01)
    unknown = sorted(set(args.models) - set(ZOO + TRANSFORMERS))
    if unknown:
        parser.error(f"unknown models {unknown}: choose from {ZOO + TRANSFORMERS}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    rows, start = [], time.perf_counter()
    for name in progress(args.models, desc="models"):
        log(f"{name} ({time.perf_counter() - start:.0f} s)")
        rows.append(measure(name, args))
    for line in header(args):
        print(line)
    print()
    print_report(rows, args)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(to_json(rows, args), indent=1))
    log(f"done in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
