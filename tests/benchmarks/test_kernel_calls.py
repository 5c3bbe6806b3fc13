"""benchmarks/kernel_calls.py runs: msc's output matches onnxruntime's on each stack it times
(the script exits otherwise), and each kind prints one row. No timing is asserted."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

ROOT = Path(__file__).resolve().parents[2]
KINDS = ["conv1x1 64@4x4", "dw3x3 32@16x16", "maxpool3x3 32@16x16"]


def test_each_kind_prints_one_row_of_numbers():
    proc = subprocess.run([sys.executable, "benchmarks/kernel_calls.py", "--nodes", "2",
                           "--rounds", "1", "--kinds", *KINDS], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line.strip("|").split("|") for line in proc.stdout.splitlines()
            if line.startswith("| ") and not line.startswith("| kind")]
    assert [r[0].strip() for r in rows] == KINDS
    for row in rows:
        assert all(re.fullmatch(r"\d+\.\d\d", cell.strip()) for cell in row[1:])
