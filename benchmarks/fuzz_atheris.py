"""Coverage-guided fuzzing of msc's readers with atheris (libFuzzer for Python), issue #20.

Each target takes raw bytes and hands them to one reader; a reader may return, or raise an
``msc.errors`` error with a non-empty message. Any other exception is a finding: libFuzzer
stops, prints the traceback and writes the input to ``crash-*`` in the working folder.

    pip install atheris                       # the `fuzz` extra: pip install -e .[fuzz]
    python benchmarks/fuzz_atheris.py msc_json -atheris_runs=20000   # one target, libFuzzer
    python benchmarks/fuzz_atheris.py --all --seconds 170            # every target in turn
    nice -n 19 python benchmarks/fuzz_atheris.py --all --seconds 170 --out out/fuzz

``--all`` runs each target in a child process (a crash in one does not stop the others)
seeded from the repository's own files (msc/data, the golden TVMScript texts, ONNX's light
models, small weight files it writes), and prints the case count and findings per target.
Prototxt is written, not read, by msc: the ``msc_json`` target prints every graph it loads
as prototxt, JSON and text, so hostile names reach those writers too.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pathlib
import re
import resource
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGETS = ("msc_json", "relax_script", "tir_script", "onnx", "npz", "safetensors")


# --------------------------------------------------------------------------------------------
# Targets: bytes -> one reader (imports inside, so a child imports only what it fuzzes).

def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _msc_json(data: bytes) -> None:
    from msc.graph import MSCGraph
    graph = MSCGraph.from_json(_text(data))
    graph.to_prototxt(), graph.to_json(), str(graph)


def _relax_script(data: bytes) -> None:
    from msc import relax
    relax.from_script(_text(data)).script()


def _tir_script(data: bytes) -> None:
    from msc.tir.parser import parse_tir_text
    from msc.tir.printer import prim_func_to_script
    for name, func in parse_tir_text(_text(data)).items():
        prim_func_to_script(func, name)


def _onnx(data: bytes) -> None:
    from msc.frontends.onnx.api import from_onnx
    from_onnx(data, as_msc=False)


def _weights(suffix: str):
    def read(data: bytes) -> None:
        from msc.codegen.weight_files import load_weights
        with tempfile.TemporaryDirectory() as tmp:
            path = pathlib.Path(tmp) / f"w{suffix}"
            path.write_bytes(data)
            load_weights(path)
    return read


READERS = {"msc_json": _msc_json, "relax_script": _relax_script, "tir_script": _tir_script,
           "onnx": _onnx, "npz": _weights(".npz"), "safetensors": _weights(".safetensors")}


def _checked(reader):
    """The property: returns, or an MSCError with a message; anything else propagates."""
    from msc.errors import MSCError

    def one(data: bytes) -> None:
        try:
            reader(data)
        except MSCError as err:
            if not str(err).strip():
                raise AssertionError(f"empty message from {type(err).__name__}") from err
    return one


# --------------------------------------------------------------------------------------------
# Seeds.

def _seed_files(target: str) -> list[bytes]:
    if target == "msc_json":
        return [p.read_bytes() for p in sorted((ROOT / "msc" / "data").glob("*.json"))]
    if target == "relax_script":
        return [p.read_bytes() for p in sorted((ROOT / "tests/relax/data/script").glob("*"))]
    if target == "tir_script":
        return [p.read_bytes() for p in sorted((ROOT / "tests/tir/data").glob("*"))[:40]]
    if target == "onnx":
        import onnx
        light = pathlib.Path(onnx.__file__).parent / "backend/test/data/light"
        return [p.read_bytes() for p in sorted(light.glob("*.onnx"))[:3]] + _small_onnx()
    return [_weight_bytes(target)]


def _small_onnx() -> list[bytes]:
    import numpy as np

    from msc.frontends.onnx.testing import node_model
    x = np.ones((2, 3), "float32")
    return [node_model(op, {"a": x, "b": x}).SerializeToString() for op in ("Add", "Mul")]


def _weight_bytes(target: str) -> bytes:
    import numpy as np
    arrays = {"w": np.arange(12, dtype="float32").reshape(3, 4), "b": np.array([1, 2])}
    if target == "npz":
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        return buf.getvalue()
    from safetensors.numpy import save
    return save(arrays)


# --------------------------------------------------------------------------------------------
# Running.

def run_one(target: str, argv: list[str]) -> None:
    """libFuzzer over one target in this process (argv: libFuzzer flags, corpus folders)."""
    import atheris
    with atheris.instrument_imports():
        # imported here so that their code is instrumented for coverage
        import msc.codegen.weight_files
        import msc.frontends.onnx.api
        import msc.graph
        import msc.relax
        import msc.tir.parser  # noqa: F401
    atheris.Setup([sys.argv[0], *argv], _checked(READERS[target]))
    atheris.Fuzz()


def _campaign(targets: list[str], seconds: int, out: pathlib.Path) -> list[dict]:
    rows = []
    for target in targets:
        folder = out / target
        corpus = folder / "corpus"
        corpus.mkdir(parents=True, exist_ok=True)
        for k, seed in enumerate(_seed_files(target)):
            (corpus / f"seed_{k}").write_bytes(seed)
        rows.append(_child(target, seconds, folder, corpus))
        print(_row_text(rows[-1]), flush=True)
    return rows


def _child(target: str, seconds: int, folder: pathlib.Path, corpus: pathlib.Path) -> dict:
    """libFuzzer stops at its first finding: restart it on the grown corpus until the budget
    is spent, so one finding does not end a target's run."""
    start, runs, errors, log = time.monotonic(), 0, [], folder / "log.txt"
    cpu = _children_cpu()
    log.write_text("")
    for _ in range(MAX_RESTARTS):
        left = seconds - int(time.monotonic() - start)
        if left < 5:
            break
        proc = _libfuzzer(target, left, folder, corpus)
        with log.open("a") as f:
            f.write(proc.stdout + proc.stderr)
        done = re.findall(r"Done (\d+) runs|#(\d+)\s", proc.stderr)
        runs += max((int(a or b) for a, b in done), default=0)
        errors += [_last_exception(proc.stdout + proc.stderr)] if proc.returncode else []
    crashes = sorted(p.name for p in folder.iterdir() if p.name.split("-")[0] in
                     ("crash", "timeout", "oom", "leak", "slow"))
    return {"target": target, "runs": runs, "seconds": round(time.monotonic() - start),
            "cpu_seconds": round(_children_cpu() - cpu), "findings": crashes,
            "errors": sorted(set(errors))}


def _children_cpu() -> float:
    """CPU seconds of finished children (a niced run on a busy machine gets a share)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


MAX_RESTARTS = 20


def _libfuzzer(target: str, seconds: int, folder: pathlib.Path, corpus: pathlib.Path):
    cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), target,
           f"-max_total_time={seconds}", "-timeout=20", "-rss_limit_mb=4096",
           "-max_len=300000", f"-artifact_prefix={folder}/", str(corpus)]
    return subprocess.run(cmd, check=False, capture_output=True, text=True, errors="replace",
                          cwd=ROOT, env={**os.environ, "MSC_QUIET": "1"})


def _last_exception(log: str) -> str:
    lines = [ln for ln in log.splitlines() if re.match(r"^\w[\w.]*(Error|Exception)\b", ln)
             or "libFuzzer: " in ln]
    return lines[-1][:200] if lines else "?"


def _row_text(row: dict) -> str:
    found = (f"{len(row['findings'])} finding(s): {'; '.join(row['errors'])}"
             if row["findings"] else "clean")
    return (f"{row['target']:<13} {row['runs']:>9} cases  {row['seconds']:>5} s wall "
            f"{row['cpu_seconds']:>5} s CPU  {found}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in READERS:
        run_one(sys.argv[1], sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--all", action="store_true", help="run every target in turn")
    parser.add_argument("--targets", default=",".join(TARGETS),
                        help=f"comma-separated subset of {', '.join(TARGETS)}")
    parser.add_argument("--seconds", type=int, default=60, help="budget per target")
    parser.add_argument("--out", default="out/fuzz_atheris", help="corpus and crash folder")
    args = parser.parse_args()
    targets = [t for t in args.targets.split(",") if t]
    unknown = sorted(set(targets) - set(READERS))
    if unknown or not (args.all or args.targets != ",".join(TARGETS)):
        parser.error(f"unknown targets {unknown}" if unknown else "give --all or --targets")
    rows = _campaign(targets, args.seconds, pathlib.Path(args.out))
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
