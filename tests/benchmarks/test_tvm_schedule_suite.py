"""The TVM schedule suite runner on a tiny TVM-style test folder (CI has no TVM checkout):
``import tvm`` reaches msc, passing and failing cases are counted, a crashing file is one
error and does not stop the others."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import tvm_schedule_suite as suite

SPLIT = '''
import pytest
import tvm
import tvm.testing
from tvm import s_tir, tirx
from tvm.s_tir.schedule.testing import assert_structural_equal_ignore_global_symbol
from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def before(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.S(16, i)
            B[vi] = A[vi] * 2.0


@T.prim_func(s_tir=True)
def after(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for io, ii in T.grid(4, 4):
        with T.sblock("B"):
            vi = T.axis.spatial(16, io * 4 + ii)
            B[vi] = A[vi] * 2.0


def test_split_passes():
    sch = s_tir.Schedule(before)
    (i,) = sch.get_loops(sch.get_sblock("B"))
    sch.split(i, [4, 4])
    assert_structural_equal_ignore_global_symbol(sch.mod["main"], after)


def test_wrong_expectation_fails():
    sch = s_tir.Schedule(before)
    assert_structural_equal_ignore_global_symbol(sch.mod["main"], after)


def test_error_class():
    assert tvm.s_tir.ScheduleError.__module__ == "msc.errors"


@tvm.testing.requires_cuda
def test_on_gpu():
    raise AssertionError("never runs")
'''

CRASH = '''
import os


def test_crashes():
    os._exit(3)
'''


def _suite(tmp_path: Path) -> Path:
    folder = tmp_path / "tests" / "python" / "s_tir" / "schedule"
    folder.mkdir(parents=True)
    (folder / "test_tir_schedule_split.py").write_text(textwrap.dedent(SPLIT))
    (folder / "test_tir_schedule_crash.py").write_text(textwrap.dedent(CRASH))
    return tmp_path


def test_runner_counts_pass_fail_gpu_and_crash(tmp_path, capsys):
    out = tmp_path / "report.json"
    assert suite.main(["--tvm-src", str(_suite(tmp_path)), "--json", str(out),
                       "--timeout", "120"]) == 0
    report = json.loads(out.read_text())
    files = {f["primitive"]: f for f in report["files"]}
    split = {k.split("::")[-1]: v["outcome"] for k, v in files["split"]["tests"].items()}
    assert split == {"test_split_passes": "pass", "test_wrong_expectation_fails": "fail",
                     "test_error_class": "pass", "test_on_gpu": "gpu"}
    assert [t["outcome"] for t in files["crash"]["tests"].values()] == ["error"]
    assert report["total"] == {"pass": 2, "fail": 1, "error": 1, "skip": 0, "gpu": 1}
    message = files["split"]["tests"][next(k for k in files["split"]["tests"]
                                           if k.endswith("fails"))]["message"]
    assert message.startswith("ValueError: StructuralEqual check failed")
    assert "pass 2/4" in capsys.readouterr().out


def test_uncollectable_file_counts_each_test_as_error(tmp_path):
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "test_x.py").write_text("import tvm.no_such_module\n\n"
                                      "def test_a():\n    pass\n\ndef test_b():\n    pass\n"
                                      "\ndef test_c():\n    target = 'cuda'\n")
    result = suite.run_file(folder / "test_x.py", timeout=120)
    outcomes = {k: t["outcome"] for k, t in result["tests"].items()}
    assert outcomes == {"test_x.py::test_a": "error", "test_x.py::test_b": "error",
                        "test_x.py::test_c": "gpu"}
    assert "tvm.no_such_module" in result["tests"]["test_x.py::test_a"]["message"]
    (folder / "test_x_mma_numeric.py").write_text((folder / "test_x.py").read_text())
    result = suite.run_file(folder / "test_x_mma_numeric.py", timeout=120)
    assert {t["outcome"] for t in result["tests"].values()} == {"gpu"}


BIND = '''
import tvm
from tvm import s_tir
from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def before(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.S(16, i)
            B[vi] = A[vi] * 2.0


def test_binds_a_thread_axis():
    sch = s_tir.Schedule(before)
    (i,) = sch.get_loops(sch.get_sblock("B"))
    sch.bind(i, "threadIdx.x")


def test_parallel_then_fails():
    sch = s_tir.Schedule(before)
    (i,) = sch.get_loops(sch.get_sblock("B"))
    sch.parallel(i)
    raise AssertionError("a CPU case that fails is counted")
'''


def test_bind_to_a_thread_axis_counts_as_gpu_and_failures_table(tmp_path):
    folder = tmp_path / "tests" / "python" / "s_tir" / "schedule"
    folder.mkdir(parents=True)
    (folder / "test_tir_schedule_for_kind.py").write_text(textwrap.dedent(BIND))
    table = tmp_path / "failures.md"
    assert suite.main(["--tvm-src", str(tmp_path), "--failures", str(table),
                       "--timeout", "120"]) == 0
    rows = [ln for ln in table.read_text().splitlines() if ln.startswith("| for_kind")]
    assert rows == [("| for_kind | `test_parallel_then_fails` | AssertionError: a CPU case "
                     "that fails is counted | other |")]


def test_reason_classes_name_why_a_case_fails():
    assert suite.reason_class("ValueError: StructuralEqual check failed: ...") == "text differs"
    assert suite.reason_class("Failed: DID NOT RAISE ScheduleError") == "refusal missing"
    assert suite.reason_class("AttributeError: 'Schedule' object has no attribute 'read_at'"
                              ) == "not implemented"
    assert suite.reason_class("msc.errors.ScheduleError: key 'B': rfactor: ...") == \
        "msc refuses"
    assert suite.reason_class("TypeError: SBlock.__init__() got an unexpected keyword "
                              "argument 'name_hint'") == "object model"
