"""The window kernels' work (pools, depthwise convs: pool.py's ``_Window`` entries) as
independent parts for a chain's parallel step (runtime/chain_split.py).

A part is a run of plane ranges ``(x, out, w, bias byte offsets, planes, C)``, each one call
of the window entry on its own padded-plane scratch, exactly as the kernel's own thread split
makes them; the one-thread time comes from this host's measured seconds per window read
(runtime/split_cost.py), measured once on the first window call that asks.
"""

from __future__ import annotations

import time

import numpy as np

from ..runtime.chain_split import Parts
from ..runtime.split_cost import unit_seconds
from ..runtime.task_wrap import At
from ..runtime.threads import num_threads
from .layout import scratch_offsets

__all__ = ["UNITS", "window_parts", "window_seconds"]

UNITS = 16  # plane ranges a window step is cut into at most (parts group them)


def window_parts(window, ranges: list, rest: tuple, aux: int, w: int, bias: int,
                 seconds: float | None) -> Parts:
    """Parts of ``window`` over ``ranges``; ``rest``: the window ints after ``planes, C``;
    ``w`` / ``bias``: addresses the ranges' offsets add to (0: none); ``seconds``: the whole
    step's one-thread time."""
    rows = [(xo, oo, wo, bo, window.lookup((planes, channels, *rest)))
            for xo, oo, wo, bo, planes, channels in ranges]
    nbytes = max((scratch_offsets(found[1])[1] if found[1] else 0) for *_, found in rows)

    def calls(lo: int, hi: int, scratch: int, at: int) -> list:
        return [(window.raw, (At(0, xo), At(1, oo), aux, w + wo if w else 0,
                              bias + bo if bias else 0,
                              At(scratch, at) if found[1] else 0, found[2]))
                for xo, oo, wo, bo, found in rows[lo:hi]]

    return Parts(len(rows), calls, nbytes, None if seconds is None else seconds / len(rows))


def window_seconds(reads: float, window, ints: tuple, shapes: tuple, aux: int = 0,
                   w: int = 0, bias: int = 0) -> float:
    """One-thread seconds of ``reads`` window reads at this host's rate, measured (once per
    host) on this call: ``window`` with ``ints`` (and the ``aux`` / ``w`` / ``bias``
    addresses it reads) on float32 arrays of ``shapes`` (input, output), the fastest of a
    few calls."""
    def probe() -> tuple:
        x, out = (np.zeros(shape, np.float32) for shape in shapes)
        best = float("inf")
        with num_threads(1):
            for _ in range(7):
                start = time.perf_counter()
                window(x.ctypes.data, out.ctypes.data, aux, w, bias, *ints)
                best = min(best, time.perf_counter() - start)
        return best, reads

    return unit_seconds("window_read", reads, probe)
