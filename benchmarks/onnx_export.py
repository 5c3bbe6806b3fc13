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
   format, int8), read by msc and written back: the optimized graph onnxruntime runs (QLinearConv?) and its
   latency against the float model's.
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
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from msc.progress import progress

ZOO = ("squeezenet", "shufflenet", "inception_v1", "inception_v2", "resnet50", "densenet121",
       "bvlc_alexnet", "zfnet512", "vgg19")


def _light(name: str):
    import onnx

    return onnx.load(Path(onnx.__file__).parent / "backend/test/data/light" /
                     f"light_{name}.onnx")


def _session(model):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def _latency(session, feeds: dict, repeat: int = 5) -> float:
    session.run(None, feeds)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _feeds(session, rng) -> dict:
    return {i.name: rng.random([d if isinstance(d, int) else 1 for d in i.shape],
                               dtype="float32") for i in session.get_inputs()}


def zoo_row(name: str) -> dict:
    from codegen import to_onnx
    from frontends.onnx.api import from_onnx

    original = _light(name)
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
    print("| model | nodes original | nodes written | max abs diff | export s | "
          "onnxruntime latency written / original |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['nodes_in']} | {r['nodes_out']} | {r['max_abs_diff']:.2g} | "
              f"{r['export_s']} | {r['ort_latency_ratio']:.2f}x |")
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

    from codegen import to_onnx
    from frontends.onnx.api import from_onnx

    # msc's own export of the zoo model is the float model: modern opset, which
    # onnxruntime.quantization needs (it cannot convert the zoo file's opset 8)
    float_model = to_onnx(*from_onnx(_light("squeezenet")))
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo-only", action="store_true")
    parser.add_argument("--cases-only", action="store_true")
    parser.add_argument("--filter", help="only node cases whose name matches this regex")
    parser.add_argument("--failures", action="store_true", help="print failing cases")
    parser.add_argument("--no-qdq", action="store_true", help="skip the QDQ run")
    parser.add_argument("--report", type=Path, help="write the JSON report here")
    args = parser.parse_args(argv)
    report = {}
    if not args.cases_only:
        report["zoo"] = run_zoo()
    if not args.zoo_only:
        report["cases"] = run_cases(args.filter, args.failures)
    if not (args.no_qdq or args.cases_only or args.zoo_only):
        report["qdq"] = run_qdq()
    if args.report:
        args.report.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
