"""Depthwise convs with the channels in the vector lanes, for small planes and wide windows.

window3.py runs a depthwise conv plane by plane, the plane's columns in the lanes: on the small
planes of a network's last stages (1x1 to 8x8, hundreds of channels) a vector holds one short
row or a whole plane with most lanes idle, and each plane pays its own set-up (weights, masks):
MobileNetV2's 3x3 convs on 2x2 / 1x1 planes ran 2.7-5x onnxruntime's time, and 7x7 windows
(ConvNeXt) took pool.py's padded-copy kernel at 7x. Here a block of ``lanes`` channels (the
host's vector width: 16 with AVX-512, 8 with AVX2) is copied into a zero-bordered tile of
[Hp][Wp][lanes] floats (one strided gather per pixel), every output pixel is k * k FMAs of
whole vectors with the channels' weights (packed [tap][channel] once), and the result goes
back to NCHW by one strided scatter per pixel. A channel count that is not a multiple of the
lanes masks the last block's lanes; padding of any size is the tile's zero border::

    conv = LanesDepthwise(weight_c_kk, bias_c, k=7, stride=1, padding=(3, 3), relu=0, hi=bits)
    conv(x_ptr, out_ptr, n, h, w, oh, ow)       # or its chain_signature / parallel
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np
from llvmlite import ir

from ..llvm.jit import generated_entry, vector_lanes
from ..llvm.loops import F32, F32_PTR, I32, I64, const64, for_range
from ..runtime.task_wrap import At, Buffer, ChainEntry
from ..runtime.threads import NativeTasks, native_address
from .layout import scratch_addresses, scratch_offsets

__all__ = ["LANES_SIZES", "LanesDepthwise", "lanes_wins"]

LANES_SIZES = (3, 5, 7)  # square windows built (unrolled taps)
_ARGS = ("images", "C", "H", "W", "s", "ph", "pw", "OH", "OW", "relu", "hi", "Hp", "Wp")
# Output pixels per plane up to which the lanes kernel beats the plane kernels (window3.py;
# pool.py's padded copy for 7x7): its tile copies cost a gather and a scatter per pixel,
# which a 3x3 window's 9 FMAs repay only on small planes. One thread, batch 16, lanes / plane
# kernel: 3x3 0.16-0.75 up to 8x8 outputs, 1.48 at 14x14; 5x5 0.49-0.54 at 7x7 / 8x8, 0.96
# at 14x14, 1.28 at 16x16; 7x7 0.37 at 8x8, 0.89 at 16x16, 1.02 at 32x32 (Xeon with
# AVX-512, docs/perf/corpus-speed.md, 2026-12-02 "channels in the lanes").
_PLANE_LIMIT = {3: 64, 5: 196, 7: 256}


def lanes_wins(k: int, oh: int, ow: int) -> bool:
    """Whether a k x k depthwise conv with (oh, ow) output planes takes this kernel."""
    return oh * ow <= _PLANE_LIMIT.get(k, 0)


def _symbol(k: int, lanes: int) -> str:
    return f"msc_dw_lanes{k}x{k}_l{lanes}_f32"


class _Vector:
    """Vectors of ``lanes`` floats for one module: gathers, scatters, loads, FMAs."""

    def __init__(self, b: ir.IRBuilder, lanes: int):
        self.b, self.lanes = b, lanes
        self.ty = ir.VectorType(F32, lanes)
        self.mask_ty = ir.VectorType(ir.IntType(1), lanes)
        self.ptrs_ty = ir.VectorType(F32_PTR, lanes)
        self.index_ty = ir.VectorType(I64, lanes)
        sfx = f"v{lanes}f32"
        self._gather = self._declare(f"llvm.masked.gather.{sfx}.v{lanes}p0", self.ty,
                                     [self.ptrs_ty, I32, self.mask_ty, self.ty])
        self._scatter = self._declare(f"llvm.masked.scatter.{sfx}.v{lanes}p0", ir.VoidType(),
                                      [self.ty, self.ptrs_ty, I32, self.mask_ty])
        self._fma = self._declare(f"llvm.fma.{sfx}", self.ty, [self.ty] * 3)
        self.zero = ir.Constant(self.ty, None)
        self.iota = ir.Constant(self.index_ty, list(range(lanes)))

    def _declare(self, name, ret, args):
        module = self.b.module
        return module.globals.get(name) or ir.Function(module, ir.FunctionType(ret, args), name)

    def splat(self, value):
        b = self.b
        ty = ir.VectorType(value.type, self.lanes)
        first = b.insert_element(ir.Constant(ty, ir.Undefined), value, I32(0))
        return b.shuffle_vector(first, ir.Constant(ty, ir.Undefined),
                                ir.Constant(ir.VectorType(I32, self.lanes), None))

    def lane_ptrs(self, base, stride):
        """Pointers base + lane * stride (floats) for every lane."""
        b = self.b
        start = self.splat(b.ptrtoint(base, I64))
        step = b.mul(self.iota, self.splat(b.mul(stride, const64(4))))
        return b.inttoptr(b.add(start, step), self.ptrs_ty)

    def gather(self, ptrs, mask):
        return self.b.call(self._gather, [ptrs, I32(4), mask, self.zero])

    def scatter(self, value, ptrs, mask) -> None:
        self.b.call(self._scatter, [value, ptrs, I32(4), mask])

    def load(self, ptr):
        return self.b.load(self.b.bitcast(ptr, self.ty.as_pointer()), align=4)

    def store(self, value, ptr) -> None:
        self.b.store(value, self.b.bitcast(ptr, self.ty.as_pointer()), align=4)

    def fma(self, a, c, acc):
        return self.b.call(self._fma, [a, c, acc])


def _build(module: ir.Module, k: int, lanes: int) -> None:
    """void (x, out, w [k*k][Cp], bias [Cp], tile, int64 [*_ARGS]); Cp: C rounded up to the
    lanes (zero weights past C), tile: Hp * Wp * lanes floats of scratch."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [F32_PTR] * 5 + [I64.as_pointer()]),
                     name=_symbol(k, lanes))
    for arg in fn.args[:5]:
        arg.add_attribute("noalias")
    x, out, w, bias, tile = fn.args[:5]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    g = {name: b.load(b.gep(fn.args[5], [const64(i)])) for i, name in enumerate(_ARGS)}
    vec = _Vector(b, lanes)
    c_pad = b.mul(b.sdiv(b.add(g["C"], const64(lanes - 1)), const64(lanes)), const64(lanes))
    with for_range(b, b.mul(g["Hp"], g["Wp"]), name="z") as t:  # the zero border, once
        vec.store(vec.zero, b.gep(tile, [b.mul(t, const64(lanes))]))
    plane_in, plane_out = b.mul(g["H"], g["W"]), b.mul(g["OH"], g["OW"])
    with for_range(b, g["images"], name="img") as img, \
            for_range(b, g["C"], step=lanes, name="c0") as c0:
        mask = b.icmp_signed("<", vec.iota, vec.splat(b.sub(g["C"], c0)))
        first = b.add(b.mul(img, g["C"]), c0)
        _pack(b, vec, g, b.gep(x, [b.mul(first, plane_in)]), plane_in, tile, mask)
        taps = [vec.load(b.gep(w, [b.add(b.mul(const64(t), c_pad), c0)])) for t in range(k * k)]
        start = vec.load(b.gep(bias, [c0]))
        dst = b.gep(out, [b.mul(first, plane_out)])
        _outputs(b, vec, g, k, (tile, taps, start), dst, plane_out, mask)
    b.ret_void()


def _pack(b, vec, g, src, plane_in, tile, mask) -> None:
    """tile[(ih + ph) * Wp + iw + pw] = the block's channels at input pixel (ih, iw)."""
    lanes = vec.lanes
    with for_range(b, g["H"], name="ih") as ih, for_range(b, g["W"], name="iw") as iw:
        pixel = b.add(b.mul(ih, g["W"]), iw)
        value = vec.gather(vec.lane_ptrs(b.gep(src, [pixel]), plane_in), mask)
        at = b.add(b.mul(b.add(ih, g["ph"]), g["Wp"]), b.add(iw, g["pw"]))
        vec.store(value, b.gep(tile, [b.mul(at, const64(lanes))]))


def _outputs(b, vec, g, k, taps_of, dst, plane_out, mask) -> None:
    """Every output pixel of the block: k window rows' FMA chains, merged, clamped, scattered."""
    tile, taps, start = taps_of
    lanes = vec.lanes
    relu = vec.splat(b.icmp_signed("!=", g["relu"], const64(0)))
    hi = vec.splat(b.bitcast(b.trunc(g["hi"], ir.IntType(32)), F32))
    with for_range(b, g["OH"], name="oh") as oh, for_range(b, g["OW"], name="ow") as ow:
        corner = b.add(b.mul(b.mul(oh, g["s"]), g["Wp"]), b.mul(ow, g["s"]))
        rows = []
        for kh in range(k):
            acc = start if kh == 0 else vec.zero
            row = b.add(corner, b.mul(const64(kh), g["Wp"]))
            for kw in range(k):
                value = vec.load(b.gep(tile, [b.mul(b.add(row, const64(kw)), const64(lanes))]))
                acc = vec.fma(value, taps[kh * k + kw], acc)
            rows.append(acc)
        while len(rows) > 1:  # a balanced tree: short dependency chains
            pairs = [b.fadd(a, c) for a, c in zip(rows[::2], rows[1::2])]
            rows = pairs + rows[len(pairs) * 2:]
        acc = rows[0]
        acc = b.select(b.and_(relu, b.fcmp_ordered("<", acc, vec.zero)), vec.zero, acc)
        acc = b.select(b.fcmp_ordered(">", acc, hi), hi, acc)
        pixel = b.add(b.mul(oh, g["OW"]), ow)
        vec.scatter(acc, vec.lane_ptrs(b.gep(dst, [pixel]), plane_out), mask)


@cache
def _entry(k: int, lanes: int):
    def build():
        module = ir.Module(name=_symbol(k, lanes))
        _build(module, k, lanes)
        return module

    return generated_entry(build, _symbol(k, lanes), (__name__, "msc.backend.llvm.loops"),
                           (k, lanes), *(ctypes.c_void_p,) * 6)


class LanesDepthwise:
    """A depthwise conv (one output channel per input channel) of a k x k window, k in
    LANES_SIZES, any stride and padding, with its packed weights and argument rows."""

    def __init__(self, weight: np.ndarray, bias: np.ndarray, k: int, stride: int,
                 padding: tuple, relu: int, hi: int):
        self.lanes = vector_lanes()
        self.k, self.stride, self.padding = k, stride, tuple(padding)
        self.c = weight.shape[0]
        c_pad = -(-self.c // self.lanes) * self.lanes
        self.w = np.zeros((k * k, c_pad), np.float32)
        self.w[:, :self.c] = weight.reshape(self.c, k * k).T
        self.bias = np.zeros(c_pad, np.float32)
        self.bias[:self.c] = bias
        self.relu, self.hi = int(relu), int(hi)
        self.raw = _entry(k, self.lanes)
        self.address = native_address(self.raw)
        self._args: dict = {}
        self._chains: dict = {}
        self._splits: dict = {}

    def _lookup(self, images: int, h: int, w: int, oh: int, ow: int) -> tuple:
        """(argument row, its address, tile floats) for this geometry."""
        key = (images, h, w, oh, ow)
        found = self._args.get(key)
        if found is None:
            s, (ph, pw) = self.stride, self.padding
            hp = max(h + ph, (oh - 1) * s + self.k)
            wp = max(w + pw, (ow - 1) * s + self.k)
            args = np.array((images, self.c, h, w, s, ph, pw, oh, ow, self.relu, self.hi,
                             hp, wp), np.int64)
            found = self._args[key] = (args, args.ctypes.data, hp * wp * self.lanes)
        return found

    def __call__(self, x: int, out: int, n: int, h: int, w: int, oh: int, ow: int) -> None:
        """All n images on the calling thread (x, out: data addresses)."""
        _, args, tile = self._lookup(n, h, w, oh, ow)
        self.raw(x, out, self.w.ctypes.data, self.bias.ctypes.data,
                 scratch_addresses(tile)[0], args)

    def chain_signature(self, n: int, h: int, w: int, oh: int, ow: int, scratch: int) -> tuple:
        """(entry, dims, scratch bytes) of one call on the step's buffers 0 (x) and 1 (out),
        its tile in the register file's scratch (buffer ``scratch``)."""
        key = (n, h, w, oh, ow, scratch)
        found = self._chains.get(key)
        if found is None:
            _, args, tile = self._lookup(n, h, w, oh, ow)
            entry = ChainEntry(self.raw, (Buffer(0), Buffer(1), self.w.ctypes.data,
                                          self.bias.ctypes.data, At(scratch, 0), args))
            found = self._chains[key] = (entry, scratch_offsets(tile)[1])
        return (*found[0].signature, found[1])

    def parallel(self, x: int, out: int, n: int, h: int, w: int, oh: int, ow: int) -> None:
        """One native task per image, each with its own tile."""
        key = (n, h, w, oh, ow)
        found = self._splits.get(key)
        if found is None:
            found = self._splits[key] = self._split(n, h, w, oh, ow)
        tasks, tile = found
        tasks.launch(1, (x, out, 0, 0, scratch_addresses(tile * n)[0]))

    def _split(self, n, h, w, oh, ow) -> tuple:
        _, args, tile = self._lookup(1, h, w, oh, ow)
        tile = -(-tile // 16) * 16  # each task's tile 64-byte aligned
        tasks = NativeTasks(n)
        tasks.records[:, 0] = self.address
        tasks.keep = self
        for i in range(n):
            tasks.records[i, 1:6] = (i * self.c * h * w * 4, i * self.c * oh * ow * 4, 0, 0,
                                     4 * tile * i)
            tasks.records[i, 3] = self.w.ctypes.data
            tasks.records[i, 4] = self.bias.ctypes.data
            tasks.records[i, 6] = args
        return tasks, tile
