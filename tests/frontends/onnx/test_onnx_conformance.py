"""The ONNX node conformance suite through the user's path, as a ratchet, on CI's subset.

Runs a fixed subset of ``onnx.backend.test.case.node`` (``ci_subset``: the first case of every
op, plus the cases with parameters known only at run time and control flow) through the path
``msc run`` ships (from_onnx -> MSCGraph -> to_relax script -> relax.build -> VM) and, beside
it, the internal path (from_onnx(as_msc=False) -> relax.build -> VM); tolerances in
tests/helpers/onnx_conformance.py. Cases run in 2 workers with a
per-case time limit, writes the per-op report to ``$MSC_ONNX_CONFORMANCE_REPORT`` (default:
pytest's tmp dir), and fails when a case that passed when the ratchet was recorded fails now.
Raise the ratchet with ``MSC_ONNX_RATCHET_UPDATE=1`` after an improvement. The whole suite,
side by side with onnxruntime, is ``python benchmarks/onnx_conformance.py``.
"""

import functools
import json
import os
from pathlib import Path

import pytest

from tests.helpers import onnx_conformance as conf

RATCHET = Path(__file__).parent / "data" / "onnx_conformance_ratchet.json"
RUNNERS = ("msc_user", "msc")  # the user's path first: the ratchet and the failing lists


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    cases = conf.ci_subset(conf.load_cases())
    results = conf.run_suite(cases, RUNNERS, workers=2, timeout=30.0)
    summary = conf.summarize(cases, results, RUNNERS)
    default = tmp_path_factory.mktemp("onnx") / "onnx_conformance.json"
    path = Path(os.environ.get("MSC_ONNX_CONFORMANCE_REPORT", default))
    path.write_text(json.dumps(summary, indent=1))
    return summary


def passing(summary) -> list:
    return sorted(n for n, r in summary["cases"].items() if r["msc_user"]["status"] == "pass")


def test_conformance_does_not_regress(report):
    now = set(passing(report))
    if os.environ.get("MSC_ONNX_RATCHET_UPDATE"):
        RATCHET.write_text(json.dumps({"evaluator": report["evaluator"],
                                       "total": report["total"], "pass": len(now),
                                       "passing": sorted(now)}, indent=0) + "\n")
    ratchet = json.loads(RATCHET.read_text())
    lost = sorted(set(ratchet["passing"]) - now)
    details = {n: report["cases"][n]["msc_user"] for n in lost if n in report["cases"]}
    assert not lost, f"{len(lost)} conformance cases regressed: {details}"
    assert len(now) >= ratchet["pass"]


def test_subset_covers_every_op_and_the_run_time_value_cases(report):
    every_op = {op for case in conf.load_cases() for op in conf.case_ops(case)}
    assert set(report["ops"]) == every_op
    assert set(conf.RUNTIME_VALUE_CASES) <= set(report["cases"])


def test_report_lists_every_op(report):
    assert report["total"] == len(report["cases"])
    for row in report["ops"].values():
        assert row["msc_user_pass"] + len(row["failing"]) == row["cases"]


def test_the_users_path_passes_what_the_internal_path_passes(report):
    """Except models whose graph inputs are sequences or optionals (an MSCGraph input is a
    tensor): those are refused with UnsupportedOpError naming the input."""
    cases = {c.name: c for c in conf.load_cases()}
    behind = {n: r for n, r in report["cases"].items()
              if r["msc"]["status"] == "pass" and r["msc_user"]["status"] != "pass"}
    for name, result in behind.items():
        assert _has_container_input(cases[name].model), f"{name}: {result['msc_user']}"
        assert result["msc_user"]["status"] == "unsupported", f"{name}: {result['msc_user']}"


def _has_container_input(model) -> bool:
    inits = {t.name for t in model.graph.initializer}
    return any(v.type.WhichOneof("value") in ("sequence_type", "optional_type")
               for v in model.graph.input if v.name not in inits)


@pytest.mark.parametrize("case", ["test_cast_BFLOAT16_to_FLOAT", "test_cast_FLOAT_to_BFLOAT16",
                                  "test_cast_FLOAT_to_INT4", "test_cast_INT4_to_FLOAT",
                                  "test_cast_FLOAT_to_FLOAT8E4M3FN"])
def test_onnxruntime_anchor_gets_values_its_numpy_api_cannot_take(case):
    """The anchor is measured fairly: bfloat16 / float8 / int4 values reach onnxruntime's
    kernels as OrtValues (its numpy bridge refuses them), and come back as ml_dtypes arrays."""
    assert conf.run_case(_case_named(case), "onnxruntime")["status"] == "pass"


@functools.cache
def _cases_by_name() -> dict:
    return {c.name: c for c in conf.load_cases()}


def _case_named(name: str):
    return _cases_by_name()[name]
