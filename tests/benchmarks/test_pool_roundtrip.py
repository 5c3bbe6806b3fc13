"""benchmarks/pool_roundtrip.py runs: it prints the round-trip rows and one model row beside
onnxruntime's times, with the model's dispatch count. No timing is asserted."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]


def test_prints_round_trips_and_a_model_row():
    proc = subprocess.run([sys.executable, "benchmarks/pool_roundtrip.py", "--models", "resnet",
                           "--batch", "2", "--calls", "50", "--idle", "0.001", "--rounds", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {r[0].strip(): r[1:] for line in proc.stdout.splitlines() if line.startswith("| ")
            for r in [line.strip("|").split("|")]}
    for name in ("serial", "warm", "cold", "python"):
        assert all(re.fullmatch(r"\d+\.\d\d", c.strip()) for c in rows[name]), rows[name]
    model = rows["resnet b2"]
    assert re.fullmatch(r"\d+", model[0].strip())  # dispatches per call at 2 threads
    assert all(re.fullmatch(r"\d+\.\d\d\d?", c.strip()) for c in model[1:])
    assert "round trip" in proc.stdout.splitlines()[0]  # the host's split costs first
