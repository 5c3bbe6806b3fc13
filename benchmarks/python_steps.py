"""Which kernel steps of a corpus model leave the native chains at 2 threads (issue #33).

    .venv/bin/python benchmarks/python_steps.py --models ghostnet,bert [--int8] [--batch 16]

A chain step that splits through its kernel object (no parallel entry, runtime/chain_split.py)
is a chain of its own at more than one thread: the plan's Python line calls the kernel, which
launches its task lists. This counts those calls per kernel class in one model call at two
threads (every ``Kernel.__call__`` entered then is one), with their one-thread CPU time
(``time.thread_time``: other processes' load does not count) and the model's one-thread CPU
time beside them; and the plan's parallel steps (split from inside a chain).
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

from benchmarks.common import msc_executable
from benchmarks.corpus_speed import batched, export
from msc.backend.runtime import threads
from tests.helpers.corpus import MODELS

_LOG: list = []
_DEPTH = [0]


def _instrument() -> None:
    """Time every Kernel class's outermost ``__call__`` (one entered from the plan)."""
    from msc.backend.dispatch.resolve import load_facts
    from msc.backend.kernels.base import Kernel

    load_facts()
    import msc.backend.fuse.qdq.fold  # the int8 kernel classes, for _instrument
    import msc.backend.fuse.qdq.lut  # noqa: F401

    for cls in _subclasses(Kernel):
        if "__call__" in cls.__dict__:
            cls.__call__ = _timed(cls.__dict__["__call__"], cls.__name__)


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _timed(call, name: str):
    def timed(self, *args):
        if _DEPTH[0]:
            return call(self, *args)
        _DEPTH[0] = 1
        start = time.thread_time()
        try:
            return call(self, *args)
        finally:
            _DEPTH[0] = 0
            _LOG.append((f"{name} {getattr(self, 'op', '')}", time.thread_time() - start))
    return timed


def model_call(name: str, batch: int, int8: bool, tmp: Path):
    """(run(), parallel steps of its plan) of corpus model ``name`` at ``batch``."""
    from msc import relax

    module, _, inputs = MODELS[name]()
    inputs = batched(inputs, batch)
    model = export(module, inputs, tmp / f"{name}.onnx")
    if int8:
        from tests.helpers.qdq_models import ort_quantize

        (tmp / "q").mkdir(exist_ok=True)
        model = ort_quantize(model, inputs[:1], tmp / "q", model.graph.input[0].name)
    vm = relax.VirtualMachine(msc_executable(model), relax.cpu())
    fn = vm["main"]
    return lambda: fn(*inputs), fn


def step_kinds(fn) -> collections.Counter:
    """Per kernel class of the plan's chain steps: how each runs at two threads."""
    from msc.backend.runtime.native_run import KernelStep

    found = collections.Counter()
    for entry in fn._entries.values():
        for instr in entry.plan.instructions:
            step = getattr(instr[4], "step", None)
            if isinstance(step, KernelStep):
                how = ("native split" if step.parallel is not None else
                       "Python split" if step.splits else "one thread")
                found[f"{type(step.kernel).__name__} {how}"] += 1
    return found


def census(run) -> tuple:
    """(calls at 2 threads per kernel, their 1-thread CPU seconds, 1-thread model CPU s)."""
    with threads.num_threads(2):
        run()
        _LOG.clear()
        run()
        calls = collections.Counter(name for name, _ in _LOG)
    with threads.num_threads(1):
        run()
        best = None
        for _ in range(3):
            _LOG.clear()
            start = time.thread_time()
            run()
            total = time.thread_time() - start
            if best is None or total < best[0]:
                best = (total, list(_LOG))
    seconds = collections.Counter()
    for name, s in best[1]:
        if name in calls:
            seconds[name] += s
    return calls, seconds, best[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", required=True)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--int8", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    _instrument()
    with tempfile.TemporaryDirectory(prefix="msc_python_steps_") as tmp:
        for name in args.models.split(","):
            for batch in args.batch:
                run, fn = model_call(name, batch, args.int8, Path(tmp))
                calls, seconds, total = census(run)
                share = sum(seconds.values()) / total
                print(f"{name} b{batch}: 1T CPU {total * 1e3:.2f} ms, "
                      f"{sum(calls.values())} Python steps at 2T ({share:.0%} of 1T time)")
                for kernel, count in calls.most_common():
                    print(f"    {count:4d} x {kernel}: {seconds[kernel] * 1e3:.2f} ms at 1T")
                kinds = step_kinds(fn)
                print("  chain steps: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
                sys.stdout.flush()


if __name__ == "__main__":
    main()
