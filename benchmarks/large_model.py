"""An ONNX model above protobuf's 2 GB limit (external data) through from_onnx: peak RSS.

    .venv/bin/python benchmarks/large_model.py [--gb 2.25] [--width 4096] [--anchors]

Writes a chain of MatMuls whose [width, width] float32 weights total ``--gb`` GiB into one
external data file in a temporary folder (deleted at the end), then measures each stage in a
fresh child process (peak RSS: the child's VmHWM, else ``resource.getrusage``): the imports
alone, from_onnx to Relax, from_onnx to an MSCGraph, and from_onnx + the graph's JSON + the
weights' .npz. The figure to read is (peak - imports) / weight bytes: weights memory-mapped
from the data file cost nothing until read, and about their size when a stage reads them all
(file-backed pages: clean page cache the kernel can drop, shown in the anon / file column);
a copy would show 2x. ``--anchors`` adds onnx.load (the data read into the ModelProto) and an
onnxruntime session on the same model.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MB = 2 ** 20


# --------------------------------------------------------------------------------------------
# The model.

def layer_weight(k: int, width: int, rows=None, cols=None) -> np.ndarray:
    """Layer k's weight (or the block of it at ``rows`` x ``cols``): distinct per layer and
    position, so a check can tell them apart."""
    rows = np.arange(width) if rows is None else np.asarray(rows)
    cols = np.arange(width) if cols is None else np.asarray(cols)
    return cols[None, :].astype("float32") * np.float32(1e-6) + \
        rows[:, None].astype("float32") * np.float32(1e-3) + np.float32(k)


def write_model(folder: Path, total_bytes: int, width: int) -> tuple[Path, int]:
    """model.onnx + weights.bin (one MatMul weight after another); returns (path, bytes)."""
    import onnx
    from onnx import TensorProto, helper

    layer_bytes = width * width * 4
    layers = max(1, -(-total_bytes // layer_bytes))
    data = folder / "weights.bin"
    inits = []
    with data.open("wb") as f:
        for k in range(layers):
            inits.append(_external(f"w{k}", [width, width], "weights.bin", f.tell(),
                                   layer_bytes))
            f.write(layer_weight(k, width).tobytes())  # one layer in memory at a time
    nodes = [helper.make_node("MatMul", [f"h{k}" if k else "x", f"w{k}"], [f"h{k + 1}"])
             for k in range(layers)]
    graph = helper.make_graph(
        nodes, "large", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info(f"h{layers}", TensorProto.FLOAT, [1, width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    path = folder / "model.onnx"
    onnx.save_model(model, path)
    return path, layers * layer_bytes


def _external(name: str, dims: list, location: str, offset: int, length: int):
    from onnx import TensorProto
    tensor = TensorProto(name=name, dims=dims, data_type=TensorProto.FLOAT,
                         data_location=TensorProto.EXTERNAL)
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, str(value)
    return tensor


# --------------------------------------------------------------------------------------------
# Stages, each run in a child process.

def _imports(path: str, out: str) -> dict:
    """The baseline: what the other stages import, and a tiny model through the same path
    (lazy imports and first-call caches are not weights)."""
    import onnx  # noqa: F401

    from msc.codegen.files import save_npz
    from msc.frontends.onnx.api import from_onnx
    with tempfile.TemporaryDirectory() as tmp:
        small, _ = write_model(Path(tmp), 64 * 64 * 4, 64)
        graph, weights = from_onnx(small)
        graph.to_json(os.path.join(tmp, "g.json"))
        save_npz(os.path.join(tmp, "g.npz"), weights)
    return {}


def _to_relax(path: str, out: str) -> dict:
    from msc.frontends.onnx.api import from_onnx
    _mod, weights = from_onnx(path, as_msc=False)
    return _check(weights)


def _to_graph(path: str, out: str) -> dict:
    from msc.frontends.onnx.api import from_onnx
    _graph, weights = from_onnx(path)
    return _check(weights)


def _to_files(path: str, out: str) -> dict:
    from msc.codegen.files import save_npz
    from msc.frontends.onnx.api import from_onnx
    graph, weights = from_onnx(path)
    graph.to_json(os.path.join(out, "graph.json"))
    save_npz(os.path.join(out, "graph.npz"), weights)
    size = os.path.getsize(os.path.join(out, "graph.npz"))
    return {**_check(weights), "npz MB": round(size / MB)}


def _onnx_load(path: str, out: str) -> dict:
    import onnx
    onnx.load(path)
    return {}


def _ort_session(path: str, out: str) -> dict:
    import onnxruntime as ort
    ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return {}


def _check(weights: dict) -> dict:
    """Every weight memory-mapped; the first and last layers' corners hold their values."""
    from msc.frontends.relax.weights import is_mapped
    arrays = list(weights.values())
    width = arrays[0].shape[0]
    rows, cols = [0, 1, width - 2, width - 1], [0, 2, width - 3, width - 1]
    for k in (0, len(arrays) - 1):  # a few corners only: the check must not read the weights
        want = layer_weight(k, width, rows, cols)
        got = arrays[k]
        got = got if np.array_equal(got[np.ix_(rows, cols)], want) else got.T  # graph: OI
        if not np.array_equal(got[np.ix_(rows, cols)], want):
            raise SystemExit(f"weight {k} read back wrong")
    return {"mapped": f"{sum(map(is_mapped, arrays))}/{len(arrays)}"}


STAGES = {"imports": _imports, "from_onnx -> relax": _to_relax,
          "from_onnx -> MSCGraph": _to_graph, "+ to_json + .npz": _to_files}
ANCHORS = {"anchor: onnx.load": _onnx_load, "anchor: onnxruntime session": _ort_session}


def _child_main(stage: str, path: str, out: str) -> None:
    start = time.perf_counter()
    info = {**STAGES, **ANCHORS}[stage](path, out)
    split = _rss_split()
    # ru_maxrss keeps the parent's high-water mark across fork + exec (Linux), so a child of
    # a big parent never reports less than it; VmHWM is this process's own peak.
    peak = split.pop("VmHWM", None) or \
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kB
    print(json.dumps({**info, "seconds": time.perf_counter() - start, "peak": peak, **split}))


def _rss_split() -> dict:
    """Resident memory now, split: anonymous (copies, Python objects) and file-backed (the
    mapped weights' pages: clean page cache the kernel can drop)."""
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return {}
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {key: int(fields[key].split()[0]) * 1024 for key in ("RssAnon", "RssFile", "VmHWM")
            if key in fields}


def run_stage(stage: str, path: Path, out: Path) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", stage, str(path), str(out)],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "MSC_QUIET": "1"})
    if proc.returncode:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:120]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------
# Report.

def _row(stage: str, res: dict, base: int, weight_bytes: int) -> str:
    if "error" in res:
        return f"| {stage} | failed: {res['error']} | | | | |"
    extra = res["peak"] - base
    split = (f"{res['RssAnon'] / MB:,.0f} / {res['RssFile'] / MB:,.0f}" if "RssAnon" in res
             else "-")
    return (f"| {stage} | {res['seconds']:.1f} | {res['peak'] / MB:,.0f} | "
            f"{extra / weight_bytes:.2f} | {split} | {res.get('mapped', '-')} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gb", type=float, default=2.25, help="weight bytes, in GiB")
    parser.add_argument("--width", type=int, default=4096, help="each MatMul is width^2")
    parser.add_argument("--anchors", action="store_true", help="onnx.load, onnxruntime too")
    parser.add_argument("--tmp", default=None, help="folder for the temporary model")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.tmp, prefix="msc_large_") as tmp:
        start = time.perf_counter()
        path, weight_bytes = write_model(Path(tmp), int(args.gb * 2 ** 30), args.width)
        print(f"model: {weight_bytes / MB:,.0f} MB of float32 weights in external data "
              f"({time.perf_counter() - start:.0f} s to write); load: {os.getloadavg()[0]:.2f}")
        stages = {**STAGES, **(ANCHORS if args.anchors else {})}
        results = {s: run_stage(s, path, Path(tmp)) for s in stages}
    base = results["imports"]["peak"]
    print(f"\nimports alone: peak RSS {base / MB:,.0f} MB\n")
    print("| stage | seconds | peak RSS MB | (peak - imports) / weights | "
          "RSS anon / file MB at the end | weights mapped |")
    print("|---|---|---|---|---|---|")
    for stage, res in results.items():
        if stage != "imports":
            print(_row(stage, res, base, weight_bytes), flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        _child_main(*sys.argv[2:])
    else:
        main()
