"""ONNX node conformance: msc's pass counts on two paths, and onnxruntime's in the same run.

    python benchmarks/onnx_conformance.py [--workers 2] [--timeout 20] [--report out.json]
                                          [--filter REGEX] [--no-ort] [--path user|internal|both]

Two msc paths are measured. The user's path (``msc_user``) is what ``msc run`` / ``msc codegen``
ship: from_onnx -> MSCGraph -> to_relax (the generated script) -> relax.build -> VM. The
internal path (``msc``) skips the graph and the codegen: from_onnx(as_msc=False) ->
relax.build -> VM. Prints ``onnx_node (<path>): pass P/N`` per path and ``onnxruntime: pass
Q/N``, the cases one passes and another does not, and every case the user's path does not pass
grouped by cause (``tests.helpers.onnx_conformance.cause``). Tolerances are onnx's per case
(default rtol 1e-3, atol 1e-7). ``--subset`` runs CI's fixed subset only.
"""

from __future__ import annotations

import argparse
import itertools
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
    parser.add_argument("--path", choices=("user", "internal", "both"), default="both",
                        help="msc path(s) to measure (default both; causes are the first's)")
    parser.add_argument("--subset", action="store_true",
                        help="only CI's subset (one case per op + run-time values)")
    args = parser.parse_args(argv)

    cases = conf.load_cases()
    if args.subset:
        cases = conf.ci_subset(cases)
    if args.filter:
        cases = [c for c in cases if re.search(args.filter, c.name)]
    paths = {"user": ("msc_user",), "internal": ("msc",), "both": ("msc_user", "msc")}
    runners = paths[args.path] + (
        ("onnxruntime",) if _ort_available() and not args.no_ort else ())
    start = time.perf_counter()
    results = conf.run_suite(cases, runners, workers=args.workers, timeout=args.timeout)
    report = conf.summarize(cases, results, runners)
    elapsed = time.perf_counter() - start

    total, main_path = report["total"], runners[0]
    print(f"({elapsed:.0f} s, {args.workers} workers)")
    for runner in runners:
        label = {"msc_user": "onnx_node (user's path)", "msc": "onnx_node (internal path)"}
        print(f"{label.get(runner, runner)}: pass {report['pass'][runner]}/{total}")
    for a, b in itertools.pairwise(runners):
        _print_differences(cases, results, a, b)
    statuses = Counter(results[c.name][main_path]["status"] for c in cases)
    print(f"{main_path} statuses:", dict(sorted(statuses.items())))
    _print_causes(cases, results, main_path, "onnxruntime" in runners)
    if args.failures:
        for c in cases:
            r = results[c.name][main_path]
            if r["status"] != "pass":
                print(f"  {c.name}: {r['status']}: {r['message'][:200]}")
    if args.report:
        args.report.write_text(json.dumps(report, indent=1))
    return 0


def _passes(results: dict, case, runner: str) -> bool:
    return results[case.name][runner]["status"] == "pass"


def _print_differences(cases: list, results: dict, first: str, second: str) -> None:
    """The cases one runner passes and the other does not, by name."""
    for a, b in ((first, second), (second, first)):
        names = [c.name for c in cases if _passes(results, c, a) and not _passes(results, c, b)]
        print(f"{a} passes, {b} does not ({len(names)}):")
        print(textwrap.fill(" ".join(n.removeprefix("test_") for n in names), 100,
                            initial_indent="  ", subsequent_indent="  ") or "  -")


def _print_causes(cases: list, results: dict, runner: str, with_ort: bool) -> None:
    """Every case ``runner`` does not pass, grouped by cause (largest group first), with how
    many of them onnxruntime passes and up to three names."""
    groups = defaultdict(list)
    for c in cases:
        if not _passes(results, c, runner):
            groups[conf.cause(c, results[c.name][runner])].append(c)
    print(f"why msc does not pass ({sum(map(len, groups.values()))} cases, "
          f"{len(groups)} causes; 'ort' = of them onnxruntime passes):")
    for why, group in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        ort = sum(_passes(results, c, "onnxruntime") for c in group) if with_ort else "-"
        names = ", ".join(c.name.removeprefix("test_") for c in group[:3])
        print(f"  {len(group):4d}  ort {ort!s:>3}  {why}  [{names}"
              f"{', ...' if len(group) > 3 else ''}]")


if __name__ == "__main__":
    sys.exit(main())
