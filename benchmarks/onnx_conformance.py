"""ONNX node conformance: msc's pass count, and onnxruntime's measured in the same run.

    python benchmarks/onnx_conformance.py [--workers 2] [--timeout 20] [--report out.json]
                                          [--filter REGEX] [--no-ort]

Prints ``onnx_node: pass P/N`` (through msc's path: from_onnx -> relax.build -> VM) and
``onnxruntime: pass Q/N``. Tolerances are onnx's per case (default rtol 1e-3, atol 1e-7).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers import onnx_conformance as conf


def _ort_available() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--report", type=Path, help="write the per-op JSON report here")
    parser.add_argument("--filter", help="only cases whose name matches this regex")
    parser.add_argument("--no-ort", action="store_true", help="skip onnxruntime")
    parser.add_argument("--failures", action="store_true", help="print failing cases")
    args = parser.parse_args(argv)

    cases = conf.load_cases()
    if args.filter:
        cases = [c for c in cases if re.search(args.filter, c.name)]
    runners = ("msc",) + (("onnxruntime",) if _ort_available() and not args.no_ort else ())
    start = time.perf_counter()
    results = conf.run_suite(cases, runners, workers=args.workers, timeout=args.timeout)
    report = conf.summarize(cases, results, runners)
    elapsed = time.perf_counter() - start

    total = report["total"]
    print(f"onnx_node: pass {report['pass']['msc']}/{total} "
          f"(evaluator: {report['evaluator']}, {elapsed:.0f} s, {args.workers} workers)")
    if "onnxruntime" in runners:
        print(f"onnxruntime: pass {report['pass']['onnxruntime']}/{total}")
    statuses = Counter(results[c.name]["msc"]["status"] for c in cases)
    print("msc statuses:", dict(sorted(statuses.items())))
    if args.failures:
        for c in cases:
            r = results[c.name]["msc"]
            if r["status"] != "pass":
                print(f"  {c.name}: {r['status']}: {r['message'][:200]}")
    if args.report:
        args.report.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
