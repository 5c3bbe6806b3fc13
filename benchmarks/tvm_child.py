"""TVM 0.27 in a child process for benchmarks/backend.py --tvm: it builds one ONNX model
(``from_onnx``, the "zero" pipeline, ``relax.build``) and times it on request. TVM can
segfault, and untuned it is slow, so it never runs in the benchmark's own process."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

import numpy as np

TVM_CHILD = r"""
import json, sys, time
import numpy as np, onnx, tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx
model_path, x_path, y_path = sys.argv[1:4]
mod = from_onnx(onnx.load(model_path), keep_params_in_input=False)
start = time.perf_counter()
target = tvm.target.Target("llvm")
with target:
    mod = relax.get_pipeline("zero")(mod)
ex = relax.build(mod, target=target)
build_s = time.perf_counter() - start
dev = tvm.cpu()
vm = relax.VirtualMachine(ex, dev)
x = tvm.runtime.tensor(np.load(x_path), dev)
np.save(y_path, vm["main"](x).numpy())
print(json.dumps({"build": build_s}), flush=True)
for line in sys.stdin:
    timer = vm.time_evaluator("main", dev, number=1, repeat=1, min_repeat_ms=int(line))
    print(json.dumps({"seconds": timer(x).mean}), flush=True)
"""


class TvmChild:
    """TVM building and running one model in a child process.

    ``status`` is None while the child answers, else "crash" (killed by a signal), "error"
    (a Python exception, last stderr line in ``error``) or "timeout"; a failed child is killed
    and every later ``timed`` returns None.
    """

    def __init__(self, model, x: np.ndarray, timeout: float, workdir: str,
                 num_threads: int = 1, code: str = TVM_CHILD):
        self.timeout, self.status, self.error = timeout, None, ""
        self.build_s, self.output = None, None
        paths = [os.path.join(workdir, f) for f in ("model.onnx", "x.npy", "y.npy")]
        Path(paths[0]).write_bytes(model.SerializeToString())
        np.save(paths[1], x)
        self._stderr = Path(workdir) / "stderr.txt"
        env = {**os.environ, "TVM_NUM_THREADS": str(num_threads),
               "OMP_NUM_THREADS": str(num_threads)}
        with self._stderr.open("w") as stderr:  # the child keeps its own copy of the handle
            self.proc = subprocess.Popen([sys.executable, "-c", code, *paths], text=True,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=stderr, env=env)
        if (reply := self._reply()) is not None:
            self.build_s, self.output = reply["build"], np.load(paths[2])

    def _reply(self) -> dict | None:
        if not select.select([self.proc.stdout], [], [], self.timeout)[0]:
            return self._fail("timeout")
        line = self.proc.stdout.readline()
        if not line:
            return self._fail("crash" if self.proc.wait() < 0 else "error")
        return json.loads(line)

    def _fail(self, status: str) -> None:
        self.status = status
        self.proc.kill()
        self.proc.wait()
        self.error = (self._stderr.read_text().strip().splitlines() or [""])[-1]

    def timed(self, min_time: float) -> float | None:
        """Seconds per call over at least ``min_time`` seconds (and one call)."""
        if self.status:
            return None
        self.proc.stdin.write(f"{int(min_time * 1e3)}\n")
        self.proc.stdin.flush()
        reply = self._reply()
        return reply and reply["seconds"]

    def close(self) -> None:
        if not self.status:
            self.proc.stdin.close()
            self.proc.wait()
