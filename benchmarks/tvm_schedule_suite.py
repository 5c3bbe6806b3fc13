"""TVM's own TensorIR schedule tests, run against msc: pass / fail / error per file and per
primitive.

    python benchmarks/tvm_schedule_suite.py --tvm-src ~/tvm [--json out.json]
                                            [--timeout 300] [--filter REGEX]
                                            [--failures [TABLE.md]]

``--tvm-src`` is a TVM source checkout (the directory holding ``tests/python/s_tir/schedule``,
or that folder itself); the tests are read from there, never copied into msc. Each file runs
in its own ``python benchmarks/tvm_redirect.py`` process, where ``import tvm...`` resolves to
msc (``tvm.script.tirx`` -> ``msc.script.tir``, ``tvm.tirx`` -> ``msc.tir``, ``tvm.testing`` ->
``msc.testing``, ...), so a crash or a hang costs that file's unreported tests (each an
``error``). A test that needs a GPU (a GPU target or GPU-only intrinsic named in its body, or
skipped by ``tvm.testing.requires_gpu``) is reported as ``gpu`` and not counted against msc.
The primitive of a file is its name without ``test_tir_schedule_``.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from tvm_redirect import GPU_FILE, GPU_WORDS  # the child's module, beside this one

SUITE = Path("tests/python/s_tir/schedule")
CHILD = Path(__file__).with_name("tvm_redirect.py")
OUTCOMES = ("pass", "fail", "error", "skip", "gpu")


def test_dir(tvm_src: Path) -> Path:
    """The folder of TVM schedule test files under ``tvm_src``."""
    for candidate in (tvm_src / SUITE, tvm_src):
        if sorted(candidate.glob("test_*.py")):
            return candidate
    sys.exit(f"no test_*.py files under {tvm_src / SUITE} or {tvm_src}: pass --tvm-src the "
             "root of a TVM source checkout")


def primitive(path: Path) -> str:
    return re.sub(r"^test_(tir_schedule_)?", "", path.stem)


def static_tests(path: Path) -> dict:
    """The module-level ``test_*`` functions of ``path`` (read with ``ast``) -> whether the
    function's own text, or the file's name, names a GPU target or intrinsic."""
    text, whole = path.read_text(encoding="utf-8"), bool(GPU_FILE.search(path.stem))
    return {n.name: whole or bool(GPU_WORDS.search(ast.get_source_segment(text, n) or ""))
            for n in ast.parse(text).body
            if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


def run_file(path: Path, timeout: float) -> dict:
    """Run one test file in a child process; its per-test outcomes and the exit status."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "results.jsonl"
        start = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, str(CHILD), str(path), str(out)],
                                  capture_output=True, text=True, timeout=timeout, cwd=tmp,
                                  check=False)
            status = proc.returncode
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
        except subprocess.TimeoutExpired:
            status, tail = "timeout", [f"timed out after {timeout:.0f} s"]
        rows = [json.loads(ln) for ln in out.read_text().splitlines()] if out.exists() else []
    return {"file": path.name, "primitive": primitive(path), "exit": status,
            "seconds": round(time.perf_counter() - start, 1),
            "tests": _outcomes(rows, status, tail[0], path)}


def _outcomes(rows: list, status, tail: str, path: Path) -> dict:
    collected = next((r["collected"] for r in rows if "collected" in r), [])
    if not collected:  # not importable: each test function of the file is an error (or gpu)
        why = next((r["message"] for r in rows if "id" in r), tail)
        return {f"{path.name}::{name}": {"outcome": "gpu" if gpu else "error", "message": why}
                for name, gpu in static_tests(path).items()} or {
            "<file>": {"outcome": "error", "message": why}}
    tests = {r["id"]: {"outcome": r["outcome"], "message": r["message"]}
             for r in rows if "id" in r}
    crashed = status == "timeout" or status not in (0, 1, 5)
    why = f"file did not finish ({status}): {tail}".strip()
    for nodeid in collected:
        tests.setdefault(nodeid, {"outcome": "error", "message": why})
    if crashed and not tests:
        tests["<file>"] = {"outcome": "error", "message": why}
    return tests


def summarize(files: list) -> dict:
    """Counts per file, per primitive and in total, and the commonest failure reasons."""
    total, reasons = Counter(), Counter()
    for f in files:
        f["counts"] = Counter(t["outcome"] for t in f["tests"].values())
        total.update(f["counts"])
        reasons.update(_reason(t["message"]) for t in f["tests"].values()
                       if t["outcome"] in ("fail", "error"))
    return {"total": {k: total[k] for k in OUTCOMES}, "files": files,
            "reasons": reasons.most_common()}


def _reason(message: str) -> str:
    """A message with its numbers and quoted names blurred, so like failures group."""
    return re.sub(r"\d+", "N", message)[:160]


# Why a case fails, from its first error line: the first pattern that matches names the class.
REASON_CLASSES = (
    (r"StructuralEqual check failed", "text differs"),
    (r"DID NOT RAISE", "refusal missing"),
    ((r"unexpected keyword argument 'name_hint'|unhashable type|has no attribute 'ty'|"
      r"is_buffer_var|StructuralHash|OpaquePyObject|'ForKind'"), "object model"),
    (r"TensorIntrinNotFound", "other target"),
    (r"has no attribute|has no counterpart|cannot import name", "not implemented"),
    (r"ScheduleError|^msc\.s_tir\.[\w.]+Error:", "msc refuses"),
)


def reason_class(message: str) -> str:
    """The class of a failure's first error line (``REASON_CLASSES``), else "other"."""
    return next((name for pattern, name in REASON_CLASSES if re.search(pattern, message)),
                "other")


def failure_rows(report: dict) -> list:
    """(file, case, first error line, reason class) of every failing or erroring case."""
    return [(f["file"], nodeid.split("::")[-1], t["message"], reason_class(t["message"]))
            for f in report["files"] for nodeid, t in f["tests"].items()
            if t["outcome"] in ("fail", "error")]


def failure_table(report: dict) -> str:
    """The failing cases as a markdown table, one row each, then the count per class."""
    rows = failure_rows(report)
    lines = ["| file | case | first error line | reason class |", "|---|---|---|---|"]
    lines += [f"| {file.removeprefix('test_tir_schedule_').removesuffix('.py')} | `{case}` | "
              f"{_cell(message)} | {cls} |" for file, case, message, cls in rows]
    counts = Counter(cls for *_, cls in rows)
    lines += ["", "| reason class | cases |", "|---|---|"]
    lines += [f"| {cls} | {n} |" for cls, n in counts.most_common()]
    return "\n".join(lines) + "\n"


def _cell(message: str) -> str:
    text = message.replace("|", "\\|").replace("`", "'")
    return text[:140] + ("..." if len(text) > 140 else "")


def print_table(report: dict, failures: bool) -> None:
    print(f"{'primitive':38s} " + " ".join(f"{k:>5s}" for k in OUTCOMES) + "   secs")
    for f in report["files"]:
        counts = f["counts"]
        print(f"{f['primitive']:38s} " + " ".join(f"{counts[k]:5d}" for k in OUTCOMES)
              + f" {f['seconds']:6.1f}")
        if failures:
            for nodeid, t in f["tests"].items():
                if t["outcome"] in ("fail", "error"):
                    print(f"    {t['outcome']:5s} {nodeid.split('::')[-1]}: {t['message']} "
                          f"[{reason_class(t['message'])}]")
    total = report["total"]
    counted = sum(total[k] for k in ("pass", "fail", "error"))
    print(f"{'TOTAL':38s} " + " ".join(f"{total[k]:5d}" for k in OUTCOMES))
    print(f"pass {total['pass']}/{counted} non-GPU, non-skipped cases")
    print("top failure reasons:")
    for reason, n in report["reasons"][:15]:
        print(f"  {n:4d}  {reason}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tvm-src", type=Path, required=True,
                        help="TVM source checkout (holding tests/python/s_tir/schedule)")
    parser.add_argument("--json", type=Path, help="write the full report here")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per file")
    parser.add_argument("--filter", help="only files whose name matches this regex")
    parser.add_argument("--failures", nargs="?", const="", metavar="TABLE.md",
                        help="list each failing test with its first error line and reason "
                             "class; with a path, also write them there as a markdown table")
    args = parser.parse_args(argv)
    paths = sorted(test_dir(args.tvm_src).glob("test_*.py"))
    if args.filter:
        paths = [p for p in paths if re.search(args.filter, p.name)]
    report = summarize([run_file(p, args.timeout) for p in paths])
    print_table(report, args.failures is not None)
    if args.failures:
        Path(args.failures).write_text(failure_table(report), encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=dict) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
