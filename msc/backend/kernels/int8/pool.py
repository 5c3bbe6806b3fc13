"""int8 average pooling: ``quantize(avg_pool2d(dequantize(x)))`` and the global average pool
(``mean`` over H, W) on the uint8 / int8 values.

Per output: the int32 sum of the window's valid bytes, ``y = (sum - valid * zx) * sx / count``
(count: the valid positions, or the padded window's with ``count_include_pad``), then
QuantizeLinear's ``clamp(rint(y / sy) + zy)`` or y itself (float32 out). The float graph sums
dequantized floats instead; the two differ only by float rounding, so the quantized outputs
agree up to a rounding tie (one step). One pass over the bytes instead of three float passes.

    pool = QAvgPool("uint8", (sx, zx), (3, 3), (2, 2), (1, 1, 1, 1), False, ("u8", sy, zy))
    pool(x [N, C, H, W], out [N, C, OH, OW])
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np
from llvmlite import ir

from ....errors import ShapeError
from ...llvm.jit import get_jit
from ...llvm.loops import F32, I32, I64, for_range, imin
from ...runtime.chain_split import Launches
from ...runtime.task_wrap import Buffer
from ...runtime.threads import task_threads
from ..base import Kernel
from ..layout import scratch_addresses
from .conv import ACT_DTYPES, NP_OUT, check_operand, check_out
from .dwconv import build_pad
from .lut import QLut
from .tasks import ChainSteps, Plans, int8_seconds, range_tasks

__all__ = ["QAvgPool", "QMaxPool"]

_RANGES = {"u8": (0.0, 255.0), "s8": (-128.0, 127.0)}
_ARGS = ("x", "out", "p0", "p1", "h", "w", "oh", "ow", "kh", "kw", "sh", "sw", "pt", "pl",
         "pad_h", "pad_w", "include_pad", "sx", "zx", "sy", "zy")
_PARALLEL = 1 << 15  # output elements (times the window): a split costs a ~5 us handoff


def _symbol(signed: bool, out: str) -> str:
    return f"msc_qavgpool_{'s8' if signed else 'u8'}_{out}"


def _build(signed: bool, out: str) -> ir.Module:
    """void (x, out, plane0, plane1, H, W, OH, OW, KH, KW, SH, SW, PT, PL, HP, WP,
    include_pad, sx, zx, sy, zy): planes plane0..plane1 of [planes, H, W]; HP / WP: the
    padded extent that include_pad counts."""
    symbol = _symbol(signed, out)
    module = ir.Module(name=symbol)
    i8p = ir.IntType(8).as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p, i8p] + [I64] * 15 + [F32] * 4),
                     name=symbol)
    a = dict(zip(_ARGS, fn.args))
    rint = ir.Function(module, ir.FunctionType(F32, [F32]), name="llvm.rint.f32")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    zero64 = ir.Constant(I64, 0)
    total = b.alloca(I32)
    out_ty = F32 if out == "f32" else ir.IntType(8)
    dst = b.bitcast(a["out"], out_ty.as_pointer())
    with for_range(b, a["p1"], start=a["p0"], name="plane") as plane, \
            for_range(b, a["oh"], name="oh") as oh, for_range(b, a["ow"], name="ow") as ow:
        h0 = b.sub(b.mul(oh, a["sh"]), a["pt"])
        w0 = b.sub(b.mul(ow, a["sw"]), a["pl"])
        hs, ws = (b.select(b.icmp_signed("<", v, zero64), zero64, v) for v in (h0, w0))
        he, we = imin(b, b.add(h0, a["kh"]), a["h"]), imin(b, b.add(w0, a["kw"]), a["w"])
        src = b.gep(a["x"], [b.mul(plane, b.mul(a["h"], a["w"]))])
        b.store(ir.Constant(I32, 0), total)
        with for_range(b, he, start=hs, name="y") as y, for_range(b, we, start=ws, name="x") as x:
            byte = b.load(b.gep(src, [b.add(b.mul(y, a["w"]), x)]))
            b.store(b.add(b.load(total), b.sext(byte, I32) if signed else b.zext(byte, I32)),
                    total)
        valid = b.mul(b.sub(he, hs), b.sub(we, ws))
        padded = b.mul(b.sub(imin(b, b.add(h0, a["kh"]), a["pad_h"]), h0),
                       b.sub(imin(b, b.add(w0, a["kw"]), a["pad_w"]), w0))
        count = b.sitofp(b.select(b.icmp_signed("!=", a["include_pad"], zero64), padded,
                                  valid), F32)
        # padded positions are float zeros: only the valid ones carry the zero point
        y = b.fsub(b.sitofp(b.load(total), F32), b.fmul(b.sitofp(valid, F32), a["zx"]))
        y = b.fdiv(b.fmul(y, a["sx"]), count)
        if out != "f32":
            lo, hi = (ir.Constant(F32, v) for v in _RANGES[out])
            q = b.fadd(b.call(rint, [b.fdiv(y, a["sy"])]), a["zy"])
            q = b.select(b.fcmp_ordered("<", q, lo), lo, q)
            q = b.select(b.fcmp_ordered(">", q, hi), hi, q)
            y = b.trunc(b.fptosi(q, I32), out_ty)
        at = b.add(b.mul(b.add(b.mul(plane, a["oh"]), oh), a["ow"]), ow)
        b.store(y, b.gep(dst, [at]))
    b.ret_void()
    return module


def _max_symbol(signed: bool, stride: int, window: tuple) -> str:
    return f"msc_qmaxpool_{'s8' if signed else 'u8'}_s{stride}_k{window[0]}x{window[1]}"


def _build_max(signed: bool, stride: int, window: tuple) -> ir.Module:
    """void (xp, out, plane0, plane1, HP, WP, OH, OW, SH): max pool of padded planes
    ``xp`` [planes, HP, WP] (the lowest value around the input, so padding never wins, as
    in ONNX MaxPool), 16 outputs of a row at a time with the window unrolled; the row stride
    (1 or 2) and the window are compiled in. Also the padding function (int8_dwconv's)."""
    symbol = _max_symbol(signed, stride, window)
    module = ir.Module(name=symbol)
    i8p = ir.IntType(8).as_pointer()
    v16 = ir.VectorType(ir.IntType(8), 16)
    mask_ty = ir.VectorType(ir.IntType(1), 16)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p, i8p] + [I64] * 7),
                     name=symbol)
    store = ir.Function(module, ir.FunctionType(ir.VoidType(), [v16, v16.as_pointer(), I32,
                                                                mask_ty]),
                        name="llvm.masked.store.v16i8.p0")
    xp, out, p0, p1, hp, wp, oh, ow, sh = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    lanes = ir.Constant(ir.VectorType(I64, 16), list(range(16)))
    with for_range(b, p1, start=p0, name="plane") as plane, \
            for_range(b, oh, name="oh") as y, for_range(b, ow, step=16, name="ow") as x:
        src = b.gep(xp, [b.mul(plane, b.mul(hp, wp))])
        best = None
        for i in range(window[0]):
            line = b.gep(src, [b.mul(b.add(b.mul(y, sh), ir.Constant(I64, i)), wp)])
            for j in range(window[1]):
                ptr = b.gep(line, [b.add(b.mul(x, ir.Constant(I64, stride)), ir.Constant(I64, j))])
                vec = b.load(b.bitcast(ptr, ir.VectorType(ir.IntType(8), 16 * stride)
                                       .as_pointer()), align=1)
                if stride > 1:
                    picks = ir.Constant(ir.VectorType(I32, 16), [k * stride for k in range(16)])
                    vec = b.shuffle_vector(vec, ir.Constant(vec.type, ir.Undefined), picks)
                if best is None:
                    best = vec
                    continue
                more = b.icmp_signed(">", vec, best) if signed else b.icmp_unsigned(">", vec,
                                                                                   best)
                best = b.select(more, vec, best)
        limit = b.insert_element(ir.Constant(ir.VectorType(I64, 16), ir.Undefined),
                                 b.sub(ow, x), ir.Constant(I32, 0))
        limit = b.shuffle_vector(limit, ir.Constant(limit.type, ir.Undefined),
                                 ir.Constant(ir.VectorType(I32, 16), None))
        at = b.gep(out, [b.add(b.mul(b.add(b.mul(plane, oh), y), ow), x)])
        b.call(store, [best, b.bitcast(at, v16.as_pointer()), ir.Constant(I32, 1),
                       b.icmp_signed("<", lanes, limit)])
    b.ret_void()
    build_pad(module, symbol + "_pad")
    return module


@cache
def _max_kernel(signed: bool, stride: int, window: tuple):
    symbol = _max_symbol(signed, stride, window)
    lib = get_jit().compile_generated(
        lambda: _build_max(signed, stride, window), [symbol, symbol + "_pad"],
        (__name__, "msc.backend.llvm.loops", "msc.backend.kernels.int8.dwconv",
         "msc.backend.kernels.int8.conv_tasks"), (signed, stride, window))
    return (lib.cfunc(symbol, None, ctypes.c_void_p, ctypes.c_void_p, *[ctypes.c_int64] * 7),
            lib.cfunc(symbol + "_pad", None, ctypes.c_void_p, ctypes.c_void_p,
                      *[ctypes.c_int64] * 7, ctypes.c_int8))


@cache
def _kernel(signed: bool, out: str):
    symbol = _symbol(signed, out)
    lib = get_jit().compile_generated(lambda: _build(signed, out), [symbol],
                                      (__name__, "msc.backend.llvm.loops"))
    return lib.cfunc(symbol, None, ctypes.c_void_p, ctypes.c_void_p, *[ctypes.c_int64] * 15,
                     *[ctypes.c_float] * 4)


class QAvgPool(Kernel):
    """int8 NCHW average pool (``window`` None: global, over all of H, W); see the module
    doc."""

    inputs = (0,)

    def __init__(self, x_dtype: str, qx: tuple, window, strides, padding, include_pad: bool,
                 out, op: str = "int8.avg_pool2d"):
        self.op, self.window = op, window
        self.strides, self.padding = tuple(strides or (1, 1)), tuple(padding or (0, 0, 0, 0))
        self.include_pad = int(bool(include_pad))
        self.x_np, flip = ACT_DTYPES[x_dtype]
        kind, sy, zy = out if isinstance(out, tuple) else (out, 1.0, 0)
        self.dtype = np.dtype(NP_OUT[kind])
        self.fn = _kernel(bool(flip), kind)
        self.q = (float(qx[0]), float(qx[1]), float(sy), float(zy))
        self._plans = Plans()
        self._steps = ChainSteps()
        self._lut: QLut | None = None  # the global pool of 1x1 planes, made on first use

    def _one_pixel(self, shape: tuple) -> QLut | None:
        """The byte table a global pool of 1x1 planes is (MobileNet's last stage at batch
        16: each output is its one input requantized; the pool's scalar divisions took 9 ns
        an element), or None for other shapes. The table's float32 arithmetic is the
        kernel's with count 1, so the bytes are the same."""
        if self.window is not None or tuple(shape[2:]) != (1, 1):
            return None
        if self._lut is None:
            sx, zx, sy, zy = (np.float32(v) for v in self.q)
            codes = np.arange(256, dtype=np.uint8).view(self.x_np).astype(np.float32)
            y = (codes - zx) * sx
            if self.dtype != np.float32:
                lo, hi = _RANGES["u8" if self.dtype == np.uint8 else "s8"]
                y = np.clip(np.rint(y / sy) + zy, lo, hi)
            self._lut = QLut(y.astype(self.dtype), None, op=self.op)  # indexed by the byte
        return self._lut

    def _geometry(self, shape: tuple) -> tuple:
        """(planes, the entry's dims, output shape of a 4-D out) of an input ``shape``."""
        n, c, h, w = shape
        kh, kw = self.window or (h, w)
        (sh, sw), (pt, pl, pb, pr) = self.strides, self.padding
        oh, ow = (h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1
        dims = (h, w, oh, ow, kh, kw, sh, sw, pt, pl, h + pb, w + pr, self.include_pad)
        return n * c, dims, (n, c, oh, ow)

    def _tasks(self, planes: int, dims: tuple, threads: int):
        return self._plans.get((planes, dims, threads), lambda: range_tasks(
            self.fn, planes, 2 * threads if threads > 1 else 1,
            lambda p0, p1: (0, 0, p0, p1, *dims, *self.q)))  # the entry indexes the planes

    def _splits(self, planes: int, out_size: int, dims: tuple) -> bool:
        return out_size * dims[4] * dims[5] >= _PARALLEL and planes > 1

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains: the one-thread
        pass of ``__call__`` on the step's buffers; ``splits``: as ``__call__``."""
        if len(buffers) != 2:
            return None
        (shape, dtype), (out_shape, out_dtype) = buffers
        if np.dtype(dtype) != self.x_np or len(shape) != 4 or np.dtype(out_dtype) != self.dtype:
            return None
        planes, dims, full = self._geometry(tuple(shape))
        if tuple(out_shape) not in (full, full[:2]) or min(full) <= 0:
            return None
        lut = self._one_pixel(tuple(shape))
        if lut is not None:
            return lut.native_signature([(tuple(shape), dtype), (tuple(shape), out_dtype)])
        reads = int(np.prod(out_shape)) * dims[4] * dims[5]
        return self._steps.signature((planes, dims), lambda: (
            [(self._tasks(planes, dims, 1), (Buffer(0), Buffer(1)))], 0,
            self._splits(planes, int(np.prod(out_shape)), dims), lambda threads: Launches(
                ((self._tasks(planes, dims, threads), (Buffer(0), Buffer(1))),), 0,
                int8_seconds("int8_avg_read", reads, lambda: _pool_probe(self, self._geometry)))))

    def __call__(self, x, out):
        x = check_operand(x, self.x_np, "data", self.op)
        if x.ndim != 4:
            raise ShapeError(f"expects [N, C, H, W], got {x.shape}", op=self.op, param="data")
        planes, dims, full = self._geometry(x.shape)
        check_out(out, full if out.ndim == 4 else full[:2], self.dtype, self.op)
        lut = self._one_pixel(x.shape)
        if lut is not None:
            lut(x, out.reshape(x.shape))
            return out
        threads = task_threads() if self._splits(planes, out.size, dims) else 1
        self._tasks(planes, dims, threads).launch(1, (x.ctypes.data, out.ctypes.data), threads)
        return out


class QMaxPool(Kernel):
    """NCHW max pool on uint8 / int8 values (a max pool commutes with a per-tensor
    dequantize: fuse/qdq/fold.py moves it onto the bytes), native instead of the generic path;
    strides (1, 1) / (2, 2), dilation 1 (``supports``)."""

    inputs = (0,)

    def __init__(self, x_dtype: str, window, strides, padding, op: str = "int8.max_pool2d"):
        self.op, self.window = op, tuple(window)
        self.strides, self.padding = tuple(strides), tuple(padding)
        self.x_np, flip = ACT_DTYPES[x_dtype]
        self.lowest = -128 if flip else 0
        self.fn, self.pad = _max_kernel(bool(flip), self.strides[1], self.window)
        self._plans = Plans()
        self._steps = ChainSteps()

    @staticmethod
    def supports(window, strides) -> bool:
        return tuple(strides) in ((1, 1), (2, 2)) and window[0] * window[1] <= 64

    def _padded(self, h: int, w: int, oh: int, ow: int) -> tuple[int, int]:
        """(HP, WP) of the padded planes: the output size is the op's (ceil mode included),
        the padded planes reach it, and a row has room for whole 16-lane reads."""
        (sh, sw), (pt, pl, pb, pr) = self.strides, self.padding
        hp = max(h + pt + pb, (oh - 1) * sh + self.window[0])
        wp = max(w + pl + pr, (ow + 15) * sw + self.window[1]) + 16 * sw
        return hp, wp

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains: the one-thread
        pad and pool passes of ``__call__``, the padded planes in the register file's
        scratch; ``splits``: as ``__call__``."""
        if len(buffers) != 2:
            return None
        (shape, dtype), (out_shape, out_dtype) = buffers
        if (np.dtype(dtype) != self.x_np or np.dtype(out_dtype) != self.x_np or len(shape) != 4
                or len(out_shape) != 4 or tuple(out_shape[:2]) != tuple(shape[:2])
                or not int(np.prod(out_shape))):
            return None
        n, c, h, w = shape
        oh, ow = out_shape[2:]
        hp, wp = self._padded(h, w, oh, ow)
        planes = n * c

        def build():
            pad, pool, _ = self._plan(planes, (h, w, hp, wp, oh, ow), 1)
            return ([(pad, (Buffer(0), Buffer(2))), (pool, (Buffer(2), Buffer(1)))],
                    planes * hp * wp + 64, self._threads(planes, oh, ow, 2) > 1, split)

        def split(threads: int) -> Launches:
            pad, pool, _ = self._plan(planes, (h, w, hp, wp, oh, ow), threads)
            reads = planes * oh * ow * self.window[0] * self.window[1]
            return Launches(((pad, (Buffer(0), Buffer(2))), (pool, (Buffer(2), Buffer(1)))),
                            planes * hp * wp + 64,
                            int8_seconds("int8_max_read", reads, lambda: _pool_probe(
                                self, lambda s: (0, 0, (s[0], s[1], s[2] // self.strides[0],
                                                        s[3] // self.strides[1])))))
        return self._steps.signature((planes, h, w, oh, ow), build)

    def __call__(self, x, out):
        x = check_operand(x, self.x_np, "data", self.op)
        if x.ndim != 4:
            raise ShapeError(f"expects [N, C, H, W], got {x.shape}", op=self.op, param="data")
        n, c, h, w = x.shape
        # the output size is the op's (ceil mode included): the padded planes reach it
        oh, ow = out.shape[2:] if getattr(out, "ndim", 0) == 4 else (0, 0)
        check_out(out, (n, c, oh, ow), x.dtype, self.op)
        if not out.size:
            return out
        hp, wp = self._padded(h, w, oh, ow)
        planes = n * c
        threads = self._threads(planes, oh, ow, task_threads())
        plan = self._plans.get((planes, h, w, oh, ow, threads),
                               lambda: self._plan(planes, (h, w, hp, wp, oh, ow), threads))
        (xp,) = scratch_addresses(-(-(planes * hp * wp + 64) // 4))
        plan[0].launch(1, (x.ctypes.data, xp), plan[2])
        plan[1].launch(1, (xp, out.ctypes.data), plan[2])
        return out

    @staticmethod
    def _threads(planes: int, oh: int, ow: int, threads: int) -> int:
        return threads if planes * oh * ow * 9 >= _PARALLEL and planes > 1 else 1

    def _plan(self, planes: int, dims: tuple, threads: int) -> tuple:
        """(pad tasks, pool tasks, threads): both over plane ranges."""
        h, w, hp, wp, oh, ow = dims
        pt, pl, _, _ = self.padding
        parts = 2 * threads if threads > 1 else 1
        pad = range_tasks(self.pad, planes, parts, lambda p0, p1: (
            p0 * h * w, p0 * hp * wp, p1 - p0, h, w, hp, wp, pt, pl, self.lowest))
        pool = range_tasks(self.fn, planes, parts, lambda p0, p1: (
            0, 0, p0, p1, hp, wp, oh, ow, self.strides[0]))
        return pad, pool, threads


def _pool_probe(kernel, geometry) -> tuple:
    """(call, window reads) of pool ``kernel`` on 64 channels of 64 x 64 (``geometry(shape)``
    -> (_, _, its output shape); the Python call's few us a small part): the per-read
    rate."""
    x = np.zeros((1, 64, 64, 64), kernel.x_np)
    out = np.empty(geometry(x.shape)[2], getattr(kernel, "dtype", x.dtype))
    window = kernel.window or (64, 64)
    return lambda: kernel(x, out), out.size * window[0] * window[1]
