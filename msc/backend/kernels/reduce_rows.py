"""Native "kernel" fact for ``mean`` over trailing axes (a CNN's global average pool).

The legalized TIR mean adds one element at a time, one long dependency chain: SqueezeNet's
mean over 1000 planes of 13x13 took ~0.17 ms where onnxruntime's GlobalAveragePool takes
~0.04. Here each row is summed in 16-lane partial sums (rowmath.row_reduce: a fixed order,
so the result does not depend on threads), then scaled by 1 / (row length). Rows shorter than
a vector (the pool after MobileNetV2's last 1x1 conv on a 1x1 plane: 20480 rows of one float
at batch 16 took 126 us, onnxruntime 28) go a vector of rows at a time (6 us)::

    attach("mean", "kernel", MeanFact())    # x[..., rows of n] -> out[...]
"""

from __future__ import annotations

import ctypes
import math
from functools import cache

import numpy as np
from llvmlite import ir

from ...relax.op.registry import attach
from ..llvm.jit import generated_entry, vector_lanes
from ..llvm.loops import F32, F32_PTR, I64, entry_alloca, for_range
from ..runtime.task_wrap import Buffer, ChainEntry
from .base import Kernel, KernelFact, Site, f32_address
from .rowmath import Vec, row_reduce, splat_f32

__all__ = ["MeanFact", "MeanKernel"]


def _symbol(lanes: int) -> str:
    return f"msc_row_mean_f32_l{lanes}"


def _build_module(lanes: int) -> ir.Module:
    """void (x, out, rows, n, scale): out[i] = sum(x[i*n : i*n + n]) * scale."""
    module = ir.Module(name=_symbol(lanes))
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [F32_PTR, F32_PTR, I64, I64, F32]),
                     name=_symbol(lanes))
    x, out, rows, n, scale = fn.args
    for arg in (x, out):
        arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    vec = Vec(module, lanes)
    with b.if_else(b.icmp_signed("<", n, I64(lanes))) as (short, long):
        with short:
            _short_rows(b, vec, (x, out, rows, n, scale))
        with long, for_range(b, rows, name="row") as i:
            total = row_reduce(b, vec, b.gep(x, [b.mul(i, n)]), n, "add")
            b.store(b.fmul(total, scale), b.gep(out, [i]))
    b.ret_void()
    return module


def _short_rows(b: ir.IRBuilder, vec: Vec, args) -> None:
    """Rows shorter than a vector (a global pool over 1x1 or 2x2 planes): ``lanes`` rows at
    once, lane r summing its row's floats one after another (strided gathers), so no lane of
    a load is wasted and no row pays a horizontal sum."""
    x, out, rows, n, scale = args
    with for_range(b, rows, step=vec.lanes, name="rows") as i:
        mask = vec.tail_mask(b, i, rows)
        acc = entry_alloca(b, vec.ty, "acc_rows")
        b.store(vec.splat(0.0), acc)
        with for_range(b, n, name="col") as j:
            value = vec.gather(b, b.gep(x, [b.add(b.mul(i, n), j)]), n, mask, 0.0)
            b.store(b.fadd(b.load(acc), value), acc)
        vec.store(b, b.fmul(b.load(acc), splat_f32(b, vec, scale)), b.gep(out, [i]), mask)


_SOURCES = (__name__, "msc.backend.kernels.rowmath", "msc.backend.llvm.loops")


@cache
def _native(lanes: int):
    return generated_entry(lambda: _build_module(lanes), _symbol(lanes), _SOURCES, (lanes,),
                           ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                           ctypes.c_float)


class MeanKernel(Kernel):
    """``kernel(x, out)``: x of ``shape`` (C-contiguous float32) averaged over rows of ``n``
    floats, out holding one value a row (any shape of that size)."""

    def __init__(self, shape: tuple, n: int, out_shape: tuple, op: str = "mean"):
        self.shape, self.n, self.out_shape, self.op = tuple(shape), n, tuple(out_shape), op
        self.rows = math.prod(shape) // n if n else 0
        self.scale = ctypes.c_float(1.0 / n) if n else ctypes.c_float(float("nan"))
        self.run = _native(vector_lanes())
        self._chain = None  # task_wrap.ChainEntry, made on the first native_signature

    def __call__(self, x, out):
        px = f32_address(x, self.shape, self.op, "data")
        po = f32_address(out, self.out_shape, self.op, "out")
        if self.n == 0:  # a mean over nothing is NaN, as numpy's
            out[...] = np.nan
        elif self.rows:
            self.run(px, po, self.rows, self.n, self.scale)
        return out

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims) for the VM's native chains (runtime/native_run.KernelStep): these
        fixed float32 buffers (a float argument: task_wrap.ChainEntry's row); one thread,
        as ``__call__``."""
        want = [(self.shape, np.dtype(np.float32)), (self.out_shape, np.dtype(np.float32))]
        if [(tuple(s), np.dtype(d)) for s, d in buffers] != want or not (self.n and self.rows):
            return None
        if self._chain is None:
            self._chain = ChainEntry(self.run, (Buffer(0), Buffer(1), self.rows, self.n,
                                                self.scale.value))
        return self._chain.signature


def _trailing_row(site: Site) -> int | None:
    """Length of the averaged row when the axes are the trailing ones (static shape)."""
    x = site.tensor(0)
    if x is None or x.values is None or not all(d.is_const for d in x.values):
        return None
    shape = tuple(int(d.value) for d in x.values)
    axis = site.attr("axis")
    if not shape or axis is None:
        return None
    axes = sorted({int(a) % len(shape) for a in (axis if isinstance(axis, (list, tuple))
                                                 else (axis,))})
    if not axes or axes != list(range(len(shape) - len(axes), len(shape))):
        return None
    return math.prod(shape[len(shape) - len(axes):])


class MeanFact(KernelFact):
    """float32 mean over trailing axes of a static shape (keepdims or not)."""

    def match(self, site: Site) -> bool:
        x, out = site.tensor(0), site.out
        return (_trailing_row(site) is not None and x.dtype == "float32"
                and getattr(out, "dtype", "") == "float32" and out.values is not None
                and all(d.is_const for d in out.values))

    def make(self, site: Site) -> Kernel:
        shape = tuple(int(d.value) for d in site.tensor(0).values)
        out_shape = tuple(int(d.value) for d in site.out.values)
        return MeanKernel(shape, _trailing_row(site), out_shape)


attach("mean", "kernel", MeanFact())
