"""Native indexing kernels on hostile indices (past the end, negative, too negative, int64
max / min) never read or write out of bounds: each call equals the numpy fact, or both refuse
(numpy raises, msc raises an msc.errors exception naming the op). The cases run in a child
process per op family (tests/backend/index_safety_cases.py), so a crash fails the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.backend.index_safety_cases import FAMILIES

ROOT = Path(__file__).resolve().parents[2]
GOOD = ("value", "error")


def _run_family(family: str) -> list[dict]:
    proc = subprocess.run([sys.executable, "-m", "tests.backend.index_safety_cases", family],
                          check=False, cwd=ROOT, capture_output=True, text=True, timeout=240,
                          env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    assert proc.returncode == 0, f"child died ({proc.returncode}):\n{proc.stderr[-3000:]}"
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_hostile_indices_give_numpy_result_or_clean_error(family):
    results = _run_family(family)
    assert len(results) == len(list(FAMILIES[family]())), "the child stopped early"
    bad = [r for r in results if r["verdict"] not in GOOD]
    assert not bad, "\n".join(f"{r['case']}: {r['verdict']}: {r['detail']}" for r in bad)
    for r in results:
        if r["verdict"] == "error":
            assert r["op"] in r["detail"], r


def test_every_family_refuses_some_index():
    """The cases do reach out-of-range indices (a test that never errs proves nothing)."""
    names = {name for f in FAMILIES.values() for name, *_ in f()}
    for kind in ("over", "under", "huge", "tiny", "neg"):
        assert any(n.endswith(kind) for n in names), kind
