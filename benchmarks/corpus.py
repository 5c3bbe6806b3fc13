"""The real-model corpus through every user path: does each model come out right, or is it
refused with a typed error? Never a silent wrong answer.

    .venv/bin/python benchmarks/corpus.py                             # every model, every path
    .venv/bin/python benchmarks/corpus.py --models repvgg,bert --paths fx,onnx
    .venv/bin/python benchmarks/corpus.py --json out/corpus.json
    .venv/bin/python benchmarks/corpus.py --list                      # the models, by family

Models and paths are tests/helpers/corpus.py's: small configs of the architectures on
torch.compile's timm and Hugging Face benchmark lists, random weights, nothing downloaded.
Paths: ``fx`` / ``export`` (from_torch -> to_relax -> relax.build), ``onnx``
(torch.onnx.export -> from_onnx -> to_relax -> relax.build), ``to_torch`` / ``to_onnx`` (the
graph of from_torch's default path written out again and run by torch / onnxruntime).

Each cell is ``match <max abs error>``, ``WRONG <max abs error>`` (over 1e-4 * max|torch|, or
a different shape), ``refused: <msc error>`` or ``error: <exception>``. Import and build
seconds per path follow the status table. The exit status is 1 when any cell is WRONG.
Progress goes to stderr when it is a terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import re
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# As a script, this folder is sys.path[0]; benchmarks/transformers.py would shadow the
# transformers package: import from the repository root instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

from msc.progress import progress
from tests.helpers.corpus import FAMILIES, MODELS, PATHS, RTOL, run_model


def cell(result: dict) -> str:
    """One table cell: the status with its error, or the reason (for a refusal, the ops)."""
    status, message = result["status"], result["message"]
    if status in ("match", "WRONG"):
        err = result["max_err"]
        return f"{status} {err:.1e}" if math.isfinite(err) else f"{status} ({message})"
    ops = re.search(r"^(\w+): \d+ .*\(([^()]*)\)$", message)  # UnsupportedOpError's op list
    return f"{status}: {ops[2]}" if ops else f"{status}: {message}"


def table(rows: dict, paths: list, width: int = 48) -> list[str]:
    """Markdown: model x path statuses, then model x path import+build seconds."""
    head = "| model | family | " + " | ".join(paths) + " |"
    rule = "|" + "---|" * (len(paths) + 2)
    status = [head, rule]
    timing = ["| model | " + " | ".join(f"{p} (s)" for p in paths) + " |", rule[4:]]
    for name, result in rows.items():
        cells = [_short(cell(result[p]), width) for p in paths]
        status.append(f"| {name} | {FAMILIES[name]} | " + " | ".join(cells) + " |")
        times = [f"{result[p]['import_s']:.2f} + {result[p]['build_s']:.2f}" for p in paths]
        timing.append(f"| {name} | " + " | ".join(times) + " |")
    return status + ["", "import + build seconds:", ""] + timing


def _short(text: str, width: int) -> str:
    text = text.replace("|", "/")
    return text if len(text) <= width else text[:width - 3] + "..."


def failures(rows: dict) -> list[str]:
    """Every cell that is not a match, with its full first line of message."""
    return [f"- {name} / {path}: {r['status']}: {r['message']}"
            for name, result in rows.items() for path, r in result.items()
            if r["status"] != "match"]


def summary(rows: dict) -> str:
    counts: dict[str, int] = {}
    for result in rows.values():
        for r in result.values():
            counts[r["status"]] = counts.get(r["status"], 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


@contextlib.contextmanager
def stdout_to_stderr():
    """torch's TorchScript ONNX exporter logs whole graphs to the stdout file descriptor (from
    C++) when it gives up; keep them out of the table."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def run(models: list, paths: list, tmp: Path) -> dict:
    rows = {}
    for name in progress(models, desc="corpus", unit="model"):
        start = time.perf_counter()
        rows[name] = run_model(name, paths, tmp)
        if sys.stderr.isatty():
            print(f"{name}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return rows


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", help="comma-separated names (default: all)")
    parser.add_argument("--paths", default=",".join(PATHS), help="comma-separated paths")
    parser.add_argument("--json", type=Path, help="write every result here")
    parser.add_argument("--list", action="store_true", help="list the models and stop")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.list:
        for name in MODELS:
            print(f"{FAMILIES[name]:7s} {name}")
        return 0
    models = args.models.split(",") if args.models else list(MODELS)
    paths = args.paths.split(",")
    unknown = [m for m in models if m not in MODELS] + [p for p in paths if p not in PATHS]
    if unknown:
        print(f"unknown model or path: {', '.join(unknown)} (see --list)", file=sys.stderr)
        return 2
    warnings.simplefilter("ignore")
    logging.getLogger("msc").setLevel(logging.ERROR)  # fx -> export fallbacks: in the table
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="msc_corpus_") as tmp, stdout_to_stderr():
        rows = run(models, paths, Path(tmp))
    print("\n".join(table(rows, paths)))
    print(f"\nmatch: max|msc - torch| <= {RTOL:g} * max|torch|. {summary(rows)}; "
          f"{time.perf_counter() - start:.0f} s.\n")
    print("\n".join(failures(rows)))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1, default=str))
    return int(any(r["status"] == "WRONG" for res in rows.values() for r in res.values()))


if __name__ == "__main__":
    sys.exit(main())
