"""Build, check and time one candidate on the llvmlite backend.

Each stage runs in its own try: a candidate that fails to schedule, compile, run, or to
reproduce the untuned function's outputs raises :class:`CandidateError` naming the stage,
which the search logs and records as a failure, then goes on::

    task = Workload(func)                      # random inputs, reference outputs
    secs = measure(task, candidate_func)       # [seconds per call, ...] or CandidateError
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..backend.runtime.threads import get_num_threads
from ..errors import MSCError
from ..tir import expr as E
from ..tir.function import BufferStore, PrimFunc, walk_stmts

__all__ = ["CandidateError", "Workload", "measure"]


class CandidateError(Exception):
    """A candidate failed at ``stage`` (schedule, build, run, check)."""

    def __init__(self, stage: str, message: str):
        self.stage = stage
        super().__init__(f"{stage}: {message}")


@dataclass
class Workload:
    """A prim func with static shapes, its random inputs and the untuned outputs."""

    func: PrimFunc
    seed: int = 0
    args: list = field(default_factory=list)
    outputs: list = field(default_factory=list)   # param indices written by the function
    reference: list = field(default_factory=list)

    def __post_init__(self):
        rng = np.random.default_rng(self.seed)
        written = {s.buffer.name for s in walk_stmts(self.func.body)
                   if isinstance(s, BufferStore)}
        for k, buf in enumerate(self.func.buffers):
            shape = tuple(E.as_int(d) for d in buf.shape)
            if any(d is None for d in shape):
                raise MSCError(f"function {self.func.name!r} has a symbolic shape "
                               f"{buf.name}{list(map(str, buf.shape))}",
                               hint="tuning needs static shapes: bind the dims first")
            self.args.append(_random(rng, shape, buf.dtype))
            if buf.name in written:
                self.outputs.append(k)
        self.reference = [a.copy() for a in self._run(_compile(self.func, "reference"))]

    def _run(self, kernel) -> list:
        args = [a if k not in self.outputs else np.zeros_like(a)
                for k, a in enumerate(self.args)]
        kernel(*args)
        return [args[k] for k in self.outputs]

    def fresh_args(self) -> list:
        return [a if k not in self.outputs else np.zeros_like(a)
                for k, a in enumerate(self.args)]


def _random(rng, shape: tuple, dtype: str) -> np.ndarray:
    if dtype.startswith("float"):
        return rng.standard_normal(shape).astype(dtype)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    return rng.integers(0, 8, shape).astype(dtype)


def _compile(func: PrimFunc, stage: str):
    from ..backend.lowering.compile import compile_prim_func

    try:
        return compile_prim_func(func)
    except MSCError as exc:
        raise CandidateError(stage, str(exc)) from exc
    except Exception as exc:  # LLVM or llvmlite rejecting generated code: a bad candidate
        raise CandidateError(stage, f"{type(exc).__name__}: {exc}") from exc


def measure(task: Workload, func: PrimFunc, min_repeat_ms: float = 40.0,
            repeat: int = 3, cutoff: float | None = None) -> list:
    """Seconds per call of ``func`` (each repeat lasts ``min_repeat_ms`` at least), after
    checking its outputs against the untuned function's. A candidate whose checked run
    already took more than ``cutoff`` seconds is not timed further (its one run is the
    measurement): a slow candidate costs one call, not ``repeat`` long ones.

    On one thread the clock is the thread's CPU time, not the wall clock: a kernel on one
    thread computes all the time it runs, so the two agree on a quiet machine, and on a
    shared one the time the thread waited for a core (2-10x the kernel's own on a loaded
    2-core machine, varying from one candidate to the next) does not become the
    candidate's."""
    clock = time.thread_time if get_num_threads() == 1 else time.perf_counter
    kernel = _compile(func, "build")
    args = task.fresh_args()
    try:
        start = clock()
        kernel(*args)
        first = clock() - start
    except Exception as exc:
        raise CandidateError("run", f"{type(exc).__name__}: {exc}") from exc
    for k, ref in zip(task.outputs, task.reference):
        if not _close(args[k], ref):
            raise CandidateError("check", f"output {func.buffers[k].name!r} differs from the "
                                          "untuned function's")
    if cutoff is not None and first > cutoff:
        return [first]
    return [_timed(kernel, args, min_repeat_ms, clock) for _ in range(max(repeat, 1))]


def _close(got: np.ndarray, ref: np.ndarray) -> bool:
    if not np.issubdtype(ref.dtype, np.floating):
        return bool(np.array_equal(got, ref))
    scale = float(np.abs(ref).max()) if ref.size else 1.0
    return bool(np.allclose(got, ref, rtol=1e-3, atol=1e-4 * max(scale, 1.0)))


def _timed(kernel, args: list, min_repeat_ms: float, clock=time.perf_counter) -> float:
    number = 1
    while True:
        start = clock()
        for _ in range(number):
            kernel(*args)
        elapsed = clock() - start
        if elapsed * 1e3 >= min_repeat_ms or number >= 1 << 20:
            return elapsed / number
        number *= max(2, min(int(min_repeat_ms / max(elapsed * 1e3, 1e-3)) + 1, 64))
