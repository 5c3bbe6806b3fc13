"""Do two versions of msc compile the same programs? The node list of every built program, and
relax.build's time, side by side for a base tree (e.g. ``git archive main``) and this one.

    .venv/bin/python benchmarks/program_equal.py models /tmp/pe           # write the ONNX models
    git archive main | tar -x -C /tmp/base
    PYTHONPATH=/tmp/base .venv/bin/python benchmarks/program_equal.py dump /tmp/pe base.json
    .venv/bin/python benchmarks/program_equal.py dump /tmp/pe here.json
    .venv/bin/python benchmarks/program_equal.py compare base.json here.json
    .venv/bin/python benchmarks/program_equal.py time /tmp/pe densenet121 --base /tmp/base

Models (random weights, fixed seeds): every onnx light zoo model (benchmarks/common.py's
random-weight logits copies), BERT (benchmarks/int8.py's encoder, 2 small layers) and a tiny
GPT-2 (benchmarks/transformers.py's export) in float; and int8 QDQ models from onnxruntime's
``quantize_static`` (the test blocks of msc.compression.quantize.testing, BERT, GPT-2 and
squeezenet / shufflenet / resnet50 after ``quant_pre_process``) and from msc's own
``compression.quantize`` (the conv block, BERT, squeezenet; written by ``to_onnx``). Each goes from_onnx ->
to_relax -> relax.build (benchmarks/common.py's msc_executable), and ``dump`` writes, per model,
``ex.stats`` (kernels, ops, fused patterns, memory) and every program's nodes in execution order
as (kind, op, path, ins, out, kernel, epilogue). ``compare`` names the first difference per model.

``time``: relax.build of one model (warm kernel cache), in child processes alternating between
the base tree (on PYTHONPATH) and this one, ``--repeats`` rounds; prints each side's best and the
ratio. Only the build is timed: import and from_onnx run before the clock starts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.append(str(ROOT))

INT8_ZOO = ["squeezenet", "shufflenet", "resnet50"]


# ---------------------------------------------------------------------------------------------
# Models


def _write_models(folder: Path) -> None:
    import numpy as np
    import onnx

    from benchmarks.common import (
        as_logits,
        batches,
        light_model,
        light_names,
        ort_qdq,
        with_random_weights,
    )
    from benchmarks.int8 import bert, gpt2, preprocessed
    from msc.compression.quantize.testing import qdq_block, tiny_conv_onnx

    folder.mkdir(parents=True, exist_ok=True)

    def save(name, make):
        path = folder / f"{name}.onnx"
        if not path.exists():
            print(f"making {name}", flush=True)
            onnx.save(make(), path)

    zoo = {name: (lambda n=name: with_random_weights(as_logits(light_model(n))))
           for name in light_names()}
    for name, make in zoo.items():
        save(f"float_{name}", make)
    small_bert = bert(layers=2, seq=32, dim=128, heads=4, ff=512)
    gpt, ids = gpt2(quick=True)
    save("float_bert", lambda: small_bert)
    save("float_gpt2", lambda: gpt)
    rng = np.random.default_rng(0)
    calib = {"tiny_conv": [rng.random((1, 3, 12, 12), dtype=np.float32) for _ in range(4)],
             "qdq_block": [rng.random((1, 16, 32), dtype=np.float32) * 2 - 0.5
                           for _ in range(4)],
             "bert": batches([1, 32, 128], 4, 0, False),
             "gpt2": [rng.integers(0, 100, ids.shape, dtype=np.int64) for _ in range(4)]}
    floats = {"tiny_conv": tiny_conv_onnx(), "qdq_block": qdq_block(), "bert": small_bert,
              "gpt2": gpt}
    for name, model in floats.items():
        save(f"int8_{name}", lambda m=model, n=name: ort_qdq(m, m.graph.input[0].name, calib[n]))
    for name, model in {**floats, "squeezenet": zoo["squeezenet"]()}.items():
        if name in ("qdq_block", "gpt2"):
            continue
        shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
        data = calib.get(name) or batches(shape, 4, 0, True)
        save(f"msc_int8_{name}", lambda m=model, d=data: _msc_qdq(m, d))
    for name in INT8_ZOO:
        def make(n=name):
            model = preprocessed(zoo[n]())
            shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
            return ort_qdq(model, model.graph.input[0].name, batches(shape, 4, 0, True))
        save(f"int8_{name}", make)


def _msc_qdq(model, data: list):
    """msc's own QDQ model of ``model`` (compression.quantize calibrated on ``data``), as ONNX."""
    from msc.codegen import to_onnx
    from msc.compression.quantize import apply_plan, calibrate
    from msc.frontends.translate import from_onnx

    graph, weights = from_onnx(model)
    name = model.graph.input[0].name
    plan = calibrate(graph, weights, [{name: x} for x in data], {"executor": "relax"})
    return to_onnx(*apply_plan(graph, weights, plan))


# ---------------------------------------------------------------------------------------------
# Programs as data


def _kernel(node) -> str:
    if node.tir is not None:
        return "tir:" + str(getattr(node.tir, "name", type(node.tir).__name__))
    fn = node.fn
    if fn is None:
        return ""
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{name}:{getattr(fn, 'op', '')}"


def _rows(program) -> list:
    rows = []
    for node in program.walk():
        epilogue = [e[0] for e in node.site.epilogue] if node.site is not None else []
        rows.append([node.kind, node.op, node.path, list(node.ins), node.out, _kernel(node),
                     epilogue, str(program.values[node.out].sinfo)])
    return rows


def _build(path: Path):
    import onnx

    from benchmarks.common import msc_executable

    return msc_executable(onnx.load(path))


def _dump(folder: Path, out: Path, only: list) -> None:
    result = {}
    for path in sorted(folder.glob("*.onnx")):
        if only and path.stem not in only:
            continue
        print(f"building {path.stem}", flush=True)
        ex = _build(path)
        stats = {k: ex.stats[k] for k in ("kernels", "ops", "fused", "memory")}
        result[path.stem] = {"stats": stats, "programs": {
            name: _rows(p) for name, p in sorted(ex.programs.items())}}
    out.write_text(json.dumps(result, indent=0, sort_keys=True, default=str))


def _first_difference(a, b, where="") -> str | None:
    if type(a) is not type(b):
        return f"{where}: {a!r} != {b!r}"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{where}/{key}: only in {'base' if key in a else 'this tree'}"
            found = _first_difference(a[key], b[key], f"{where}/{key}")
            if found:
                return found
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            found = _first_difference(x, y, f"{where}[{i}]")
            if found:
                return found
        return None if len(a) == len(b) else f"{where}: {len(a)} != {len(b)} entries"
    return None if a == b else f"{where}: {a!r} != {b!r}"


def _compare(base: Path, here: Path) -> int:
    a, b = json.loads(base.read_text()), json.loads(here.read_text())
    differ = 0
    for model in sorted(set(a) | set(b)):
        found = _first_difference(a.get(model), b.get(model), model)
        nodes = sum(len(rows) for rows in (b.get(model) or {}).get("programs", {}).values())
        print(f"{model:24s} {nodes:6d} nodes  {'identical' if found is None else found}")
        differ += found is not None
    print(f"{len(set(a) | set(b)) - differ} identical, {differ} different")
    return 1 if differ else 0


# ---------------------------------------------------------------------------------------------
# Build time, alternating between two trees


def _child(path: Path, repeats: int) -> None:
    """Build the model ``repeats`` times after one warm-up build; print the best seconds."""
    import tempfile

    import onnx

    from msc import relax
    from msc.codegen import to_relax
    from msc.frontends.translate import from_onnx

    graph, weights = from_onnx(onnx.load(path))
    with tempfile.TemporaryDirectory() as folder:
        mod = to_relax(graph, weights, build_folder=folder)
    relax.build(mod)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        relax.build(mod)
        best = min(best, time.perf_counter() - start)
    print(best)


def _time(folder: Path, model: str, base: Path, rounds: int) -> None:
    path = folder / f"{model}.onnx"
    if not path.exists():
        path = folder / f"float_{model}.onnx"
    best = {"base": float("inf"), "this": float("inf")}
    for _ in range(rounds):
        for side, extra in (("base", str(base)), ("this", "")):
            env = dict(os.environ, PYTHONPATH=extra)
            out = subprocess.run([sys.executable, __file__, "child", str(path)], env=env,
                                 capture_output=True, text=True, check=True, cwd="/")
            seconds = float(out.stdout.strip().splitlines()[-1])
            best[side] = min(best[side], seconds)
            print(f"  {side}: {seconds:.3f} s", flush=True)
    print(f"{path.stem}: base {best['base']:.3f} s, this tree {best['this']:.3f} s, "
          f"this / base {best['this'] / best['base']:.3f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("models").add_argument("folder", type=Path)
    dump = sub.add_parser("dump")
    dump.add_argument("folder", type=Path)
    dump.add_argument("out", type=Path)
    dump.add_argument("--only", nargs="*", default=[], help="model names (file stems)")
    compare = sub.add_parser("compare")
    compare.add_argument("base", type=Path)
    compare.add_argument("here", type=Path)
    timing = sub.add_parser("time")
    timing.add_argument("folder", type=Path)
    timing.add_argument("model")
    timing.add_argument("--base", type=Path, required=True, help="the base tree's root")
    timing.add_argument("--repeats", type=int, default=3, help="rounds of (base, this)")
    child = sub.add_parser("child")
    child.add_argument("path", type=Path)
    child.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if args.command == "models":
        _write_models(args.folder)
    elif args.command == "dump":
        _dump(args.folder, args.out, args.only)
    elif args.command == "compare":
        return _compare(args.base, args.here)
    elif args.command == "time":
        _time(args.folder, args.model, args.base, args.repeats)
    else:
        _child(args.path, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
