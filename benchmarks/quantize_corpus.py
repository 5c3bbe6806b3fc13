"""int8 over the real corpus: msc's QDQ quantization vs onnxruntime's ``quantize_static``.

    .venv/bin/python benchmarks/quantize_corpus.py                        # every corpus model
    .venv/bin/python benchmarks/quantize_corpus.py --models repvgg,bert --calib 8 --eval 4
    .venv/bin/python benchmarks/quantize_corpus.py --smooth 0.5           # msc with SmoothQuant
    .venv/bin/python benchmarks/quantize_corpus.py --json out/quantize_corpus.json

Models are tests/helpers/corpus.py's (timm-style blocks, transformers' vision / text / audio
models from small configs, random weights), each exported to ONNX; the per-model run is
tests/helpers/quant_corpus.py's. Both tools calibrate on the same ``--calib`` random batches
(token ids for text models) and are measured on ``--eval`` other batches.

Columns: output SQNR (dB) against the float model (onnxruntime) of msc's QDQ file run by
onnxruntime (``msc``), of the same file run on msc's int8 kernels (``msc@msc``), and of
onnxruntime's QDQ model with its default calibration (MinMax) and its best of MinMax /
Percentile / Entropy on this model (``ORT best``, the method named); ``agree``: SQNR of
msc@msc against onnxruntime running msc's file (int8 rounding only: > 30 dB expected),
``agree ref``: against onnxruntime running it with its optimizer off (the QDQ graph as
written, no int8 kernels: the arbiter where onnxruntime's int8 kernels drift); ``int8 ops``:
the Q/DQ patterns msc's build ran on int8 kernels. A
failed cell says ``FAIL`` and the error follows the table. The family lines give the geomean
of each column's SQNR in linear power (a dB mean) and msc - ORT on it.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# As a script, this folder is sys.path[0]; benchmarks/transformers.py would shadow the
# transformers package: import from the repository root instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

from benchmarks.common import print_table
from benchmarks.corpus import stdout_to_stderr
from tests.helpers.corpus import FAMILIES, MODELS
from tests.helpers.quant_corpus import ORT_METHODS, quantize_model

COLUMNS = ["model", "family", "msc dB", "msc@msc dB", "agree dB", "agree ref dB", "int8 ops",
           "ORT MinMax dB", "ORT best dB", "msc - ORT default", "msc - ORT best", "s"]


def _db(value: float) -> str:
    return "FAIL" if not math.isfinite(value) else f"{value:.2f}"


def _agree_db(value: float) -> str:
    """An agreement SQNR; over 200 dB the outputs are equal bit for bit (sqnr's floor)."""
    return "equal" if math.isfinite(value) and value > 200 else _db(value)


def best_ort(row: dict) -> tuple[str, float]:
    """onnxruntime's best calibration method on this model and its SQNR."""
    ran = {k.split(":")[1]: c["sqnr"] for k, c in row.items()
           if k.startswith("ort:") and c["ran"]}
    if not ran:
        return "-", math.nan
    method = max(ran, key=ran.get)
    return method, ran[method]


def summarize(name: str, row: dict, seconds: float) -> dict:
    method, best = best_ort(row)
    msc, default = row["msc"]["sqnr"], row["ort:MinMax"]["sqnr"]
    return {"model": name, "family": FAMILIES[name], "msc": msc, "msc@msc": row["msc@msc"]["sqnr"],
            "agree": row["agree"], "agree_ref": row["agree_ref"],
            "int8_patterns": row["int8_patterns"], "ort_default": default, "ort_best": best,
            "ort_best_method": method, "seconds": seconds,
            "errors": {k: c["message"] for k, c in row.items()
                       if isinstance(c, dict) and c.get("message")},
            **{k: (v["sqnr"] if k.startswith("msc+") else v) for k, v in row.items()
               if k.startswith("msc+") or k.endswith("_info")}}


VARIANT_COLUMNS = {"smooth": ["msc+smooth dB", "alpha"],
                   "excludes": ["msc+excludes dB", "kept float"]}


def _variant_cells(s: dict, variant: str) -> list[str]:
    info = s[f"{variant}_info"]
    detail = info.get("alpha") if variant == "smooth" else \
        ", ".join(info.get("excluded", [])) or "-"
    return [_db(s[f"msc+{variant}"]), str(detail)]


def cells(s: dict, variants=()) -> list[str]:
    extra = [c for v in variants for c in _variant_cells(s, v)]
    return [s["model"], s["family"], _db(s["msc"]), _db(s["msc@msc"]), _agree_db(s["agree"]),
            _agree_db(s["agree_ref"]), str(s["int8_patterns"]),
            _db(s["ort_default"]), f"{_db(s['ort_best'])} ({s['ort_best_method']})",
            f"{s['msc'] - s['ort_default']:+.2f}", f"{s['msc'] - s['ort_best']:+.2f}",
            *extra, f"{s['seconds']:.0f}"]


def db_geomean(values: list[float]) -> float:
    """The geomean of SQNRs as power ratios, in dB: the mean of the dB values."""
    values = [v for v in values if math.isfinite(v)]
    return sum(values) / len(values) if values else math.nan


def family_lines(rows: list[dict]) -> list[str]:
    lines = []
    for family in dict.fromkeys(r["family"] for r in rows):
        part = [r for r in rows if r["family"] == family]
        g = {k: db_geomean([r[k] for r in part]) for k in ("msc", "msc@msc", "ort_default",
                                                              "ort_best")}
        failed = sum(not math.isfinite(r["msc"]) or not math.isfinite(r["msc@msc"])
                     for r in part)
        extra = "".join(f", {k} {db_geomean([r[k] for r in part]):.2f}"
                        for k in part[0] if k.startswith("msc+"))
        lines.append(f"{family}: {len(part)} models, msc failed on {failed}; geomean SQNR msc "
                     f"{g['msc']:.2f} dB, msc@msc {g['msc@msc']:.2f}, ORT MinMax "
                     f"{g['ort_default']:.2f}, ORT best {g['ort_best']:.2f}{extra}: msc - ORT "
                     f"default {g['msc'] - g['ort_default']:+.2f} dB, msc - ORT best "
                     f"{g['msc'] - g['ort_best']:+.2f} dB")
    return lines


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", help="comma-separated corpus names (default: all)")
    p.add_argument("--calib", type=int, default=8, help="calibration batches (default 8)")
    p.add_argument("--eval", type=int, default=4, help="held-out batches (default 4)")
    p.add_argument("--methods", default=",".join(ORT_METHODS),
                   help="onnxruntime calibration methods tried (the best is reported)")
    p.add_argument("--config", default="{}",
                   help="msc quantize settings as JSON (default: msc's defaults)")
    p.add_argument("--variants", default="",
                   help="comma-separated extra msc columns: smooth (SmoothQuant, alpha "
                        "searched on the calibration data), excludes (the report's suggested "
                        "excludes kept float)")
    p.add_argument("--json", type=Path, help="write every row here")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    models = args.models.split(",") if args.models else list(MODELS)
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        print(f"unknown model: {', '.join(unknown)}", file=sys.stderr)
        return 2
    warnings.simplefilter("ignore")
    logging.getLogger("msc").setLevel(logging.ERROR)
    logging.getLogger("root").setLevel(logging.ERROR)
    config = json.loads(args.config)
    variants = [v for v in args.variants.split(",") if v]
    columns = COLUMNS[:-1] + [c for v in variants for c in VARIANT_COLUMNS[v]] + COLUMNS[-1:]
    rows: list[dict] = []

    def measured():
        for i, name in enumerate(models):
            start = time.perf_counter()
            with stdout_to_stderr():  # onnxruntime's calibrators print to stdout
                row = quantize_model(name, args.calib, args.eval, args.methods.split(","),
                                     config, variants=variants)
            rows.append(summarize(name, row, time.perf_counter() - start))
            print(f"[{i + 1}/{len(models)}] {name}: msc {_db(rows[-1]['msc'])} dB, ORT best "
                  f"{_db(rows[-1]['ort_best'])} dB", file=sys.stderr, flush=True)
            yield cells(rows[-1], variants)
    print_table(columns, measured(), flush=True)
    print()
    print("\n".join(family_lines(rows)))
    for r in rows:
        for key, message in r["errors"].items():
            print(f"- {r['model']} / {key}: {message}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1))
    return int(any(not math.isfinite(r["msc"]) or not math.isfinite(r["msc@msc"])
                   for r in rows))


if __name__ == "__main__":
    sys.exit(main())
