"""Data movement on bytes between int8 kernels: slices of a split, and permutations.

``QSlice`` is one output of ``dequantize -> split -> quantize`` (GPT-2's fused q / k / v
projection), copied or mapped through a requantization table. :func:`transpose_fn` swaps
the two inner axes of ``[N, A, B]`` (1- or 4-byte elements): NCHW planes to pixel rows and
back around a small-plane 1x1 conv run as one GEMM for all images (int8/conv.py). ``QPermute`` is a
``permute_dims`` of a uint8 / int8 tensor (attention's head transposes, moved onto the bytes
by fuse/qdq/fold.py) that keeps the last axis whole in 4-byte words: the same permutation of the
tensor viewed as 32-bit words, on layout.py's native run copy (split across threads when
large; as a native chain step when small), not the byte-at-a-time TIR loop::

    kernel = QPermute((0, 2, 1, 3))          # [1, 128, 12, 64] -> [1, 12, 128, 64] bytes
    kernel(x, out)
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np
from llvmlite import ir

from ....errors import ShapeError
from ...llvm.jit import get_jit
from ...llvm.loops import I64, for_range
from ...runtime.task_wrap import At, ChainEntry
from ..base import Kernel
from ..layout import PermuteKernel
from .lut import byte_run_calls, strided_runs
from .tasks import ChainSteps

__all__ = ["QPermute", "QSlice", "transpose_fn", "word_permutable"]

_WORD = np.dtype(np.uint32)
_MAX_RUNS = 256  # copies of one slice chain step at most (else it runs from Python)


def _transpose_symbol(size: int) -> str:
    return f"msc_qtranspose_{size}"


def _build_transpose(size: int) -> ir.Module:
    """void (src, dst, n, a, b): dst[i, c, r] = src[i, r, c] for [n, a, b] elements of
    ``size`` bytes (small planes: a plain loop, the stores in order)."""
    module = ir.Module(name=_transpose_symbol(size))
    ty = ir.IntType(8 * size)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ty.as_pointer()] * 2 + [I64] * 3),
                     name=_transpose_symbol(size))
    src, dst, n, a, b_ = fn.args
    for ptr in (src, dst):
        ptr.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    plane = b.mul(a, b_)
    with for_range(b, n, name="i") as i, for_range(b, b_, name="c") as c, \
            for_range(b, a, name="r") as r:
        base = b.mul(i, plane)
        value = b.load(b.gep(src, [b.add(base, b.add(b.mul(r, b_), c))]))
        b.store(value, b.gep(dst, [b.add(base, b.add(b.mul(c, a), r))]))
    b.ret_void()
    return module


@cache
def transpose_fn(size: int):
    """``transpose(src, dst, n, a, b)``: ``[n, a, b] -> [n, b, a]`` of ``size``-byte
    elements (1 or 4), pointers as ints."""
    symbol = _transpose_symbol(size)
    library = get_jit().compile_generated(lambda: _build_transpose(size), [symbol],
                                          (__name__, "msc.backend.llvm.loops"))
    return library.cfunc(symbol, None, ctypes.c_void_p, ctypes.c_void_p, *[ctypes.c_int64] * 3)


def word_permutable(shape: tuple, axes: tuple) -> bool:
    """Whether a byte tensor of ``shape`` permuted by ``axes`` is a permutation of 32-bit
    words: the last axis stays last and holds a multiple of 4 bytes."""
    return bool(shape) and axes[-1] == len(shape) - 1 and shape[-1] % 4 == 0


def _words(shape: tuple) -> tuple:
    return (*shape[:-1], shape[-1] // 4)


class QPermute(Kernel):
    """``out = x.transpose(axes)`` for uint8 / int8 arrays, as 32-bit words."""

    inputs = (0,)

    def __init__(self, axes: tuple, dtype, op: str = "permute_dims"):
        self.axes, self.dtype, self.op = tuple(axes), np.dtype(dtype), op
        self.words = PermuteKernel(self.axes, _WORD)

    def __call__(self, x, out):
        if (type(x) is not np.ndarray or x.dtype != self.dtype or not x.flags.c_contiguous
                or not word_permutable(x.shape, self.axes)):
            raise ShapeError(f"expected a C-contiguous {self.dtype} array whose last axis "
                             f"holds a multiple of 4 bytes, got {getattr(x, 'shape', x)}",
                             op=self.op, param="data")
        if type(out) is not np.ndarray or out.dtype != self.dtype or not out.flags.c_contiguous:
            raise ShapeError(f"expected a C-contiguous {self.dtype} output", op=self.op,
                             param="out")
        self.words(x.view(_WORD), out.view(_WORD))
        return out

    def native_signature(self, buffers: list) -> tuple | None:
        """The word permutation's chain step (see layout.py) for these byte buffers."""
        if len(buffers) != 2 or any(np.dtype(d) != self.dtype for _, d in buffers):
            return None
        if not word_permutable(tuple(buffers[0][0]), self.axes) or not buffers[1][0]:
            return None
        return self.words.native_signature([(_words(tuple(s)), _WORD) for s, _ in buffers])


class QSlice(Kernel):
    """``out = x[..., start:stop, ...]`` along ``axis`` on bytes, through ``table`` (a
    256-entry requantization) when given: one output of a split between a dequantize and
    quantizes (GPT-2's fused q / k / v projection)."""

    inputs = (0,)

    def __init__(self, axis: int, start: int, stop: int, table: np.ndarray | None = None,
                 op: str = "int8.split"):
        self.axis, self.start, self.stop, self.op = axis, start, stop, op
        self.table = None if table is None else np.ascontiguousarray(table).reshape(-1)
        self._steps = ChainSteps()

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains: one copy (or
        table lookup) per run of bytes the slice takes (one per index before ``axis``, at
        most ``_MAX_RUNS``); never split."""
        if len(buffers) != 2:
            return None
        (shape, dtype), (out_shape, out_dtype) = ((tuple(s), np.dtype(d)) for s, d in buffers)
        axis = self.axis
        if (dtype.itemsize != 1 or not 0 <= axis < len(shape) or out_dtype.itemsize != 1
                or (self.table is None and out_dtype != dtype)
                or (self.table is not None and out_dtype != self.table.dtype)
                or not 0 <= self.start < self.stop <= shape[axis]
                or out_shape != shape[:axis] + (self.stop - self.start,) + shape[axis + 1:]):
            return None
        outer = int(np.prod(shape[:axis], dtype=np.int64))
        inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
        if not outer * inner:
            return None
        width, part = shape[axis] * inner, (self.stop - self.start) * inner
        if outer > _MAX_RUNS:  # one strided call (a decoder's rotary halves: 384 runs)
            table = 0 if self.table is None else self.table.ctypes.data
            calls = [(strided_runs(), [At(0, self.start * inner), table, At(1, 0), outer, part,
                                       width, part])]
        else:
            calls = byte_run_calls([(At(0, i * width + self.start * inner), At(1, i * part),
                                     part, self.table) for i in range(outer)])
        return self._steps.signature((outer, inner, shape[axis]), lambda: (
            ChainEntry.sequence(calls), 0, False))

    def __call__(self, x, out):
        index = (slice(None),) * self.axis + (slice(self.start, self.stop),)
        part = x[index]
        if type(out) is not np.ndarray or out.shape != part.shape:
            raise ShapeError(f"expected an output of shape {part.shape}, got "
                             f"{getattr(out, 'shape', type(out).__name__)}", op=self.op,
                             param="out")
        if self.table is None:
            np.copyto(out, part, casting="no")
        else:
            np.take(self.table, part.view(np.uint8), out=out)
        return out
