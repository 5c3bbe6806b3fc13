"""Timing of repeated calls, as TVM's ``time_evaluator`` reports it (seconds per call)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["BenchmarkResult", "time_calls"]


@dataclass
class BenchmarkResult:
    """Seconds per call of each repeat, with TVM's summary fields."""

    results: list

    @property
    def mean(self) -> float:
        return statistics.fmean(self.results)

    @property
    def median(self) -> float:
        return statistics.median(self.results)

    @property
    def min(self) -> float:
        return min(self.results)

    @property
    def max(self) -> float:
        return max(self.results)

    @property
    def std(self) -> float:
        return statistics.pstdev(self.results) if len(self.results) > 1 else 0.0

    def __repr__(self) -> str:
        ms = [x * 1e3 for x in (self.mean, self.median, self.max, self.min, self.std)]
        return ("Execution time summary:\n mean (ms)   median (ms)    max (ms)     min (ms)     "
                "std (ms)  \n" + "".join(f"{v:^12.4f} " for v in ms))


def time_calls(call: Callable, number: int = 10, repeat: int = 1,
               min_repeat_ms: float = 0) -> list:
    """Seconds per call of each repeat: ``call()`` once to warm up, then ``number`` times per
    repeat, doubling ``number`` until a repeat lasts ``min_repeat_ms``."""
    call()
    results, n = [], max(int(number), 1)
    for _ in range(max(int(repeat), 1)):
        elapsed = _elapsed(call, n)
        while min_repeat_ms and elapsed * 1e3 < min_repeat_ms:
            n = max(n * 2, int(n * min_repeat_ms / max(elapsed * 1e3, 1e-3)))
            elapsed = _elapsed(call, n)
        results.append(elapsed / n)
    return results


def _elapsed(call: Callable, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        call()
    return time.perf_counter() - start
