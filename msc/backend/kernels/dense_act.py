"""A dense layer with an activation epilogue: ``act(x @ W + b)`` in column chunks, one call.

The packed GEMM (kernels/gemm.py) writes a chunk of output columns (CHUNK wide: whole B
panels), and the activation (an expression of kernels/activation.py, such as gelu) runs over
that chunk in place while it is still in L2, instead of a second pass over the whole output
after it has left the cache. A small native driver walks the chunks and calls both by address,
so a call costs one ctypes crossing; threads take ranges of chunks (each chunk is computed
the same way on any thread, so results are bitwise equal for any thread count)::

    kernel = DenseActKernel(GemmRunner(w_kn, bias, relu=False), ("nn.gelu", ("in", 0)), shape)
    kernel(x, out)                  # out[..., N] = gelu(x[..., K] @ W + bias)

The build's pattern pass (msc/backend/fuse/patterns/dense.py) makes it for ``matmul`` with a
constant weight, a constant bias ``add`` and a single-input activation.
"""

from __future__ import annotations

import ctypes
import math
from functools import cache

import numpy as np
from llvmlite import ir

from ...errors import ShapeError
from ..llvm.jit import generated_entry
from ..llvm.loops import F32_PTR, I32, I64, for_range, imin
from ..runtime.chain_split import PARTS_PER_THREAD, Launches
from ..runtime.task_wrap import Buffer, ChainEntry, wrapped_tasks
from ..runtime.threads import split_range, task_threads
from .activation import inplace_2d_address
from .base import Kernel
from .dense import F32, Address, GemmRunner, as_f32, gemm_seconds
from .gemm import MR, PARALLEL_FLOPS

__all__ = ["CHUNK", "DenseActKernel"]

CHUNK = 256  # output columns per step: 128 rows x 256 floats = 128 KiB of C stay in L2
_SYMBOL = "msc_dense_epilogue_f32"
_GEMM = ir.FunctionType(ir.VoidType(), [F32_PTR] * 4 + [I64] * 5 + [I32])
_ACT = ir.FunctionType(ir.VoidType(), [F32_PTR] + [I64] * 3)


def _build_module() -> ir.Module:
    """void (a, bp, bias, c, m, n, k, lda, ldc, j0, j1, chunk, gemm*, act*)."""
    module = ir.Module(name=_SYMBOL)
    i8p = ir.IntType(8).as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [F32_PTR] * 4 + [I64] * 8 + [
        i8p, i8p]), name=_SYMBOL)
    a, bp, bias, c, m, n, k, lda, ldc, j0, j1, chunk, gemm, act = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    gemm, act = b.bitcast(gemm, _GEMM.as_pointer()), b.bitcast(act, _ACT.as_pointer())
    with for_range(b, j1, start=j0, step=chunk, name="jc") as jc:
        width = imin(b, b.sub(n, jc), chunk)
        cj = b.gep(c, [jc])
        b.call(gemm, [a, b.gep(bp, [b.mul(jc, k)]), b.gep(bias, [jc]), cj, m, width, k, lda,
                      ldc, ir.Constant(I32, 0)])
        b.call(act, [cj, m, width, ldc])
    b.ret_void()
    return module


@cache
def _driver():
    return generated_entry(_build_module, _SYMBOL, (__name__, "msc.backend.llvm.loops"), (),
                           *(ctypes.c_void_p,) * 4, *(ctypes.c_int64,) * 8, ctypes.c_void_p,
                           ctypes.c_void_p)


def _splits(m: int, n: int, k: int) -> bool:
    """Whether an [m, k] @ [k, n] + activation is big enough to split into column blocks."""
    return 2.0 * m * n * k >= PARALLEL_FLOPS


class DenseActKernel(Kernel):
    """``kernel(x, out)``: ``act(x @ W + bias)`` for the packed weight of ``runner``."""

    inputs = (0,)

    def __init__(self, runner: GemmRunner, expr: tuple, op: str = "dense+act"):
        if runner.relu:
            raise ShapeError("the activation epilogue replaces relu", op=op,
                             hint="make the GemmRunner with relu=False")
        self.runner, self.expr, self.op = runner, expr, op
        self.run = _driver()
        self.gemm = ctypes.cast(runner.driver, ctypes.c_void_p).value
        self.act = inplace_2d_address(expr)
        self.x_addr, self.out_addr = Address(), Address()
        self.tasks: dict = {}  # (rows, parts) -> native task list
        self._chain: dict = {}  # rows -> task_wrap.ChainEntry (native chain steps)

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains (runtime/
        native_run.KernelStep): fixed float32 buffers; ``splits``: a GEMM big enough to split
        across threads (the chain runs it on one thread only). None where ``__call__``
        decides."""
        k, n = self.runner.k, self.runner.n
        if len(buffers) != 2 or not (k and n):
            return None
        (xs, xd), (os_, od) = buffers
        xs, os_ = tuple(xs), tuple(os_)
        m = math.prod(xs[:-1]) if xs else 0
        if (np.dtype(xd) != F32 or np.dtype(od) != F32 or not xs or xs[-1] != k or not m
                or not os_ or os_[-1] != n or math.prod(os_) != m * n):
            return None
        found = self._chain.get(m)
        if found is None:
            packed, bias = self.runner.ptrs
            found = self._chain[m] = ChainEntry(self.run, (
                Buffer(0), packed, bias, Buffer(1), m, n, k, k, n, 0, n, CHUNK, self.gemm,
                self.act))
        return (*found.signature, 0, _splits(m, n, k),
                lambda parts: self._split_form(m, max(2, parts // PARTS_PER_THREAD)))

    def _split_form(self, m: int, threads: int) -> Launches | None:
        """The column blocks of ``__call__`` at ``threads`` for a chain's parallel step, or
        row blocks of whole register tiles when the columns are one chunk."""
        k, n = self.runner.k, self.runner.n
        parts = min(-(-n // CHUNK), threads * 2)
        tasks = self._tasks(m, parts) if parts > 1 else self._row_tasks(m, threads * 2)
        if tasks is None:
            return None
        return Launches(((tasks, (Buffer(0), 0, 0, Buffer(1))),), 0,
                        gemm_seconds(2.0 * m * n * k))

    def _row_tasks(self, m: int, parts: int):
        """Row blocks (whole MR-row tiles, every column) as a task list, bases x, 0, 0, out;
        None when there is one tile. Each row's sums are the same in any block."""
        key = ("rows", m, parts)
        if key not in self.tasks:
            k, n = self.runner.k, self.runner.n
            packed, bias = self.runner.ptrs
            ranges = split_range(m, parts, MR)
            self.tasks[key] = None if len(ranges) < 2 else wrapped_tasks(self.run, [
                (lo * k * 4, packed, bias, lo * n * 4, hi - lo, n, k, k, n, 0, n, CHUNK,
                 self.gemm, self.act) for lo, hi in ranges])
        return self.tasks[key]

    def _tasks(self, m: int, parts: int):
        """Column blocks of ``m`` rows as a native task list (14 arguments: task_wrap), the
        bases x, 0, 0, out."""
        key = (m, parts)
        tasks = self.tasks.get(key)
        if tasks is None:
            if len(self.tasks) > 64:  # many row counts in one process: start over
                self.tasks.clear()
            k, n = self.runner.k, self.runner.n
            packed, bias = self.runner.ptrs
            chunks = -(-n // CHUNK)
            bounds = [chunks * i // parts * CHUNK for i in range(parts)] + [n]
            tasks = self.tasks[key] = wrapped_tasks(self.run, [
                (0, packed, bias, 0, m, n, k, k, n, bounds[i], bounds[i + 1], CHUNK, self.gemm,
                 self.act) for i in range(parts)])
        return tasks

    def __call__(self, x, out):
        if type(x) is not np.ndarray or x.dtype != F32 or not x.flags.c_contiguous:
            x = as_f32(x, "data", self.op)
        k, n = self.runner.k, self.runner.n
        if not x.shape or x.shape[-1] != k:
            raise ShapeError(f"expects [..., {k}], got {x.shape}", op=self.op, param="data")
        m = x.size // k if k else 0
        # the output may group the rows differently ([1, s, n] for [s, k] rows)
        if (out.size != m * n or not out.shape or out.shape[-1] != n or out.dtype != F32
                or not out.flags.c_contiguous):
            raise ShapeError(f"output buffer {out.shape} {out.dtype}, expected {m} rows of {n}",
                             op=self.op, param="out")
        if not m:
            return out
        packed, bias = self.runner.ptrs
        args = (self.x_addr(x), packed, bias, self.out_addr(out), m, n, k, k, n)
        chunks = -(-n // CHUNK)
        threads = task_threads() if _splits(m, n, k) else 1
        parts = min(chunks, threads * 2) if threads > 1 else 1
        if parts == 1:
            self.run(*args, 0, n, CHUNK, self.gemm, self.act)
            return out
        self._tasks(m, parts).launch(1, (args[0], 0, 0, args[3]), threads)
        return out

