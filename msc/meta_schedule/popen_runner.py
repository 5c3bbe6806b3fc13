"""Measuring candidates in a worker process, so a crash or a hang costs one candidate.

``tune_tir(..., runner="popen")`` sends each candidate (its TVMScript text) to a worker that
parses, compiles, checks and times it, as :func:`runner.measure` does in-process. A worker
that dies (a segfault in native code) or passes ``timeout`` seconds is killed and started
again; the candidate becomes a failure at stage "crash" or "timeout"::

    run = PopenRunner(task, timeout=30)
    secs = run(candidate_func)            # or CandidateError
    run.close()
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile

import numpy as np

from .runner import CandidateError, Workload

__all__ = ["PopenRunner"]

WORKER = r"""
import json, sys
import numpy as np
from msc.meta_schedule.runner import CandidateError, measure
from msc.tir.parser import parse_tir_text

class Task:
    pass

data = np.load(sys.argv[1])
task = Task()
task.args = [data[f"a{k:03d}"] for k in range(int(data["n"]))]
task.outputs = [int(k) for k in data["outputs"]]
task.reference = [data[f"r{k:03d}"] for k in range(len(task.outputs))]
task.fresh_args = lambda: [a if k not in task.outputs else np.zeros_like(a)
                           for k, a in enumerate(task.args)]
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    try:
        func = next(iter(parse_tir_text(request["script"]).values()))
        reply = {"secs": measure(task, func, request["min_repeat_ms"],
                                 cutoff=request.get("cutoff"))}
    except CandidateError as exc:
        reply = {"stage": exc.stage, "error": str(exc)}
    except Exception as exc:
        reply = {"stage": "worker", "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(reply), flush=True)
"""


class PopenRunner:
    """A worker process measuring candidates of one workload."""

    def __init__(self, task: Workload, timeout: float = 60.0, min_repeat_ms: float = 40.0,
                 threads: int = 1):
        self.task, self.timeout, self.min_repeat_ms = task, timeout, min_repeat_ms
        self.threads = threads
        self._dir = tempfile.TemporaryDirectory(prefix="msc_tune_")
        self._data = os.path.join(self._dir.name, "task.npz")
        arrays = {f"a{k:03d}": a for k, a in enumerate(task.args)}
        arrays.update({f"r{k:03d}": r for k, r in enumerate(task.reference)})
        np.savez(self._data, n=len(task.args), outputs=np.array(task.outputs, "int64"),
                 **arrays)
        self.proc = None
        self.restarts = 0

    def _start(self) -> None:
        # The worker is the isolation: LLVM runs in it, not in a child it forks (a child
        # would outlive the worker killed on a timeout, compiling on for nothing).
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
               "MSC_NUM_THREADS": str(self.threads), "MSC_TIR_ISOLATE": "0"}
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER, self._data], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        if self._read(max(self.timeout, 120.0)) is None:
            raise CandidateError("worker", "the measuring process did not start")

    def _read(self, timeout: float):
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else None
        return json.loads(line) if line else None

    def __call__(self, func, cutoff: float | None = None) -> list:
        """Seconds per call of ``func`` (``runner.measure``, with its ``cutoff``)."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        request = {"script": func.script("main"), "min_repeat_ms": self.min_repeat_ms,
                   "cutoff": cutoff}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        reply = self._read(self.timeout)
        if reply is None:
            stage, code = self._kill()
            raise CandidateError(stage, f"the measuring process "
                                        f"{'timed out' if stage == 'timeout' else 'died'} "
                                        f"(exit code {code}); it is restarted")
        if "secs" not in reply:
            raise CandidateError(reply.get("stage", "worker"), reply.get("error", "?"))
        return reply["secs"]

    def _kill(self) -> tuple:
        code = self.proc.poll()
        if code is None:  # alive: it hangs
            self.proc.kill()
            self.proc.wait()
        self.restarts += 1
        return ("timeout" if code is None else "crash"), code

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        self._dir.cleanup()
