"""ONNX node conformance: msc's pass count, and onnxruntime's measured in the same run.

    python benchmarks/onnx_conformance.py [--workers 2] [--timeout 20] [--report out.json]
                                          [--filter REGEX] [--no-ort]

Prints ``onnx_node: pass P/N`` (through msc's path: from_onnx -> relax.build -> VM) and
``onnxruntime: pass Q/N``, the cases each passes that the other does not, and every case msc
does not pass grouped by cause (``tests.helpers.onnx_conformance.cause``). Tolerances are
onnx's per case (default rtol 1e-3, atol 1e-7). ``--subset`` runs CI's fixed subset only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
import time
from collections import Counter, defaultdict
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
    parser.add_argument("--subset", action="store_true",
                        help="only CI's subset (one case per op + run-time values)")
    args = parser.parse_args(argv)

    cases = conf.load_cases()
    if args.subset:
        cases = conf.ci_subset(cases)
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
        _print_differences(cases, results)
    statuses = Counter(results[c.name]["msc"]["status"] for c in cases)
    print("msc statuses:", dict(sorted(statuses.items())))
    _print_causes(cases, results, "onnxruntime" in runners)
    if args.failures:
        for c in cases:
            r = results[c.name]["msc"]
            if r["status"] != "pass":
                print(f"  {c.name}: {r['status']}: {r['message'][:200]}")
    if args.report:
        args.report.write_text(json.dumps(report, indent=1))
    return 0


def _passes(results: dict, case, runner: str) -> bool:
    return results[case.name][runner]["status"] == "pass"


def _print_differences(cases: list, results: dict) -> None:
    """The cases one runner passes and the other does not, by name."""
    for a, b in (("msc", "onnxruntime"), ("onnxruntime", "msc")):
        names = [c.name for c in cases if _passes(results, c, a) and not _passes(results, c, b)]
        print(f"{a} passes, {b} does not ({len(names)}):")
        print(textwrap.fill(" ".join(n.removeprefix("test_") for n in names), 100,
                            initial_indent="  ", subsequent_indent="  ") or "  -")


def _print_causes(cases: list, results: dict, with_ort: bool) -> None:
    """Every case msc does not pass, grouped by cause (largest group first), with how many of
    them onnxruntime passes and up to three names."""
    groups = defaultdict(list)
    for c in cases:
        if not _passes(results, c, "msc"):
            groups[conf.cause(c, results[c.name]["msc"])].append(c)
    print(f"why msc does not pass ({sum(map(len, groups.values()))} cases, "
          f"{len(groups)} causes; 'ort' = of them onnxruntime passes):")
    for why, group in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        ort = sum(_passes(results, c, "onnxruntime") for c in group) if with_ort else "-"
        names = ", ".join(c.name.removeprefix("test_") for c in group[:3])
        print(f"  {len(group):4d}  ort {ort!s:>3}  {why}  [{names}"
              f"{', ...' if len(group) > 3 else ''}]")


if __name__ == "__main__":
    sys.exit(main())
