"""Native indexing kernels on hostile indices (past the end, negative, too negative, int64
max / min) never read or write out of bounds: each call equals the numpy fact, or both refuse
(numpy raises, msc raises an msc.errors exception naming the op). The cases run in a child
process per op family (tests/backend/index_safety_cases.py), so a crash fails the test."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from msc.errors import RuntimeCallError
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
    cases = {name: tensors for name, _, tensors, *_ in FAMILIES[family]()}
    for r in results:
        if r["verdict"] == "error":
            assert r["op"] in r["detail"], r
            _names_the_bad_index(r["detail"], cases[r["case"]])


_REPORT = re.compile(r"index (-?\d+) \(input \d, at \[[\d, ]*\]\) is out of range for axis "
                     r"\d of (input \d|the output) \(size (\d+): (valid (-?\d+)\.\.(-?\d+)|an "
                     r"empty axis)\)")


def _names_the_bad_index(detail: str, tensors: list) -> None:
    """The message names a value of the case's index tensors that is outside the range it
    states (index_report.py), not just "an index is out of range"."""
    found = _REPORT.search(detail)
    assert found, f"no value named: {detail}"
    value, size = int(found[1]), int(found[3])
    if found[5] is not None:
        assert not int(found[5]) <= value <= int(found[6]), detail
        assert int(found[6]) == size - 1, detail
    flat = [t for item in tensors for t in (item if isinstance(item, list) else [item])]
    assert any(t.dtype.kind in "iu" and value in t for t in flat), detail


@pytest.mark.parametrize("call", ["fast", "checked", "step"])
def test_compiled_kernel_names_the_bad_index(call):
    """compile_prim_func's entry (its fast and its checked path) and a plan's native step (the
    VM's chains are covered above) name the value too."""
    from msc.backend.legalize import legalize_call
    from msc.backend.legalize.testing import build_call
    from msc.backend.lowering.compile import compile_prim_func
    from msc.backend.runtime.native_run import ArgSpec, native_step

    x, k = np.arange(12, dtype="float32").reshape(3, 4), np.array([[0, 1], [2, -9]])
    out = np.empty((2, 2, 4), "float32")
    kernel = compile_prim_func(legalize_call(build_call("take", [x, k], axis=0)))
    specs = [ArgSpec(f"a{i}", a.shape, a.dtype, i == 2) for i, a in enumerate((x, k, out))]
    run = {"fast": lambda: kernel(x, k, out), "checked": lambda: kernel(x, k),
           "step": lambda: native_step(kernel, specs, 2, True, "take_node")(x, k, out)}[call]
    with pytest.raises(RuntimeCallError, match=re.escape(
            "index -9 (input 2, at [1, 1]) is out of range for axis 0 of input 1 (size 3: "
            "valid -3..2)")):
        run()


def test_every_family_refuses_some_index():
    """The cases do reach out-of-range indices (a test that never errs proves nothing)."""
    names = {name for f in FAMILIES.values() for name, *_ in f()}
    for kind in ("over", "under", "huge", "tiny", "neg"):
        assert any(n.endswith(kind) for n in names), kind
