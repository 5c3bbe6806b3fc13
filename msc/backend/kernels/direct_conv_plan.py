"""A direct conv's plan for one input shape (direct_conv.py): its driver arguments, how it
splits across threads, and the checks its chain and Python entries share with the pixel-tile
conv (pixel_conv.py); and the conv's one-thread time at this host's measured rate
(runtime/split_cost.py), which decides whether a chain splits it."""

from __future__ import annotations

import time

import numpy as np

from ...errors import ShapeError
from ..runtime.chain_split import PARTS_PER_THREAD, Launches
from ..runtime.split_cost import unit_seconds
from ..runtime.threads import NativeTasks, num_threads, split_range
from .dense import F32 as F32_DTYPE
from .dense import as_f32

__all__ = ["COMPACT", "CONV", "PREP", "SPLITS_PER_THREAD", "ConvPlan", "chain_plan",
           "checked_plan", "conv_seconds"]

PREP, CONV, COMPACT = 1, 2, 4  # the stages of one image a driver call runs
_PARALLEL_PREP = 1 << 16  # input floats from which the pad / phase split pass is split too
SPLITS_PER_THREAD = 2  # parts per thread, so a thread slowed by other load takes fewer
_BAND_POSITIONS = 256  # fewest output positions of a row band (a tile covers 48 with AVX-512)
_INPUT_HEAVY = 8  # input floats per weight from which a small plane splits in bands


class ConvPlan:
    """One input shape's driver arguments (the arrays stay alive with the plan) and its splits
    across threads. ``shape_facts``: (output units, input channels, whether PREP pads or
    splits the input, (weight floats, input floats per image), whether units are groups)."""

    def __init__(self, out_shape, args: np.ndarray, offsets: np.ndarray, scratch_sizes,
                 macs: int, shape_facts: tuple):
        self.out_shape, self.args, self.offsets = out_shape, args, offsets
        self.args_ptr, self.offsets_ptr = args.ctypes.data, offsets.ctypes.data
        self.scratch, self.macs = scratch_sizes, macs
        self.units, self.channels, self.prep, self.traffic, self.grouped = shape_facts
        self._parts, self._splits = {}, {}
        self.whole = [self._part(i, 0, out_shape[2], PREP | CONV | COMPACT, 0, self.units, 0,
                                 self.channels) for i in range(out_shape[0])]

    def _part(self, *values) -> int:  # one array per part: task lists hold its address
        arr = self._parts.setdefault(values, np.array(values, np.int64))
        return arr.ctypes.data

    def split(self, threads: int, address: int) -> list:
        """Task lists (driver ``address``, part) to run in order: per image, its prep (None
        when the input is read as is) and its conv parts, for ``threads`` threads."""
        if threads not in self._splits:
            self._splits[threads] = []
            for parts in zip(*self._parts_of(threads)):
                for stage in parts:
                    tasks = NativeTasks(len(stage)) if stage else None
                    if tasks:
                        tasks.records[:, 0], tasks.records[:, 8] = address, stage
                    self._splits[threads].append(tasks)
        return self._splits[threads]

    def split_form(self, address: int, bases: tuple, scratch: int, seconds: float):
        """The split form of a one-image plan for a chain's parallel step (runtime/
        chain_split.py): ``form(parts)`` -> the task lists :meth:`split` gives for the
        threads of those parts (the pad pass, then the conv parts), as ``__call__`` launches
        them, with ``bases`` (the step's Buffer / At / int of each pointer ``__call__``
        passes), ``scratch`` bytes of step scratch and ``seconds`` on one thread; None for a batch, whose images are the parts (the kernel's native_parts).
        A batch-1 conv was a chain of its own, split by a Python call of the kernel."""
        if self.out_shape[0] != 1:
            return None

        def form(parts: int) -> Launches:
            stages = self.split(max(2, parts // PARTS_PER_THREAD), address)
            return Launches(tuple((tasks, bases) for tasks in stages if tasks is not None),
                            scratch, seconds)
        return form

    def _parts_of(self, threads: int) -> tuple:
        n, _, oh, _ = self.out_shape
        count = SPLITS_PER_THREAD * threads
        weights, inputs = self.traffic
        # Output units (groups when each thread gets one: a group reads only its own input)
        # when there are enough and the weights are the larger read (each thread then reads its
        # share), or the plane has too few rows for even bands or for whole register tiles.
        few = oh < 2 * count or oh * self.out_shape[3] < _BAND_POSITIONS * count
        # Where the input outweighs the weights many times over (squeezenet's 1x1 squeeze
        # convs: 256 -> 32 channels at 27x27), one band a thread reads half of it, where
        # output units would each read all of it, half from the other core's cache.
        bands = threads if few and weights * _INPUT_HEAVY <= inputs and not self.grouped \
            and oh >= 2 * threads and oh * self.out_shape[3] >= _BAND_POSITIONS * threads \
            else 0
        if bands:
            shapes = [(lo, hi, 0, self.units) for lo, hi in split_range(oh, bands)]
        elif (self.grouped and self.units >= threads) or (
                self.units >= count and (weights >= inputs or few)):
            shapes = [(0, oh, lo, hi) for lo, hi in split_range(self.units, count)]
        else:
            shapes = [(lo, hi, 0, self.units) for lo, hi in split_range(oh, count)]
        # The pad / split pass is memory-bound: it splits only when it has enough to copy.
        prep_ranges = (split_range(self.channels, threads) if inputs >= _PARALLEL_PREP
                       else [(0, self.channels)]) if self.prep else []
        return ([[self._part(i, 0, 0, PREP, 0, 0, c0, c1) for c0, c1 in prep_ranges]
                 for i in range(n)],
                [[self._part(i, r0, r1, CONV | COMPACT, u0, u1, 0, 0)
                  for r0, r1, u0, u1 in shapes] for i in range(n)])


def conv_seconds(macs: float, kind) -> float:
    """One-thread seconds of a conv of ``macs`` multiply-adds at this host's measured rate
    (runtime/split_cost.py; measured once per host on a conv of class ``kind``, the direct
    conv, see :func:`_probe`)."""
    return unit_seconds("conv_mac", macs, lambda: _probe(kind))


def _probe(kind) -> tuple:
    """(seconds, multiply-adds) of a 32 -> 32 3x3 conv on one 16x16 image, the fastest of
    a few calls on one thread: the corpus's typical conv."""
    rng = np.random.default_rng(0)
    attrs = {"strides": (1, 1), "padding": (1, 1, 1, 1), "dilation": (1, 1)}
    conv = kind("nn.conv2d", rng.standard_normal((32, 32, 3, 3), np.float32), None, False, 1,
                attrs)
    x = rng.standard_normal((1, 32, 16, 16), np.float32)
    out = np.empty_like(x)
    best = float("inf")
    with num_threads(1):
        for _ in range(7):
            start = time.perf_counter()
            conv(x, out)
            best = min(best, time.perf_counter() - start)
    return best, 32 * 32 * 9 * 16 * 16


def chain_plan(kernel, buffers: list) -> tuple | None:
    """(input shape, plan) of a direct or pixel-tile conv on fixed buffers (inputs, then the
    output; every one float32), when they are the shapes its ``__call__`` takes and the
    output is not empty; else None (the checked Python entry then runs, and reports)."""
    if len(buffers) != len(kernel.inputs) + 1 or any(np.dtype(d) != F32_DTYPE
                                                      for _, d in buffers):
        return None
    shape = tuple(buffers[0][0])
    try:
        plan = kernel._plans.get(shape) or kernel._plan(shape)
    except ShapeError:
        return None
    if any(tuple(s) != plan.out_shape for s, _ in buffers[1:]) or not np.prod(plan.out_shape):
        return None
    return shape, plan


def checked_plan(kernel, x, out) -> tuple:
    """(x as a C-contiguous float32 array, the kernel's plan for its shape) once ``out`` is
    checked to be the plan's writable float32 output buffer (direct and pixel-tile convs)."""
    if type(x) is not np.ndarray or x.dtype != F32_DTYPE or not x.flags.c_contiguous:
        x = as_f32(x, "data", kernel.op)
    plan = kernel._plans.get(x.shape)
    if plan is None:
        plan = kernel._plan(x.shape)
    if (type(out) is not np.ndarray or out.shape != plan.out_shape
            or out.dtype != F32_DTYPE or not out.flags.c_contiguous
            or not out.flags.writeable):
        raise ShapeError(f"output buffer {getattr(out, 'shape', out)}, expected float32 "
                         f"{plan.out_shape}", op=kernel.op, param="out")
    return x, plan
