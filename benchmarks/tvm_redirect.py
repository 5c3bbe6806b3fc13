"""The child side of ``tvm_schedule_suite.py``: ``import tvm...`` resolves to msc, and one TVM
test file runs under pytest with each outcome written as a JSON line.

    python benchmarks/tvm_redirect.py TEST_FILE RESULTS.jsonl

The results file gets ``{"collected": [...]}`` first, then one ``{"id", "outcome", "message"}``
per test, so a crash or a hang loses only the tests not yet reported.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import re
import sys

# TVM module prefix -> msc module; the longest matching prefix wins, the rest of the dotted
# name is kept (tvm.s_tir.schedule.trace -> msc.s_tir.schedule.trace).
ALIASES = {
    "tvm": "msc",
    "tvm.script.tirx": "msc.script.tir",
    "tvm.script.tir": "msc.script.tir",
    "tvm.tirx": "msc.tir",
    "tvm.tirx.function": "msc.tir",  # its TensorIntrin is msc.tir's (the package's door)
    "tvm.tir": "msc.tir",
    "tvm.testing": "msc.testing",
    "tvm.s_tir.schedule.testing": "msc.testing",
    "tvm.s_tir.meta_schedule": "msc.meta_schedule",  # TVM 0.27 moved it under s_tir
    "tvm_ffi": "msc.ir",  # TVM's FFI package: the tests call its structural_equal / _hash
}
# A GPU target or GPU-only intrinsic named in a test's body, or a loop bound to a GPU thread
# axis (`sch.bind(i, "threadIdx.x")`): msc compiles for the CPU and refuses `bind` by design.
GPU_WORDS = re.compile(r"\b(cuda|rocm|nvptx|metal|vulkan|opencl|mma|mfma|ldmatrix|wmma)\b|"
                       r"requires_gpu|run_with_gpu_lock|sm_\d+|"
                       r"\.bind\([^)]*[\"'](blockIdx|threadIdx|vthread)")
# A file named for a GPU intrinsic (test_..._ldmatrix_mma_numeric.py) is GPU-only as a whole.
GPU_FILE = re.compile(r"(?<![a-z])(cuda|rocm|mma|mfma|gpu)(?![a-z])")


def msc_name(fullname: str) -> str | None:
    """The msc module that stands for the TVM module ``fullname`` (None: not a TVM name)."""
    parts = fullname.split(".")
    for k in range(len(parts), 0, -1):
        prefix = ".".join(parts[:k])
        if prefix in ALIASES:
            return ".".join([ALIASES[prefix], *parts[k:]])
    return None


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        try:
            return importlib.import_module(self.target)
        except ModuleNotFoundError as exc:
            raise ModuleNotFoundError(f"msc has no counterpart of {spec.name} "
                                      f"(looked for {self.target})", name=spec.name) from exc

    def exec_module(self, module):
        pass


class TvmToMsc(importlib.abc.MetaPathFinder):
    """A meta-path finder: every ``tvm`` / ``tvm.*`` import returns the msc module."""

    def find_spec(self, fullname, path=None, target=None):
        name = msc_name(fullname)
        if fullname.startswith("msc."):
            # `from tvm import tirx` asks the module (msc) for `msc.tirx`: a TVM name, unless
            # msc has a module by that name
            if importlib.machinery.PathFinder.find_spec(fullname, path) is not None:
                return None
            name = msc_name("tvm" + fullname[3:])
        if name is None or name == fullname:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(name))


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (idempotent)."""
    if not any(isinstance(f, TvmToMsc) for f in sys.meta_path):
        sys.meta_path.insert(0, TvmToMsc())


class Recorder:
    """A pytest plugin writing collected ids and each test's outcome to ``path``."""

    def __init__(self, path: str):
        self.out = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed at session end

    def _write(self, row: dict) -> None:
        self.out.write(json.dumps(row) + "\n")
        self.out.flush()

    def pytest_collection_modifyitems(self, items):
        self._gpu = {item.nodeid for item in items if _needs_gpu(item)}
        self._write({"collected": [item.nodeid for item in items]})

    def pytest_collectreport(self, report):
        if report.failed:
            self._write({"id": report.nodeid or "<collect>", "outcome": "error",
                         "message": first_line(report.longrepr)})

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            outcome = {"failed": "fail" if report.when == "call" else "error",
                       "skipped": "skip", "passed": "pass"}[report.outcome]
            message = "" if report.passed else first_line(report.longrepr)
            if outcome == "skip" and message.startswith("gpu") or (
                    outcome != "pass" and report.nodeid in getattr(self, "_gpu", ())):
                outcome = "gpu"
            self._write({"id": report.nodeid, "outcome": outcome, "message": message})

    def pytest_sessionfinish(self):
        self.out.close()


def _needs_gpu(item) -> bool:
    """A test whose own body names a GPU target or GPU-only intrinsic."""
    import inspect

    try:
        source = inspect.getsource(item.obj)
    except (OSError, TypeError, AttributeError):
        return False
    return bool(GPU_WORDS.search(source) or GPU_FILE.search(item.path.stem))


def first_line(longrepr) -> str:
    """The line that says why: the exception line of a failure, the reason of a skip."""
    if isinstance(longrepr, tuple):  # a skip: (file, line, reason)
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(longrepr)
    raised = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")]
    lines = raised[-1:] or [ln for ln in text.splitlines() if ln.strip()]
    return lines[0][:300] if lines else ""


def run(test_file: str, results: str) -> int:
    """Run ``test_file`` under pytest with the tvm -> msc redirect; outcomes go to ``results``."""
    install()
    import pytest

    args = [test_file, "-q", "-p", "no:cacheprovider", "--noconftest", "-o", "addopts=",
            "-W", "ignore::DeprecationWarning", "--rootdir", str(__import__("os").path
                                                                  .dirname(test_file))]
    return pytest.main(args, plugins=[Recorder(results)])


if __name__ == "__main__":
    import argparse

    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("test_file", help="one TVM test file")
    cli.add_argument("results", help="JSON-lines file the outcomes are written to")
    args = cli.parse_args()
    sys.exit(run(args.test_file, args.results))
