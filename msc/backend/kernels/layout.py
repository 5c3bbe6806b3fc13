"""Native data-movement kernels for the GEMM-based ops: transpose, NHWC im2col, scratch space.

Convolutions run as GEMMs with pixels on the M side and the packed weight on the B side
(shared/notes/llvmlite-kernels.md: that orientation reaches the GEMM's full speed). These
kernels move activations into that form::

    transpose(src, dst, batch, rows, cols)      # dst[b, c, r] = src[b, r, c]   (NCHW <-> NHWC)
    im2col(x_hwc, a, geometry)                  # a[oh*OW + ow, (kh*KW + kw)*Cg + c]

``scratch(nbytes...)`` hands out 64-byte aligned float32 work arrays from one growing,
thread-local arena: kernels run one at a time per thread, so every kernel can share it.
Callers validate shapes; these functions trust their (checked) arguments.

The "kernel" fact of ``permute_dims`` (32-bit elements) also lives here: the output's axes are
collapsed (size-1 axes dropped, neighbours that stay neighbours merged) and a permutation that
keeps the last axis becomes a copy of contiguous runs into the planned buffer (ShuffleNet's
channel shuffle: 68 x 4 runs of 196 floats), its kernel checking its arrays. Others go to
the TIR / numpy path.
"""

from __future__ import annotations

import ctypes
import math
import threading
import time
from contextlib import contextmanager
from functools import cache

import numpy as np
from llvmlite import ir

from ...errors import ShapeError
from ...relax.op.registry import attach
from ..llvm.jit import get_jit
from ..llvm.loops import F32, F32_PTR, I64, const64, for_range, imin
from ..runtime.chain_split import PARTS_PER_THREAD, Launches
from ..runtime.split_cost import unit_seconds
from ..runtime.task_wrap import Buffer
from ..runtime.threads import NativeTasks, native_address, num_threads, split_range, task_threads
from .base import Kernel, KernelFact, Site
from .dense import Address

_PARALLEL_ELEMENTS = 1 << 15  # a copy splits across threads from 32K elements (~15-30 us)

__all__ = ["PermuteFact", "VecOps", "collapse_permutation", "im2col", "scratch", "transpose",
           "valid_range"]

_TILE = 16  # transpose tile: a 16x16 float block (1 KiB) stays in L1 for both sides
_SYMBOLS = ("msc_transpose_f32_t16", "msc_im2col_nhwc_f32", "msc_gather_runs_x32",
            "msc_transpose_cols_f32_t16")
I8_PTR = ir.IntType(8).as_pointer()
I1 = ir.IntType(1)


def _declare(module, name, ret, args):
    return ir.Function(module, ir.FunctionType(ret, args), name=name)


def _gep(builder, ptr, *offsets):
    for off in offsets:
        ptr = builder.gep(ptr, [off], inbounds=True)
    return ptr


def _build_transpose(module: ir.Module) -> None:
    """void (src, dst, batch, rows, cols): tiled, reads a tile row-wise, writes it col-wise."""
    fn = _declare(module, _SYMBOLS[0], ir.VoidType(), [F32_PTR, F32_PTR, I64, I64, I64])
    src, dst, batch, rows, cols = fn.args
    src.add_attribute("noalias")
    dst.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    plane = b.mul(rows, cols)
    with for_range(b, batch, name="b") as n:
        s = _gep(b, src, b.mul(n, plane))
        d = _gep(b, dst, b.mul(n, plane))
        _tiles(b, s, d, rows, cols, ir.Constant(I64, 0), cols)
    b.ret_void()


def _tiles(b: ir.IRBuilder, src, dst, rows, cols, first, last) -> None:
    """``dst[c, r] = src[r, c]`` of one [rows, cols] plane for ``first <= c < last``, in
    _TILE x _TILE tiles."""
    with for_range(b, rows, step=_TILE, name="r0") as r0:
        rmax = imin(b, b.sub(rows, r0), _TILE)
        with for_range(b, last, start=first, step=_TILE, name="c0") as c0:
            cmax = imin(b, b.sub(last, c0), _TILE)
            with for_range(b, cmax, name="c") as c:
                col = b.add(c0, c)
                drow = _gep(b, dst, b.add(b.mul(col, rows), r0))
                with for_range(b, rmax, name="r") as r:
                    v = b.load(_gep(b, src, b.add(b.mul(b.add(r0, r), cols), col)))
                    b.store(v, _gep(b, drow, r))


def _build_transpose_cols(module: ir.Module) -> None:
    """void (src, dst, rows, cols, c0, c1): ``dst[c, r] = src[r, c]`` for the columns
    ``c0 <= c < c1`` of one [rows, cols] plane only, so that tasks on column ranges split a
    transpose across threads (a batch-1 pixel-tile conv's [P][O] tiles to NCHW)."""
    fn = _declare(module, _SYMBOLS[3], ir.VoidType(), [F32_PTR, F32_PTR] + [I64] * 4)
    src, dst, rows, cols, first, last = fn.args
    src.add_attribute("noalias")
    dst.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    _tiles(b, src, dst, rows, cols, first, last)
    b.ret_void()


_GEOMETRY = ("H", "W", "C", "c_off", "cg", "KH", "KW", "sh", "sw", "ph", "pw", "dh", "dw",
             "OH", "OW")


def _build_im2col(module: ir.Module) -> None:
    """void (x, a, *geometry): rows of ``a`` are the (kh, kw, c) patches of NHWC ``x``."""
    memcpy = _declare(module, "llvm.memcpy.p0.p0.i64", ir.VoidType(), [I8_PTR, I8_PTR, I64, I1])
    memset = _declare(module, "llvm.memset.p0.i64", ir.VoidType(),
                      [I8_PTR, ir.IntType(8), I64, I1])
    fn = _declare(module, _SYMBOLS[1], ir.VoidType(), [F32_PTR, F32_PTR] + [I64] * len(_GEOMETRY))
    x, a = fn.args[:2]
    x.add_attribute("noalias")
    a.add_attribute("noalias")
    g = dict(zip(_GEOMETRY, fn.args[2:]))
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    k_row = b.mul(b.mul(g["KH"], g["KW"]), g["cg"])
    nbytes = b.mul(g["cg"], const64(4))
    with for_range(b, g["OH"], name="oh") as oh, for_range(b, g["OW"], name="ow") as ow:
        row = _gep(b, a, b.mul(b.add(b.mul(oh, g["OW"]), ow), k_row))
        with for_range(b, g["KH"], name="kh") as kh:
            ih = b.add(b.sub(b.mul(oh, g["sh"]), g["ph"]), b.mul(kh, g["dh"]))
            in_h = b.icmp_unsigned("<", ih, g["H"])
            with for_range(b, g["KW"], name="kw") as kw:
                iw = b.add(b.sub(b.mul(ow, g["sw"]), g["pw"]), b.mul(kw, g["dw"]))
                inside = b.and_(in_h, b.icmp_unsigned("<", iw, g["W"]))
                dst = _gep(b, row, b.mul(b.add(b.mul(kh, g["KW"]), kw), g["cg"]))
                dst8 = b.bitcast(dst, I8_PTR)
                with b.if_else(inside) as (copy, zero):
                    with copy:
                        pix = b.add(b.mul(b.add(b.mul(ih, g["W"]), iw), g["C"]), g["c_off"])
                        src8 = b.bitcast(_gep(b, x, pix), I8_PTR)
                        b.call(memcpy, [dst8, src8, nbytes, I1(0)])
                    with zero:
                        b.call(memset, [dst8, ir.IntType(8)(0), nbytes, I1(0)])
    b.ret_void()


def valid_range(b, off, stride, size, count):
    """[lo, hi): the ow in [0, count) with 0 <= ow * stride + off < size."""
    neg = b.sub(const64(0), off)
    lo = b.select(b.icmp_signed("<", off, const64(0)),
                  b.sdiv(b.add(neg, b.sub(stride, const64(1))), stride), const64(0))
    lo = imin(b, lo, count)
    room = b.sub(b.sub(size, const64(1)), off)  # largest ow * stride allowed
    hi = b.select(b.icmp_signed("<", room, const64(0)), const64(0),
                  b.add(b.sdiv(room, stride), const64(1)))
    hi = imin(b, hi, count)
    hi = b.select(b.icmp_signed("<", hi, lo), lo, hi)
    return lo, hi


class VecOps:
    """16-lane masked vector loads and stores, so short runs need no scalar remainder loop::

        vec = VecOps(builder)
        with vec.loop(count) as (t, mask):       # t = 0, 16, 32, ...; mask: lanes < count - t
            vec.store(vec.load(src_at_t, mask), dst_at_t, mask)
    """

    LANES = 16

    def __init__(self, b: ir.IRBuilder):
        module = b.module
        self.b = b
        self.ty = ir.VectorType(F32, self.LANES)
        self.mask_ty = ir.VectorType(I1, self.LANES)
        ptr = self.ty.as_pointer()
        self._load = _intrinsic(module, "llvm.masked.load.v16f32.p0", self.ty,
                                [ptr, ir.IntType(32), self.mask_ty, self.ty])
        self._store = _intrinsic(module, "llvm.masked.store.v16f32.p0", ir.VoidType(),
                                 [self.ty, ptr, ir.IntType(32), self.mask_ty])
        self.lane_ids = ir.Constant(ir.VectorType(I64, self.LANES), list(range(self.LANES)))
        self.zero = ir.Constant(self.ty, None)

    def splat(self, value: ir.Value) -> ir.Value:
        b = self.b
        ty = ir.VectorType(value.type, self.LANES)
        first = b.insert_element(ir.Constant(ty, ir.Undefined), value, ir.IntType(32)(0))
        return b.shuffle_vector(first, ir.Constant(ty, ir.Undefined),
                                ir.Constant(ir.VectorType(ir.IntType(32), self.LANES), None))

    def mask(self, left: ir.Value, offset: int = 0) -> ir.Value:
        """Lanes i with i + offset < left (32-bit lane compares: one instruction)."""
        return self.between(const64(-offset), b_sub(self.b, left, offset))

    def between(self, lo: ir.Value, hi: ir.Value) -> ir.Value:
        """Lanes i with lo <= i < hi, for any i64 bounds (clamped before narrowing)."""
        b = self.b
        i32 = ir.IntType(32)
        lanes = ir.Constant(ir.VectorType(i32, self.LANES), list(range(self.LANES)))

        def narrow(v):
            v = _clamp(b, v, -1, self.LANES)
            return self.splat(b.trunc(v, i32))

        return b.and_(b.icmp_signed(">=", lanes, narrow(lo)), b.icmp_signed("<", lanes, narrow(hi)))

    def load(self, ptr, mask, passthru=None):
        return self.b.call(self._load, [self.b.bitcast(ptr, self.ty.as_pointer()),
                                        ir.IntType(32)(4), mask, passthru or self.zero])

    def store(self, value, ptr, mask) -> None:
        self.b.call(self._store, [value, self.b.bitcast(ptr, self.ty.as_pointer()),
                                  ir.IntType(32)(4), mask])

    def load_even(self, ptr, left, passthru=None):
        """ptr[0], ptr[2], ... ptr[30] for the first ``left`` lanes (stride-2 windows)."""
        b = self.b
        span = b.sub(b.mul(left, const64(2)), const64(1))  # last element read is 2*left-2
        low = self.load(ptr, self.mask(span), passthru)
        high = self.load(_gep(b, ptr, const64(16)), self.mask(span, 16), passthru)
        even = ir.Constant(ir.VectorType(ir.IntType(32), self.LANES), list(range(0, 32, 2)))
        return b.shuffle_vector(low, high, even)

    def load_even_masked(self, ptr, lane_mask, passthru):
        """ptr[2i] for the lanes i set in ``lane_mask`` (others: ``passthru``); only those
        elements are read."""
        b = self.b
        none = ir.Constant(self.mask_ty, None)
        i32 = ir.VectorType(ir.IntType(32), self.LANES)
        spread = [[(i // 2 + half * 8) if i % 2 == 0 else self.LANES for i in range(16)]
                  for half in (0, 1)]
        low = b.shuffle_vector(lane_mask, none, ir.Constant(i32, spread[0]))
        high = b.shuffle_vector(lane_mask, none, ir.Constant(i32, spread[1]))
        first = self.load(ptr, low, passthru)
        second = self.load(_gep(b, ptr, const64(16)), high, passthru)
        even = ir.Constant(i32, list(range(0, 32, 2)))
        return b.shuffle_vector(first, second, even)

    @contextmanager
    def loop(self, count):
        with for_range(self.b, count, step=self.LANES, name="v") as t:
            yield t, self.mask(self.b.sub(count, t))

    def fill(self, dst, count, src) -> None:
        """dst[0:count] = src[0:count] (or zeros when src is None)."""
        with self.loop(count) as (t, mask):
            value = self.zero if src is None else self.load(_gep(self.b, src, t), mask)
            self.store(value, _gep(self.b, dst, t), mask)


def b_sub(b, value, offset: int):
    return b.sub(value, const64(offset)) if offset else value


def _clamp(b, value, low: int, high: int):
    value = b.select(b.icmp_signed("<", value, const64(low)), const64(low), value)
    return b.select(b.icmp_signed(">", value, const64(high)), const64(high), value)


def nan_max(b, acc, value):
    """max that keeps a NaN from either side (numpy's np.max): value when it is larger or
    NaN, else acc (a NaN acc stays, as NaN > value is false)."""
    take = b.or_(b.fcmp_ordered(">", value, acc), b.fcmp_unordered("uno", value, value))
    return b.select(take, value, acc)


def _intrinsic(module, name, ret, args):
    existing = module.globals.get(name)
    return existing if existing is not None else _declare(module, name, ret, args)


def _max(b, x, y):
    return b.select(b.icmp_signed(">", x, y), x, y)


_RUN_ARGS = ("d0", "d1", "d2", "run", "s0", "s1", "s2")


def _build_gather_runs(module: ir.Module) -> None:
    """void (src, dst, d0, d1, d2, run, s0, s1, s2): dst, in order, is the runs of ``run``
    32-bit elements at src + i0*s0 + i1*s1 + i2*s2 (a permutation that keeps the last axis)."""
    memcpy = _intrinsic(module, "llvm.memcpy.p0.p0.i64", ir.VoidType(),
                        [I8_PTR, I8_PTR, I64, I1])
    fn = _declare(module, _SYMBOLS[2], ir.VoidType(), [F32_PTR, F32_PTR] + [I64] * 7)
    src, dst = fn.args[:2]
    src.add_attribute("noalias")
    dst.add_attribute("noalias")
    a = dict(zip(_RUN_ARGS, fn.args[2:]))
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    nbytes = b.mul(a["run"], const64(4))
    with for_range(b, a["d0"], name="i0") as i0, for_range(b, a["d1"], name="i1") as i1, \
            for_range(b, a["d2"], name="i2") as i2:
        at = b.add(b.add(b.mul(i0, a["s0"]), b.mul(i1, a["s1"])), b.mul(i2, a["s2"]))
        row = b.add(b.mul(b.add(b.mul(i0, a["d1"]), i1), a["d2"]), i2)
        to = b.bitcast(_gep(b, dst, b.mul(row, a["run"])), I8_PTR)
        b.call(memcpy, [to, b.bitcast(_gep(b, src, at), I8_PTR), nbytes, I1(0)])
    b.ret_void()


@cache
def _library():
    def build():
        module = ir.Module(name="msc_layout_f32")
        _build_transpose(module)
        _build_im2col(module)
        _build_gather_runs(module)
        _build_transpose_cols(module)
        return module

    lib = get_jit().compile_generated(build, list(_SYMBOLS), (__name__, "msc.backend.llvm.loops"))
    ptr = ctypes.c_void_p
    return (lib.cfunc(_SYMBOLS[0], None, ptr, ptr, *(ctypes.c_int64,) * 3),
            lib.cfunc(_SYMBOLS[1], None, ptr, ptr, *(ctypes.c_int64,) * len(_GEOMETRY)),
            lib.cfunc(_SYMBOLS[2], None, ptr, ptr, *(ctypes.c_int64,) * len(_RUN_ARGS)),
            lib.cfunc(_SYMBOLS[3], None, ptr, ptr, *(ctypes.c_int64,) * 4))


def transpose(src_ptr: int, dst_ptr: int, batch: int, rows: int, cols: int) -> None:
    """``dst[b, c, r] = src[b, r, c]`` on raw float32 pointers (both [batch, rows*cols])."""
    _library()[0](src_ptr, dst_ptr, batch, rows, cols)


def im2col(x_ptr: int, a_ptr: int, geometry: tuple) -> None:
    """Patches of an NHWC image into ``a`` [OH*OW, KH*KW*cg]; ``geometry`` per _GEOMETRY."""
    _library()[1](x_ptr, a_ptr, *geometry)


def im2col_fn():
    return _library()[1]


def transpose_fn():
    return _library()[0]


def transpose_cols_fn():
    """``(src, dst, rows, cols, c0, c1)``: the columns c0..c1 of a plane's transpose."""
    return _library()[3]


_TRANSPOSE_TASKS: dict = {}


def transpose_tasks(rows: int, cols: int, threads: int) -> NativeTasks:
    """One [rows, cols] plane's transpose to [cols, rows] as two column ranges per thread
    (a task list whose bases are the source and the destination: a batch-1 conv's [P][O]
    result to NCHW, split from inside a chain), kept per shape and thread count."""
    key = (rows, cols, threads)
    if key not in _TRANSPOSE_TASKS:
        ranges = split_range(cols, 2 * threads)
        tasks = NativeTasks(len(ranges))
        tasks.records[:, 0] = native_address(transpose_cols_fn())
        tasks.records[:, 3:7] = [(rows, cols, lo, hi) for lo, hi in ranges]
        if len(_TRANSPOSE_TASKS) > 4096:  # shapes of many models in one process
            _TRANSPOSE_TASKS.clear()
        _TRANSPOSE_TASKS[key] = tasks
    return _TRANSPOSE_TASKS[key]


# ---------------------------------------------------------------------------------------------
# Scratch arena.

_ALIGN = 64
_local = threading.local()


def scratch(*sizes: int) -> list[np.ndarray]:
    """float32 work arrays of the given element counts, 64-byte aligned, from the arena.

    The arrays are only valid until the next ``scratch`` call on this thread.
    """
    padded = [-(-s // 16) * 16 for s in sizes]  # 16 floats = 64 bytes
    arena = _arena(sum(padded))
    out, offset = [], 0
    for size, pad in zip(sizes, padded):
        out.append(arena[offset: offset + size])
        offset += pad
    return out


def _arena(total: int) -> np.ndarray:
    arena = getattr(_local, "arena", None)
    if arena is None or arena.size < total:
        raw = np.empty(total + _ALIGN // 4, np.float32)
        start = (-raw.ctypes.data % _ALIGN) // 4
        arena = _local.arena = raw[start: start + total]
        _local.address = arena.ctypes.data
    return arena


def scratch_addresses(*sizes: int) -> list[int]:
    """The addresses of :func:`scratch` arrays of these sizes, without making the arrays
    (``.ctypes.data`` costs 1-5 us a call); valid until the next scratch call on this thread."""
    padded = [-(-s // 16) * 16 for s in sizes]
    _arena(sum(padded))
    base, out = _local.address, []
    for pad in padded:
        out.append(base)
        base += 4 * pad
    return out


def scratch_offsets(*sizes: int) -> tuple[list[int], int]:
    """(byte offset of each part, total bytes) of float32 parts of these element counts laid
    out as :func:`scratch_addresses` lays them (64-byte aligned each): the same parts in the
    scratch a VM register file gives a chain step (runtime/native_run.KernelStep)."""
    offsets, at = [], 0
    for size in sizes:
        offsets.append(at)
        at += 4 * (-(-size // 16) * 16)
    return offsets, at


# ---------------------------------------------------------------------------------------------
# permute_dims: a native copy into the planned buffer.


def collapse_permutation(shape: tuple, axes: tuple) -> tuple[list, list]:
    """(dims, input strides in elements) of the output, in output order, with size-1 axes
    dropped and neighbours that stay neighbours in the input merged: ShuffleNet's
    (1, 4, 68, 14, 14) by (0, 2, 1, 3, 4) becomes dims [68, 4, 196], strides [196, 13328, 1]."""
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    dims, steps = [], []
    for axis in axes:
        if shape[axis] == 1:
            continue
        if dims and steps[-1] == strides[axis] * shape[axis]:
            dims[-1] *= shape[axis]
            steps[-1] = strides[axis]
        else:
            dims.append(shape[axis])
            steps.append(strides[axis])
    return dims, steps


def permute_seconds(elements: float) -> float:
    """One-thread seconds of permuting ``elements`` 32-bit values at this host's rate
    (runtime/split_cost.py), measured once on [64, 64, 64] -> axes (1, 0, 2)."""
    def probe() -> tuple:
        kernel = PermuteKernel((1, 0, 2), np.dtype(np.float32))
        x = np.ones((64, 64, 64), np.float32)
        out = np.empty_like(x)
        best = float("inf")
        with num_threads(1):
            for _ in range(6):
                start = time.perf_counter()
                kernel(x, out)
                best = min(best, time.perf_counter() - start)
        return best, x.size

    return unit_seconds("permute_element", elements, probe)


class PermuteKernel(Kernel):
    """out = x.transpose(axes) for 32-bit elements; runs along a kept last axis are copied
    natively, other permutations (or more than 3 outer dims) by numpy into ``out``."""

    inputs = (0,)

    def __init__(self, axes: tuple, dtype: np.dtype):
        self.axes, self.dtype = axes, dtype
        self.run = _library()[2]
        self._plans: dict = {}  # input shape -> (output shape, native plan or None)
        self._splits: dict = {}
        self.addr = (Address(), Address())

    def __call__(self, x, out):
        if type(x) is not np.ndarray or x.dtype != self.dtype:
            raise ShapeError(f"expected a {self.dtype} array, got {getattr(x, 'dtype', x)}",
                             op="permute_dims", param="data")
        axes = self.axes
        found = self._plans.get(x.shape)
        if found is None:
            if len(axes) != x.ndim:
                raise ShapeError(f"axes {axes} for a rank-{x.ndim} input", op="permute_dims",
                                 param="data")
            found = self._plans[x.shape] = (tuple(x.shape[a] for a in axes),
                                            self.plan_of(x.shape, axes))
        want, plan = found
        if (type(out) is not np.ndarray or out.shape != want or out.dtype != self.dtype
                or not out.flags.c_contiguous):
            raise ShapeError(f"output buffer {getattr(out, 'shape', out)}, expected {want}",
                             op="permute_dims", param="out")
        if plan is None or not x.flags.c_contiguous:
            np.copyto(out, x.transpose(axes))
        elif out.size:
            threads = task_threads() if out.size >= _PARALLEL_ELEMENTS else 1
            tasks = self._split(plan, threads) if threads > 1 else None
            xp, op = self.addr[0](x), self.addr[1](out)
            if tasks is None:
                self.run(xp, op, *plan)
            else:
                tasks.launch(1, (xp, op), threads)
        return out

    def _split(self, plan: tuple, threads: int):
        """Task list (byte offsets of x and out first): ranges of the larger of the two outer
        dims, each a copy of its own runs (None when both are 1)."""
        key = (plan, threads)
        if key not in self._splits:
            d0, d1, d2, run, s0, s1, s2 = plan
            axis = 0 if d0 >= d1 else 1
            inner, step = (d1 * d2 * run, s0) if axis == 0 else (d2 * run, s1)
            ranges = split_range(plan[axis], 2 * threads)
            tasks = NativeTasks(len(ranges)) if len(ranges) > 1 else None
            if tasks is not None:
                tasks.records[:, 0] = native_address(self.run)
                tasks.records[:, 3:10] = [(hi - lo, d1, d2, run, s0, s1, s2) if axis == 0 else
                                          (d0, hi - lo, d2, run, s0, s1, s2) for lo, hi in ranges]
                tasks.records[:, 1:3] = [(4 * lo * step, 4 * lo * inner) for lo, _ in ranges]
            self._splits[key] = tasks
        return self._splits[key]

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry address, i64 arguments after the two pointers) for these fixed (shape,
        dtype) buffers, which the VM's native chains call with no Python in between
        (runtime/native_run.py KernelStep); None for numpy's cases and empty outputs."""
        if len(buffers) != 2 or any(d != self.dtype for _, d in buffers):
            return None
        shape, out = buffers[0][0], buffers[1][0]
        if len(self.axes) != len(shape) or out != tuple(shape[a] for a in self.axes):
            return None
        plan = self.plan_of(tuple(shape), self.axes) if math.prod(out) else None
        splits = math.prod(out) >= _PARALLEL_ELEMENTS  # the chain runs it on one thread
        return None if plan is None else (ctypes.cast(self.run, ctypes.c_void_p).value, plan,
                                          0, splits, lambda parts: self._split_form(
                                              plan, math.prod(out),
                                              max(2, parts // PARTS_PER_THREAD)))

    def _split_form(self, plan: tuple, elements: int, threads: int) -> Launches | None:
        """The ranges of ``__call__`` at ``threads`` for a chain's parallel step."""
        tasks = self._split(plan, threads)
        return None if tasks is None else Launches(
            ((tasks, (Buffer(0), Buffer(1))),), 0, permute_seconds(elements))

    @staticmethod
    def plan_of(shape: tuple, axes: tuple) -> tuple | None:
        """The native call's (d0, d1, d2, run, s0, s1, s2), or None (numpy's case)."""
        dims, steps = collapse_permutation(shape, axes)
        if not dims:
            dims, steps = [1], [1]
        if steps[-1] != 1 or len(dims) > 4:
            return None
        pad = 4 - len(dims)
        return (*[1] * pad, *dims[:-1], dims[-1], *[0] * pad, *steps[:-1])


class PermuteFact(KernelFact):
    """permute_dims of a 32-bit tensor (float32, int32, uint32) of known rank."""

    def match(self, site: Site) -> bool:
        x, out = site.tensor(0), site.out
        if not (x is not None and x.dtype in ("float32", "int32", "uint32") and x.ndim > 0
                and getattr(out, "dtype", None) == x.dtype):
            return False
        axes = _axes(site, x.ndim)
        if axes is None or sorted(axes) != list(range(x.ndim)):
            return False
        shape = _static_shape(x)
        # a static shape the run copy cannot take goes to the TIR / numpy path (and is counted)
        return shape is None or PermuteKernel.plan_of(shape, axes) is not None

    def make(self, site: Site) -> Kernel:
        x = site.tensor(0)
        return PermuteKernel(_axes(site, x.ndim), np.dtype(x.dtype))


def _axes(site: Site, ndim: int) -> tuple:
    axes = site.attr("axes")
    return tuple(range(ndim))[::-1] if axes is None else tuple(int(a) % ndim for a in axes)


def _static_shape(sinfo) -> tuple | None:
    values = getattr(sinfo, "values", None)
    if values is None or not all(getattr(v, "is_const", False) for v in values):
        return None
    return tuple(int(v.value) for v in values)


attach("permute_dims", "kernel", PermuteFact())
