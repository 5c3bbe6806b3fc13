"""The real corpus's speed: msc against onnxruntime and torch eager on every vision and text
model of tests/helpers/corpus.py (issue #33's "Done when" table).

    .venv/bin/python benchmarks/corpus_speed.py                      # every model, 1 and 2 threads
    .venv/bin/python benchmarks/corpus_speed.py --precision float int8   # both tables + verdict
    .venv/bin/python benchmarks/corpus_speed.py --models bert,swin --threads 1
    .venv/bin/python benchmarks/corpus_speed.py --families cnn,vit --json out/corpus_speed.json
    .venv/bin/python benchmarks/corpus_speed.py --list               # the models, by family

Each model (small configs, random weights, nothing downloaded) is exported to ONNX once per
batch size with ``torch.onnx.export``; msc (``from_onnx`` -> ``to_relax`` -> ``relax.build``,
the user's path) and onnxruntime (CPU provider) load that same file, and torch eager runs the
module it came from. Batches: 1, and the batch torch.compile's benchmark lists
(``benchmarks/dynamo/{timm,huggingface}_models_list.txt``) give the architecture, capped at
``--max-batch`` (16): the lists size batches for full-size models on GPUs, and the corpus's
models are 2-stage, hidden-32 toys. msc's output is checked against onnxruntime's first
(``max|msc - ORT| <= 1e-3 * max|ORT|``, else the row says ``WRONG``).

``--int8`` times onnxruntime's ``quantize_static`` QDQ model of each file instead (per-channel
int8 weights, uint8 activations, calibrated on the input), which both runtimes load; msc/torch
is then against torch's float eager. The check's reference is then the QDQ model's own value:
onnxruntime with its graph optimizations off (every DequantizeLinear -> float op ->
QuantizeLinear run as written), allowing 5e-2 of its max (neighbouring quantization steps).
onnxruntime's optimized run, the one timed, fuses QDQ chains into its int8 kernels, which round
differently; a row where that run is further than 5e-2 from the QDQ model's value says
``(ORT opt off)``.

Timing: for each thread count the three contenders run interleaved, ``--rounds`` rounds of
>= ``--min-time`` s of calls each; a contender's time is its fastest single call in wall time
(the fastest call is the one no other process interrupted). Ratios below 1.00 mean msc is
faster. Geomeans are per family: CNN, ViT/Swin (vision transformers and hybrids), text
encoders, decoders. A progress line per model goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# As a script, this folder is sys.path[0]; benchmarks/transformers.py would shadow the
# transformers package: import from the repository root instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

from benchmarks.common import call_times, geomean, interleaved, msc_executable, msc_runner
from tests.helpers.corpus import MODELS

# The family of each corpus model in the table.
FAMILY = {
    "cnn": ["inception_v3", "ghostnet", "nfnet", "repvgg", "mobilenetv3", "tf_efficientnet",
            "resnet", "convnextv2", "mobilenetv2", "efficientnet", "regnet", "poolformer"],
    "vit": ["vit", "deit", "beit", "swin", "dinov2", "siglip_vision", "levit", "mobilevit"],
    "encoder": ["albert", "bert", "distilbert", "roberta", "mobilebert", "t5_encoder", "xlnet",
                "whisper_encoder", "wav2vec2"],
    "decoder": ["bart", "electra", "gpt2", "gpt_neo", "opt", "llama", "gemma2", "gemma3",
                "qwen3", "mistral"],
}
FAMILY_NAMES = {"cnn": "CNN", "vit": "ViT/Swin", "encoder": "text encoders",
                "decoder": "decoders"}
FAMILY_OF = {model: family for family, models in FAMILY.items() for model in models}

# torch.compile's batch for the architecture (timm_models_list.txt, huggingface_models_list
# .txt); models on neither list take their list's usual batch (timm 128, Hugging Face 8).
LIST_BATCH = {
    "inception_v3": 128, "ghostnet": 512, "nfnet": 128, "repvgg": 128, "mobilenetv3": 512,
    "tf_efficientnet": 128, "resnet": 128, "convnextv2": 128, "mobilenetv2": 128,
    "efficientnet": 128, "regnet": 128, "poolformer": 128, "vit": 128, "deit": 128, "beit": 128,
    "swin": 128, "dinov2": 128, "siglip_vision": 128, "levit": 128, "mobilevit": 128,
    "albert": 8, "bart": 8, "bert": 32, "distilbert": 256, "electra": 64, "gpt2": 32,
    "gpt_neo": 32, "opt": 4, "roberta": 32, "t5_encoder": 8, "xlnet": 16, "mobilebert": 256,
    "llama": 8, "gemma2": 8, "gemma3": 8, "qwen3": 8, "mistral": 8, "whisper_encoder": 8,
    "wav2vec2": 8,
}
# Seconds idle before each contender's turn: onnxruntime's and torch's worker threads spin
# for a while after a call returns, and on 2 cores they would take the next contender's.
PAUSE = 0.05
CHECK_RTOL = 1e-3  # of max|onnxruntime|: msc and ORT run the same float32 file
# int8: the runtimes may round a requantized value to neighbouring steps, and a step moves
# what follows; a wrong kernel is off by far more
INT8_RTOL = 5e-2


@contextlib.contextmanager
def quiet_export():
    """torch's exporters write whole graphs and progress to the stdout / stderr file
    descriptors (from C++ too); keep them out of the table and the progress lines."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)
        os.close(null)


def export(module, inputs: list, path: Path):
    """The ONNX model of ``module`` on ``inputs``: the TorchScript exporter, else dynamo."""
    import onnx
    import torch

    args = tuple(torch.from_numpy(x) for x in inputs)
    with warnings.catch_warnings(), quiet_export():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(module, args, str(path), dynamo=False)
        except Exception:  # noqa: BLE001  (the TorchScript exporter is gone or refuses)
            torch.onnx.export(module, args, str(path), dynamo=True, external_data=False)
    return onnx.load(str(path))


def batched(inputs: list, batch: int) -> list[np.ndarray]:
    """The corpus's batch-1 inputs with ``batch`` rows: distinct random rows of the same kind."""
    rng = np.random.default_rng(batch)
    out = []
    for x in inputs:
        if x.dtype == np.int64:
            draw = rng.integers(0, int(x.max()) + 1, (batch, *x.shape[1:]), dtype=np.int64)
        else:
            draw = rng.standard_normal((batch, *x.shape[1:]), dtype=np.float32)
        out.append(np.concatenate([x, draw[1:]]) if batch > 1 else x)
    return out


def ort_runner(model, inputs: list, count: int, literal: bool = False):
    """onnxruntime on ``model``; ``literal``: graph optimizations off (the QDQ model's value)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = count, 1
    options.log_severity_level = 3
    if literal:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    feeds = {i.name: x for i, x in zip(session.get_inputs(), inputs)}
    return lambda: session.run(None, feeds)[0]


def torch_runner(module, inputs: list, count: int):
    import torch

    args = [torch.from_numpy(x) for x in inputs]

    def run():
        if torch.get_num_threads() != count:  # setting it, even unchanged, rebuilds the pool
            torch.set_num_threads(count)
        with torch.no_grad():
            return module(*args)
    return run


def msc_call(ex, inputs: list, count: int):
    run = msc_runner(ex, count)
    if len(inputs) == 1:
        return lambda: run(inputs[0])
    from msc import relax

    fn = relax.VirtualMachine(ex, relax.cpu(), num_threads=count)["main"]
    return lambda: fn(*inputs)


class ReferenceRefused(RuntimeError):
    """onnxruntime cannot run the file (t5_encoder's int8 QDQ file): the row has no figure,
    and the verdict does not count it against msc."""


def measure_batch(name: str, batch: int, threads: list, args, tmp: Path) -> dict:
    """``{"batch", "build_s", "err", "threads": {n: {msc, ort, torch seconds}}}`` of one batch
    size of one model."""
    module, _, inputs = MODELS[name]()
    inputs = batched(inputs, batch)
    model = export(module, inputs, tmp / f"{name}_b{batch}.onnx")
    if args.int8:  # onnxruntime's QDQ file of it, calibrated on the input: both run it
        from tests.helpers.qdq_models import ort_quantize

        folder = tmp / f"{name}_b{batch}_int8"
        folder.mkdir(exist_ok=True)
        model = ort_quantize(model, inputs[:1], folder, model.graph.input[0].name)
    start = time.perf_counter()
    ex = msc_executable(model)
    out = {"batch": batch, "build_s": time.perf_counter() - start, "threads": {},
           "rtol": INT8_RTOL if args.int8 else CHECK_RTOL}
    try:
        want = ort_runner(model, inputs, threads[0], literal=args.int8)()
    except Exception as err:  # onnxruntime's own error types
        raise ReferenceRefused(f"onnxruntime refuses the file: {type(err).__name__}: "
                               f"{str(err).strip().splitlines()[0][:160]}") from err
    got = msc_call(ex, inputs, threads[0])()
    got = got[0] if isinstance(got, (list, tuple)) else got
    got = got.numpy() if hasattr(got, "numpy") else np.asarray(got)
    scale = max(float(np.abs(want).max()), 1e-30)
    out["err"] = float(np.abs(got.astype(np.float64) - want).max()) / scale \
        if got.shape == want.shape else float("inf")
    if args.int8:  # how far onnxruntime's optimized (timed) run is from the QDQ model's value
        fused = ort_runner(model, inputs, threads[0])()
        out["ort_err"] = float(np.abs(fused.astype(np.float64) - want).max()) / scale
    for count in threads:
        fns = {"msc": msc_call(ex, inputs, count), "ort": ort_runner(model, inputs, count),
               "torch": torch_runner(module, inputs, count)}
        seen = interleaved(fns, args.rounds, lambda fn: min(call_times(fn, args.min_time)),
                           pause=PAUSE)
        out["threads"][count] = {who: min(values) for who, values in seen.items()}
    return out


def measure_model(name: str, args, tmp: Path) -> dict:
    """One model: its batches, or the error that stopped it."""
    batches = sorted({1, min(LIST_BATCH.get(name, 8), args.max_batch)})
    if args.batch_one:
        batches = [1]
    row = {"model": name, "family": FAMILY_OF[name], "runs": []}
    try:
        for batch in batches:
            row["runs"].append(measure_batch(name, batch, args.threads, args, tmp))
    except Exception as err:  # noqa: BLE001  (every failure is a row of the table)
        row["error"] = f"{type(err).__name__}: {str(err).strip().splitlines()[0][:200]}" \
            if str(err).strip() else type(err).__name__
    return row


def progress_line(row: dict, seconds: float) -> str:
    parts = []
    for run in row["runs"]:
        for count, t in run["threads"].items():
            parts.append(f"b{run['batch']} {count}T {t['msc'] / t['ort']:.2f}x ORT "
                         f"{t['msc'] / t['torch']:.2f}x torch")
    tail = f"; {row['error']}" if "error" in row else ""
    return f"{row['model']} ({seconds:.0f} s): " + ", ".join(parts) + tail


# ---------------------------------------------------------------------------------------------
# The report


def columns(threads: list) -> list[tuple[int, str]]:
    """(threads, batch key) per column group: batch 1, then the list's batch."""
    return [(count, key) for count in threads for key in ("1", "list")]


def _run_of(row: dict, key: str):
    runs = row["runs"]
    if key == "1":
        return next((r for r in runs if r["batch"] == 1), None)
    return next((r for r in runs if r["batch"] != 1), None)


def ratios(row: dict, count: int, key: str) -> tuple:
    """(msc seconds, msc/ORT, msc/torch) of one column group, or Nones."""
    run = _run_of(row, key)
    if run is None or count not in run["threads"]:
        return None, None, None
    t = run["threads"][count]
    return t["msc"], t["msc"] / t["ort"], t["msc"] / t["torch"]


def table(rows: list, threads: list) -> list[str]:
    groups = columns(threads)
    head = ["model", "family", "B"]
    for count, key in groups:
        label = f"{count}T b{'1' if key == '1' else 'B'}"
        head += [f"{label} msc ms", f"{label} /ORT", f"{label} /torch"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        batch = max((r["batch"] for r in row["runs"]), default="-")
        cells = [row["model"], FAMILY_NAMES[row["family"]], str(batch)]
        for count, key in groups:
            seconds, to_ort, to_torch = ratios(row, count, key)
            cells += ["-", "-", "-"] if seconds is None else \
                [f"{seconds * 1e3:.2f}", f"{to_ort:.2f}", f"{to_torch:.2f}"]
        wrong = [r["batch"] for r in row["runs"] if not r["err"] <= r.get("rtol", CHECK_RTOL)]
        if wrong or "error" in row:
            cells[0] += " (WRONG)" if wrong else f" ({row['error'][:60]})"
        if any(r.get("ort_err", 0) > r.get("rtol", CHECK_RTOL) for r in row["runs"]):
            cells[0] += " (ORT opt off)"
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def geomeans(rows: list, threads: list) -> list[str]:
    """Per family and over all: geomean msc/ORT and msc/torch of each column group."""
    groups = columns(threads)
    head = ["family", "models"] + [f"{c}T b{'1' if k == '1' else 'B'} /ORT (/torch)"
                                   for c, k in groups]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for family in [*FAMILY, None]:
        members = [r for r in rows if family is None or r["family"] == family]
        if not members:
            continue
        cells = [FAMILY_NAMES.get(family, "all"), str(len(members))]
        for count, key in groups:
            to_ort = geomean([ratios(r, count, key)[1] for r in members])
            to_torch = geomean([ratios(r, count, key)[2] for r in members])
            cells.append("-" if to_ort is None else f"{to_ort:.2f} ({to_torch:.2f})")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def above(rows: list, threads: list, limit: float = 1.15) -> list[str]:
    """Every (model, threads, batch) above ``limit`` x onnxruntime, worst first."""
    found = []
    for row in rows:
        for count, key in columns(threads):
            _, to_ort, _ = ratios(row, count, key)
            if to_ort is not None and to_ort > limit:
                found.append((to_ort, f"{row['model']} {count}T b{key}"))
    return [f"{label} {value:.2f}" for value, label in sorted(found, reverse=True)]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", help="comma-separated names (default: all)")
    parser.add_argument("--families", help=f"comma-separated: {', '.join(FAMILY)}")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--min-time", type=float, default=0.05,
                        help="seconds of calls per contender per round")
    parser.add_argument("--max-batch", type=int, default=16)
    parser.add_argument("--batch-one", action="store_true", help="batch 1 only")
    parser.add_argument("--precision", nargs="+", choices=("float", "int8"), default=None,
                        help="float32 (default), int8 (onnxruntime's quantize_static QDQ file "
                             "of each model; msc/torch against torch's float eager), or both: "
                             "one table each, then the verdict over both")
    parser.add_argument("--int8", action="store_true", help="the same as --precision int8")
    parser.add_argument("--json", type=Path, help="write every measurement here")
    parser.add_argument("--list", action="store_true", help="list the models and stop")
    args = parser.parse_args(argv)
    args.precision = args.precision or (["int8"] if args.int8 else ["float"])
    return args


def selected(args) -> list[str]:
    names = [n for n in MODELS if n in FAMILY_OF]
    if args.families:
        wanted = args.families.split(",")
        bad = [f for f in wanted if f not in FAMILY]
        if bad:
            raise SystemExit(f"unknown family {bad[0]!r}: one of {', '.join(FAMILY)}")
        names = [n for n in names if FAMILY_OF[n] in wanted]
    if args.models:
        wanted = args.models.split(",")
        bad = [m for m in wanted if m not in FAMILY_OF]
        if bad:
            raise SystemExit(f"unknown model {bad[0]!r} (see --list)")
        names = [n for n in names if n in wanted]
    return names


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.list:
        for name in MODELS:
            if name in FAMILY_OF:
                print(f"{FAMILY_NAMES[FAMILY_OF[name]]:14s} {name} (list batch "
                      f"{LIST_BATCH.get(name, 8)})")
        return 0
    warnings.simplefilter("ignore")
    logging.getLogger("msc").setLevel(logging.ERROR)
    logging.getLogger().setLevel(logging.ERROR)  # quantize_static's advice, per model
    every, start, verdicts = [], time.perf_counter(), []
    for precision in args.precision:
        args.int8 = precision == "int8"
        rows = []
        with tempfile.TemporaryDirectory(prefix="msc_corpus_speed_") as tmp:
            for name in selected(args):
                began = time.perf_counter()
                rows.append({**measure_model(name, args, Path(tmp)), "precision": precision})
                print(progress_line(rows[-1], time.perf_counter() - began), file=sys.stderr,
                      flush=True)
        print(f"{'int8 (one QDQ file for both runtimes)' if args.int8 else 'float32'}:\n")
        print("\n".join(table(rows, args.threads)))
        print("\nGeomeans, msc/onnxruntime (msc/torch eager):\n")
        print("\n".join(geomeans(rows, args.threads)))
        worst = above(rows, args.threads)
        print(f"\nAbove 1.15x onnxruntime ({len(worst)}): " + (", ".join(worst) or "none"))
        print()
        verdicts.append(verdict(rows, args.threads, precision))
        every += rows
    print("\n".join(verdicts))
    print(f"{time.perf_counter() - start:.0f} s.")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(every, indent=1, default=str))
    return 0


def verdict(rows: list, threads: list, precision: str, target: float = 0.85,
            limit: float = 1.15) -> str:
    """Issue #33's bar for one precision: every family geomean (and the whole corpus's) at
    or below ``target`` x onnxruntime, no model above ``limit`` x, no wrong or failed row."""
    worst_geo, worst_cell = 0.0, 0.0
    for family in [*FAMILY, None]:
        members = [r for r in rows if family is None or r["family"] == family]
        for count, key in columns(threads):
            value = geomean([ratios(r, count, key)[1] for r in members])
            worst_geo = max(worst_geo, value or 0.0)
            for r in members:
                worst_cell = max(worst_cell, ratios(r, count, key)[1] or 0.0)
    wrong = [r["model"] for r in rows
             if any(not x["err"] <= x.get("rtol", CHECK_RTOL) for x in r["runs"])]
    failed = [r["model"] for r in rows
              if "error" in r and not r["error"].startswith(ReferenceRefused.__name__)]
    refused = [r["model"] for r in rows if r.get("error", "").startswith(
        ReferenceRefused.__name__)]
    ok = worst_geo <= target and worst_cell <= limit and not wrong and not failed
    return (f"{precision}: {'MET' if ok else 'NOT MET'} - worst geomean {worst_geo:.2f} "
            f"(bar {target}), worst model cell {worst_cell:.2f} (bar {limit})"
            + (f", wrong: {', '.join(wrong)}" if wrong else "")
            + (f", msc failed: {', '.join(failed)}" if failed else "")
            + (f"; no reference (onnxruntime refuses): {', '.join(refused)}" if refused
               else ""))


if __name__ == "__main__":
    sys.exit(main())
