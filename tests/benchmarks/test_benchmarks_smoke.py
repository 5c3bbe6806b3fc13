"""benchmarks/backend.py: the --quick smoke run prints the zoo table, and the random-weight
copies of the onnx light models (benchmarks/common.py) really carry random weights. No timing is
asserted."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import numpy_helper

from benchmarks.common import as_logits, light_model, ort_session, with_random_weights
from benchmarks.tvm_child import TvmChild

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = ["model", "msc ms", "ORT ms", "TVM ms", "msc / ORT", "msc / TVM",
           "0.02 weights: max rel diff", "random: max abs diff", "random: max abs logit",
           "TVM random: max abs diff", "msc build s", "TVM build s", "msc kernels"]
RATIO = re.compile(r"\d+\.\d\dx")


@pytest.fixture(scope="module")
def quick_output() -> str:
    proc = subprocess.run([sys.executable, "benchmarks/backend.py", "--quick"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _table(text: str) -> list[list[str]]:
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_quick_prints_one_squeezenet_row_with_every_column(quick_output):
    header, *rows = _table(quick_output)
    assert header == COLUMNS
    assert [row[0] for row in rows] == ["squeezenet"]
    cells = dict(zip(header, rows[0]))
    assert float(cells["msc ms"]) > 0 and float(cells["ORT ms"]) > 0
    assert RATIO.fullmatch(cells["msc / ORT"])
    # --quick runs no TVM: its cells are dashes, not crash/timeout.
    assert [cells[c] for c in COLUMNS if "TVM" in c] == ["-"] * 4
    assert re.fullmatch(r"\d+ native / \d+ numpy", cells["msc kernels"])


def test_quick_logits_match_onnxruntime(quick_output):
    cells = dict(zip(COLUMNS, _table(quick_output)[1]))
    assert float(cells["0.02 weights: max rel diff"]) < 1e-4
    scale = float(cells["random: max abs logit"])
    assert float(cells["random: max abs diff"]) < 1e-4 * max(scale, 1.0)


def test_quick_prints_the_geomean_and_nothing_it_was_not_asked_for(quick_output):
    assert re.search(r"geomean msc / onnxruntime: \d+\.\d\dx over 1 of 1 models", quick_output)
    prose = [line for line in quick_output.splitlines() if not line.startswith("|")]
    assert not [line for line in prose if "tvm" in line.lower()]
    assert "GEMM" not in quick_output and "resnet50 build" not in quick_output


def test_random_copy_replaces_every_weight():
    model = with_random_weights(as_logits(light_model("resnet50")))
    ops = [node.op_type for node in model.graph.node]
    assert "ConstantOfShape" not in ops and ops[-1] != "Softmax"
    arrays = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    floats = [a for a in arrays.values() if a.dtype == np.float32]
    assert len(floats) == 53 * 5 + 2  # conv weight + 4 batch-norm params per conv, fc w and b
    assert all(np.unique(a).size > a.size // 2 for a in floats)  # a 0.02 fill has one value
    variances = [arrays[n.input[4]] for n in model.graph.node if n.op_type == "BatchNormalization"]
    assert len(variances) == 53 and all((v > 0).all() for v in variances)


def test_random_copy_gives_distinct_logits_where_the_shipped_model_does_not():
    shipped = as_logits(light_model("squeezenet"))
    x = np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32)
    flat = ort_session(shipped)(x)
    logits = ort_session(with_random_weights(shipped))(x)
    assert flat.shape == logits.shape == (1, 1000, 1, 1)
    assert np.ptp(flat) <= 1e-6 * np.abs(flat).max()  # 0.02 everywhere: every class alike
    assert np.isfinite(logits).all() and np.ptp(logits) > 0.1 * np.abs(logits).max()


@pytest.mark.parametrize("code, status", [
    ("import ctypes; ctypes.string_at(0)", "crash"),         # a segfault, as TVM can have
    ("raise RuntimeError('no converter for Foo')", "error"),
    ("import time; time.sleep(60)", "timeout"),
])
def test_tvm_child_failures_become_a_status(tmp_path, code, status):
    model = as_logits(light_model("squeezenet"))
    child = TvmChild(model, np.zeros(1, np.float32), 2.0, str(tmp_path), code=code)
    assert (child.status, child.output, child.timed(0.1)) == (status, None, None)
    assert child.proc.poll() is not None  # never left running
    if status == "error":
        assert child.error == "RuntimeError: no converter for Foo"
    child.close()


def test_tvm_child_protocol_answers_each_timing_request(tmp_path):
    fake = ("import json, sys, numpy as np; np.save(sys.argv[3], np.load(sys.argv[2]) * 2); "
            "print(json.dumps({'build': 1.5}), flush=True)\n"
            "for line in sys.stdin: print(json.dumps({'seconds': int(line) / 1e3}), flush=True)")
    model = as_logits(light_model("squeezenet"))
    child = TvmChild(model, np.ones(3, np.float32), 60.0, str(tmp_path), code=fake)
    assert child.status is None and child.build_s == 1.5
    np.testing.assert_array_equal(child.output, [2, 2, 2])
    assert [child.timed(0.25), child.timed(0.5)] == [0.25, 0.5]
    child.close()
    assert child.proc.returncode == 0


# modules the scripts import (no command line of their own)
MODULES = {"common.py", "tvm_child.py", "scaling_models.py", "scaling_memory.py",
           "search_workloads.py"}


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "benchmarks").glob("*.py")
                                          if p.name not in MODULES))
def test_every_benchmark_script_starts(script):
    """Each documented benchmark command at least imports and parses its arguments."""
    proc = subprocess.run([sys.executable, f"benchmarks/{script}", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and "usage:" in proc.stdout, proc.stderr[-2000:]
