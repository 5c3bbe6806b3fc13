"""ONNX export: every model msc reads, written back with codegen.to_onnx and run in onnxruntime.

    python benchmarks/onnx_export.py [--zoo-only | --cases-only] [--filter REGEX]
                                     [--failures] [--no-qdq] [--report out.json]

1. The onnx package's light model zoo: from_onnx -> to_onnx -> onnxruntime, against the
   original model in onnxruntime (same random input): max abs difference, node counts, export
   time, and onnxruntime latency of the written model / the original (1 thread).
2. The ONNX node conformance cases: each one msc imports is exported back (at its own opset)
   and run in onnxruntime against the case's expected outputs (onnx's tolerances): counts per
   status with their reasons, and node counts written / original.
3. QDQ: squeezenet (as msc writes it) quantized statically by onnxruntime.quantization (QDQ
   format, int8), read by msc and written back: the optimized graph onnxruntime runs
   (QLinearConv?) and its latency against the float model's.
4. Compressed by msc (``--compressed-only``; ``--models``, ``--repeat``): squeezenet and
   resnet50 of the light zoo with random weights, quantized by ``compression.quantize`` (int8
   weights, uint8 activations, minmax, QDQ on the chosen ops' inputs and, onnxruntime's
   placement, on their outputs too) and pruned by ``compression.prune`` (density 0.5), each
   written by to_onnx: .onnx and .npz sizes, the int8 kernels in onnxruntime's optimized graph,
   onnxruntime's output against msc's VM on the same graph, and onnxruntime latency (1 thread,
   best of N) of the QDQ and pruned models against the float one.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
import warnings
from collections import Counter
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (
    as_logits,
    light_model,
    print_table,
    single_calls,
    sqnr,
    with_random_weights,
)
from msc.progress import progress

ZOO = ("squeezenet", "shufflenet", "inception_v1", "inception_v2", "resnet50", "densenet121",
       "bvlc_alexnet", "zfnet512", "vgg19")


def _session(model):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def _run_times(session, feeds: dict, repeat: int) -> list[float]:
    """Seconds of ``repeat`` onnxruntime runs after one warm-up run."""
    run = partial(session.run, None, feeds)
    run()
    return single_calls(run, repeat)


def _latency(session, feeds: dict, repeat: int = 5) -> float:
    return float(np.median(_run_times(session, feeds, repeat)))


def _feeds(session, rng) -> dict:
    return {i.name: rng.random([d if isinstance(d, int) else 1 for d in i.shape],
                               dtype="float32") for i in session.get_inputs()}


def zoo_row(name: str) -> dict:
    from msc.codegen import to_onnx
    from msc.frontends.onnx.api import from_onnx

    original = light_model(name)
    start = time.perf_counter()
    graph, weights = from_onnx(original)
    written = to_onnx(graph, weights)
    export_s = time.perf_counter() - start
    first, second = _session(original), _session(written)
    feeds = _feeds(first, np.random.default_rng(0))
    mine = dict(zip([i.name for i in second.get_inputs()], feeds.values()))
    diff = max(float(np.abs(a - b).max()) for a, b in zip(first.run(None, feeds),
                                                          second.run(None, mine)))
    ratio = _latency(second, mine) / _latency(first, feeds)
    return {"model": name, "nodes_in": len(original.graph.node),
            "nodes_out": len(written.graph.node), "max_abs_diff": diff,
            "export_s": round(export_s, 2), "ort_latency_ratio": round(ratio, 3)}


def run_zoo() -> list[dict]:
    rows = [zoo_row(name) for name in progress(ZOO, desc="light zoo")]
    print_table(["model", "nodes original", "nodes written", "max abs diff", "export s",
                 "onnxruntime latency written / original"],
                ([r["model"], r["nodes_in"], r["nodes_out"], f"{r['max_abs_diff']:.2g}",
                  r["export_s"], f"{r['ort_latency_ratio']:.2f}x"] for r in rows))
    return rows


def _reason(message: str) -> str:
    """A failure message without the case's numbers, to group alike failures."""
    text = re.sub(r"\d+", "N", message)
    return text[:110]


def run_cases(pattern: str | None, show_failures: bool) -> dict:
    from tests.helpers.onnx_conformance import load_cases
    from tests.helpers.onnx_export import round_trip_case

    cases = load_cases()
    if pattern:
        cases = [c for c in cases if re.search(pattern, c.name)]
    results = {c.name: round_trip_case(c) for c in progress(cases, desc="node cases")}
    statuses = Counter(r["status"] for r in results.values())
    passed = [r for r in results.values() if r["status"] == "pass"]
    smaller = sum(r["nodes_out"] <= r["nodes_in"] for r in passed)
    print(f"\nnode conformance exported back: pass {statuses['pass']}/{len(cases)} "
          f"(statuses: {dict(sorted(statuses.items()))})")
    print(f"node count written <= original: {smaller}/{len(passed)} passing cases; nodes "
          f"{sum(r['nodes_out'] for r in passed)} written vs "
          f"{sum(r['nodes_in'] for r in passed)} original")
    for status in ("fail", "error", "unsupported", "ort-fails"):
        reasons = Counter(_reason(r["message"]) for r in results.values()
                          if r["status"] == status)
        for reason, count in reasons.most_common(6):
            print(f"  {status} x{count}: {reason}")
    if show_failures:
        for name, r in results.items():
            if r["status"] in ("fail", "error"):
                print(f"  {name}: {r['message']}")
    return {"statuses": dict(statuses), "no_larger": smaller, "cases": results}


class _Calibration:
    """Random calibration inputs for onnxruntime.quantization."""

    def __init__(self, name: str, count: int = 4):
        rng = np.random.default_rng(1)
        self.items = iter([{name: rng.random((1, 3, 224, 224), dtype="float32")}
                           for _ in range(count)])

    def get_next(self):
        return next(self.items, None)


def run_qdq() -> dict:
    import onnx
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    from msc.codegen import to_onnx
    from msc.frontends.onnx.api import from_onnx

    # msc's own export of the zoo model is the float model: modern opset, which
    # onnxruntime.quantization needs (it cannot convert the zoo file's opset 8)
    float_model = to_onnx(*from_onnx(light_model("squeezenet")))
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "float.onnx", Path(tmp) / "qdq.onnx"
        onnx.save(float_model, src)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            quantize_static(str(src), str(dst), _Calibration(float_model.graph.input[0].name),
                            quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8,
                            weight_type=QuantType.QInt8)
        qdq = onnx.load(dst)
        written = to_onnx(*from_onnx(qdq))
        optimized = Path(tmp) / "optimized.onnx"
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.optimized_model_filepath = str(optimized)
        int8 = ort.InferenceSession(written.SerializeToString(), options,
                                    providers=["CPUExecutionProvider"])
        kernels = Counter(n.op_type for n in onnx.load(optimized).graph.node)
    fp32 = _session(float_model)
    feeds = _feeds(fp32, np.random.default_rng(2))
    mine = dict(zip([i.name for i in int8.get_inputs()], feeds.values()))
    ratio = _latency(int8, mine, 10) / _latency(fp32, feeds, 10)
    quant_ops = {k: v for k, v in kernels.items() if "QLinear" in k or "Integer" in k}
    print(f"\nQDQ squeezenet (onnxruntime.quantization, QDQ int8) -> msc -> to_onnx: "
          f"{sum(n.op_type == 'QuantizeLinear' for n in written.graph.node)} QuantizeLinear, "
          f"{sum(n.op_type == 'DequantizeLinear' for n in written.graph.node)} DequantizeLinear;"
          f" onnxruntime runs {quant_ops}; latency int8 / float: {ratio:.2f}x")
    return {"int8_kernels": quant_ops, "int8_over_float": round(ratio, 3)}


def _best_of(session, feeds: dict, repeat: int) -> float:
    return min(_run_times(session, feeds, repeat))


def _int8_kernels(model) -> dict:
    """The int8 kernels in onnxruntime's optimized graph of ``model`` (ORT_ENABLE_ALL)."""
    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.log_severity_level = 3  # not the warning about saving NCHWc-optimized graphs
        options.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
        ort.InferenceSession(model.SerializeToString(), options,
                             providers=["CPUExecutionProvider"])
        ops = Counter(n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node)
    return {k: v for k, v in ops.items() if k.startswith("QLinear") or "Integer" in k
            or k in ("QGemm", "QAttention")}


def _npz_bytes(weights: dict) -> int:
    from msc.codegen.files import save_npz
    from msc.codegen.qweight import pack_weights

    with tempfile.TemporaryDirectory() as tmp:
        save_npz(Path(tmp) / "w.npz", pack_weights(weights))
        return (Path(tmp) / "w.npz").stat().st_size


def _vm_output(graph, weights, x) -> np.ndarray:
    from msc import relax
    from msc.codegen import to_relax

    with tempfile.TemporaryDirectory() as folder:
        mod = to_relax(graph, weights, build_folder=folder)
    return relax.VirtualMachine(relax.build(mod), relax.cpu())["main"](x).numpy()


def _variant(label: str, graph, weights, x, base: dict, repeat: int, plan=None) -> dict:
    from msc.codegen import to_onnx

    model = to_onnx(graph, weights)
    session = _session(model)
    feeds = {session.get_inputs()[0].name: x}
    got = session.run(None, feeds)[0]
    vm = _vm_output(graph, weights, x)
    row = {"variant": label, "onnx_bytes": model.ByteSize(), "npz_bytes": _npz_bytes(weights),
           "int8_kernels": _int8_kernels(model), "ms": _best_of(session, feeds, repeat) * 1e3,
           "max_abs_diff_vs_msc_vm": float(np.abs(got - vm).max()),
           "max_abs_output": float(np.abs(vm).max())}
    if plan:  # one step of the coarsest activation quantizer
        row["step"] = max(float(np.max(e["scale"])) for e in plan.values() if e["axis"] == -1)
        row["sqnr_vs_float_db"] = sqnr([base["output"]], [got])
    if base:
        row.update({f"{k}_ratio": base[k] / row[k] for k in ("onnx_bytes", "npz_bytes")})
        row["latency_ratio"] = row["ms"] / base["ms"]
    row["output"] = got
    return row


def compressed_rows(name: str, repeat: int) -> list[dict]:
    from msc.compression import prune
    from msc.compression.quantize import quantize
    from msc.frontends.onnx.api import from_onnx

    graph, weights = from_onnx(with_random_weights(as_logits(light_model(name))))
    shape = graph.get_inputs()[0].shape
    rng = np.random.default_rng(0)
    calib = [rng.random(shape, dtype=np.float32) for _ in range(8)]
    x = rng.random(shape, dtype=np.float32)
    base = _variant("float", graph, weights, x, {}, repeat)
    rows = [base]
    for label, outputs in (("int8 QDQ (inputs)", False), ("int8 QDQ (inputs+outputs)", True)):
        qgraph, qweights, report = quantize(graph, weights, calib, {
            "per_layer": False, "quantize_outputs": outputs, "report_batches": 1})
        rows.append(_variant(label, qgraph, qweights, x, base, repeat, report.plan))
    small, small_weights, _ = prune(graph, weights, {"density": 0.5, "latency": False})
    rows.append(_variant("pruned 0.5", small, small_weights, x, base, repeat))
    for r in rows:
        r.pop("output")
        r["model"] = name
    return rows


COMPRESSED_COLUMNS = ["model", "variant", "onnxruntime ms", "latency / float", ".onnx / float",
                      ".npz / float", "int8 kernels", "max abs diff vs msc VM (one step)",
                      "SQNR vs float"]


def _compressed_cells(r: dict) -> list[str]:
    latency = f"{r['latency_ratio']:.2f}x" if "latency_ratio" in r else "-"
    sizes = [f"1/{r[k]:.2f}" if k in r else "-" for k in ("onnx_bytes_ratio", "npz_bytes_ratio")]
    kernels = ", ".join(f"{k} {v}" for k, v in r["int8_kernels"].items()) or "-"
    sqnr = f"{r['sqnr_vs_float_db']:.1f} dB" if "sqnr_vs_float_db" in r else "-"
    step = f"{r['step']:.2g}" if "step" in r else "-"
    return [r["model"], r["variant"], f"{r['ms']:.1f}", latency, *sizes, kernels,
            f"{r['max_abs_diff_vs_msc_vm']:.2g} ({step})", sqnr]


def run_compressed(models, repeat: int) -> list[dict]:
    rows = [r for name in progress(models, desc="compressed") for r in
            compressed_rows(name, repeat)]
    print(f"\nmsc-compressed models written by to_onnx, onnxruntime 1 thread, best of {repeat}:")
    print_table(COMPRESSED_COLUMNS, (_compressed_cells(r) for r in rows))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo-only", action="store_true")
    parser.add_argument("--cases-only", action="store_true")
    parser.add_argument("--filter", help="only node cases whose name matches this regex")
    parser.add_argument("--failures", action="store_true", help="print failing cases")
    parser.add_argument("--no-qdq", action="store_true", help="skip the QDQ run")
    parser.add_argument("--report", type=Path, help="write the JSON report here")
    parser.add_argument("--compressed-only", action="store_true",
                        help="only the models quantized and pruned by msc (section 4)")
    parser.add_argument("--no-compressed", action="store_true", help="skip section 4")
    parser.add_argument("--models", nargs="+", default=["squeezenet", "resnet50"],
                        help="light zoo models of section 4 (default squeezenet resnet50)")
    parser.add_argument("--repeat", type=int, default=10, help="latency runs (best of N)")
    args = parser.parse_args(argv)
    report = {}
    if args.compressed_only:
        report["compressed"] = run_compressed(args.models, args.repeat)
        args.zoo_only = args.cases_only = args.no_qdq = True
    if not (args.cases_only or args.compressed_only):
        report["zoo"] = run_zoo()
    if not (args.zoo_only or args.compressed_only):
        report["cases"] = run_cases(args.filter, args.failures)
    if not (args.no_qdq or args.cases_only or args.zoo_only):
        report["qdq"] = run_qdq()
    if not (args.no_compressed or args.cases_only or args.zoo_only or args.compressed_only):
        report["compressed"] = run_compressed(args.models, args.repeat)
    if args.report:
        args.report.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
