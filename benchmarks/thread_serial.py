"""What stays serial at 2 threads, per zoo model: a load-independent view of thread scaling.

    .venv/bin/python benchmarks/thread_serial.py [--models squeezenet resnet50 ...] [--top 3]

Each model runs once at 2 threads, recording for every native kernel call whether it split
(a task list or parallel_for with more than one thread), then best of 5 at 1 thread, timing each
call in CPU time (time.thread_time, so other processes' load does not count). The serial share
is (1-thread CPU time of the calls that did not split + time outside kernels: the VM, compiled
TIR chains, concat copies) / the 1-thread total; the Amdahl bound 1 / (s + (1 - s) / 2) is the
best 2-thread speed-up those splits allow. Wall-clock scaling is benchmarks/backend.py --zoo
--threads 1 2, which needs a quiet machine.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (
    ZOO,
    as_logits,
    input_shape,
    light_model,
    ms,
    msc_session,
    print_table,
    with_random_weights,
)
from msc.backend.runtime import threads

_STATE = {"split": False, "depth": 0, "log": []}


def _instrument() -> None:
    """Wrap every Kernel class's __call__ (outermost calls only) and the two split paths."""
    from msc.backend.dispatch.resolve import load_facts
    from msc.backend.kernels.base import Kernel

    load_facts()
    launch = threads.NativeTasks.launch

    def native_launch(self, first, bases, count=None):
        if self.n > 1 and (threads.task_threads() if count is None else count) > 1:
            _STATE["split"] = True
        return launch(self, first, bases, count)

    threads.NativeTasks.launch = native_launch
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("msc.backend.kernels") and \
                getattr(module, "parallel_for", None) is threads.parallel_for:
            module.parallel_for = _flagged(threads.parallel_for)
    for cls in _subclasses(Kernel):
        if "__call__" in cls.__dict__:
            cls.__call__ = _timed(cls.__dict__["__call__"], cls.__name__)


def _flagged(parallel_for):
    def flagged(*args, **kwargs):
        _STATE["split"] = True
        return parallel_for(*args, **kwargs)
    return flagged


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _timed(call, name: str):
    def timed(self, *args):
        if _STATE["depth"]:
            return call(self, *args)
        _STATE["depth"], _STATE["split"] = 1, False
        start = time.thread_time()
        try:
            return call(self, *args)
        finally:
            shape = getattr(args[0], "shape", "") if args else ""
            _STATE["log"].append((f"{name} {shape}", time.thread_time() - start,
                                  _STATE["split"]))
            _STATE["depth"] = 0
    return timed


def serial_share(name: str) -> dict:
    shipped = light_model(name)
    x = np.random.default_rng(1).random(input_shape(shipped), dtype=np.float32)
    return share_of(msc_session(with_random_weights(as_logits(shipped)))[0], x)


def share_of(run, x) -> dict:
    """The serial share of ``run(x)`` (an msc model call; :func:`_instrument` done)."""
    with threads.num_threads(2):
        run(x)
        _STATE["log"].clear()
        run(x)
        split = [flag for _, _, flag in _STATE["log"]]
    best = None
    with threads.num_threads(1):
        run(x)
        for _ in range(5):
            _STATE["log"].clear()
            start = time.process_time()
            run(x)
            total = time.process_time() - start
            if best is None or total < best[0]:
                best = (total, list(_STATE["log"]))
    total, log = best
    serial = collections.Counter()
    for (call, seconds, _), did_split in zip(log, split):
        if not did_split:
            serial[call] += seconds
    outside = total - sum(seconds for _, seconds, _ in log)
    share = (sum(serial.values()) + outside) / total
    return {"total": total, "serial": serial, "outside": outside, "share": share,
            "bound": 1 / (share + (1 - share) / 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=[m for m in ZOO if m != "vgg19"],
                        help="light zoo models (vgg19 takes minutes)")
    parser.add_argument("--top", type=int, default=3, help="largest serial calls to list")
    args = parser.parse_args()
    _instrument()
    print_table(COLUMNS, (cells(name, serial_share(name), args.top) for name in args.models),
                flush=True)


COLUMNS = ["model", "1T CPU ms", "serial kernels ms", "outside kernels ms", "serial share",
           "Amdahl bound at 2T", "largest serial calls"]


def cells(name: str, r: dict, top: int) -> list[str]:
    """One model's row of COLUMNS from a :func:`share_of` result."""
    calls = ", ".join(f"{call} {s * 1e3:.2f}" for call, s in r["serial"].most_common(top))
    return [name, ms(r["total"]), ms(sum(r["serial"].values())), ms(r["outside"]),
            f"{r['share']:.0%}", f"{r['bound']:.2f}x", calls]

if __name__ == "__main__":
    main()
