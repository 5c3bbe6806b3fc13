"""Depthwise convs with the channels in the vector lanes, for small planes and wide windows.

window3.py runs a depthwise conv plane by plane, the plane's columns in the lanes: on the small
planes of a network's last stages (1x1 to 8x8, hundreds of channels) a vector holds one short
row or a whole plane with most lanes idle, and each plane pays its own set-up (weights, masks):
MobileNetV2's 3x3 convs on 2x2 / 1x1 planes ran 2.7-5x onnxruntime's time, and 7x7 windows
(ConvNeXt) took pool.py's padded-copy kernel at 7x. Here a block of ``lanes`` channels (the
host's vector width: 16 with AVX-512, 8 with AVX2) is copied into a zero-bordered tile of
[Hp][Wp][lanes] floats (``lanes`` pixels of ``lanes`` planes loaded as rows and transposed in
registers; planes of fewer pixels than half a vector: a strided gather per pixel), every
output pixel is k * k FMAs of whole vectors with the channels' weights
(packed [tap][channel] once), and the results go back to NCHW the same way (a transpose,
one masked store per channel). A channel count that is not a multiple of the
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
# pool.py's padded copy for 7x7): moving a block in and out of the tile costs about as much
# as a 3x3 window's 9 FMAs a pixel, which the plane kernels' row vectors repay on larger
# planes. One thread, batch 16, CPU time, lanes / plane kernel: 3x3 0.22-0.58 up to 8x8
# outputs (0.90 at 4x4), 1.30 at 14x14; 5x5 0.51 at 7x7, 0.78-0.98 at 14x14, 1.17 at 16x16;
# 7x7 0.22-0.39 up to 8x8, 0.83 at 16x16, 0.97 at 32x32 (Xeon with AVX-512, 2026-12-02,
# docs/perf/corpus-speed.md "channels in the lanes").
_PLANE_LIMIT = {3: 64, 5: 196, 7: 256}


def lanes_wins(k: int, oh: int, ow: int) -> bool:
    """Whether a k x k depthwise conv with (oh, ow) output planes takes this kernel."""
    return oh * ow <= _PLANE_LIMIT.get(k, 0)


def _symbol(k: int, lanes: int) -> str:
    return f"msc_dw_lanes{k}x{k}_l{lanes}_f32"


class _Vector:
    """Vectors of ``lanes`` floats for one module: loads, stores (masked or not), FMAs."""

    def __init__(self, b: ir.IRBuilder, lanes: int):
        self.b, self.lanes = b, lanes
        self.ty = ir.VectorType(F32, lanes)
        self.mask_ty = ir.VectorType(ir.IntType(1), lanes)
        self.ptrs_ty = ir.VectorType(F32_PTR, lanes)
        self.index_ty = ir.VectorType(I64, lanes)
        sfx = f"v{lanes}f32"
        self._fma = self._declare(f"llvm.fma.{sfx}", self.ty, [self.ty] * 3)
        self._gather = self._declare(f"llvm.masked.gather.{sfx}.v{lanes}p0", self.ty,
                                     [self.ptrs_ty, I32, self.mask_ty, self.ty])
        self._scatter = self._declare(f"llvm.masked.scatter.{sfx}.v{lanes}p0", ir.VoidType(),
                                      [self.ty, self.ptrs_ty, I32, self.mask_ty])
        ptr = self.ty.as_pointer()
        self._load = self._declare(f"llvm.masked.load.{sfx}.p0", self.ty,
                                   [ptr, I32, self.mask_ty, self.ty])
        self._store = self._declare(f"llvm.masked.store.{sfx}.p0", ir.VoidType(),
                                    [self.ty, ptr, I32, self.mask_ty])
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

    def masked_load(self, ptr, mask):
        return self.b.call(self._load, [self.b.bitcast(ptr, self.ty.as_pointer()), I32(4), mask,
                                        self.zero])

    def masked_store(self, value, ptr, mask) -> None:
        self.b.call(self._store, [value, self.b.bitcast(ptr, self.ty.as_pointer()), I32(4), mask])

    def store(self, value, ptr) -> None:
        self.b.store(value, self.b.bitcast(ptr, self.ty.as_pointer()), align=4)

    def fma(self, a, c, acc):
        return self.b.call(self._fma, [a, c, acc])


def _build(module: ir.Module, k: int, lanes: int) -> None:
    """void (x, out, w [k*k][Cp], bias [Cp], scratch, int64 [*_ARGS]); Cp: C rounded up to the
    lanes (zero weights past C); scratch: see :func:`scratch_floats`."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [F32_PTR] * 5 + [I64.as_pointer()]),
                     name=_symbol(k, lanes))
    for arg in fn.args[:5]:
        arg.add_attribute("noalias")
    x, out, w, bias, scratch = fn.args[:5]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    g = {name: b.load(b.gep(fn.args[5], [const64(i)])) for i, name in enumerate(_ARGS)}
    vec = _Vector(b, lanes)
    c_pad = _round_up(b, g["C"], lanes)
    plane_in, plane_out = b.mul(g["H"], g["W"]), b.mul(g["OH"], g["OW"])
    slots = b.add(b.mul(g["Hp"], g["Wp"]), const64(1))  # the last: where tail pixels go
    tile = scratch
    outs = b.gep(scratch, [b.mul(slots, const64(lanes))])
    where = b.bitcast(b.gep(outs, [b.mul(_round_up(b, plane_out, lanes), const64(lanes))]),
                      I64.as_pointer())
    with for_range(b, slots, name="z") as t:  # the zero border, once
        vec.store(vec.zero, b.gep(tile, [b.mul(t, const64(lanes))]))
    _pixel_slots(b, g, where, plane_in, slots, lanes)
    with for_range(b, g["images"], name="img") as img, \
            for_range(b, g["C"], step=lanes, name="c0") as c0:
        channels = b.sub(g["C"], c0)
        first = b.add(b.mul(img, g["C"]), c0)
        _pack(b, vec, (b.gep(x, [b.mul(first, plane_in)]), plane_in, channels), tile, where)
        taps = [vec.load(b.gep(w, [b.add(b.mul(const64(t), c_pad), c0)])) for t in range(k * k)]
        start = vec.load(b.gep(bias, [c0]))
        _outputs(b, vec, g, k, (tile, taps, start), outs)
        _unpack(b, vec, outs, (b.gep(out, [b.mul(first, plane_out)]), plane_out, channels))
    b.ret_void()


def _round_up(b, value, lanes: int):
    return b.mul(b.sdiv(b.add(value, const64(lanes - 1)), const64(lanes)), const64(lanes))


def _pixel_slots(b, g, where, plane_in, slots, lanes: int) -> None:
    """where[ih * W + iw] = the tile slot of input pixel (ih, iw); up to the next multiple
    of the lanes, the spare slot (the transposed tail pixels land there, read by nothing)."""
    with for_range(b, g["H"], name="sh") as ih, for_range(b, g["W"], name="sw") as iw:
        slot = b.add(b.mul(b.add(ih, g["ph"]), g["Wp"]), b.add(iw, g["pw"]))
        b.store(slot, b.gep(where, [b.add(b.mul(ih, g["W"]), iw)]))
    with for_range(b, _round_up(b, plane_in, lanes), start=plane_in, name="st") as p:
        b.store(b.sub(slots, const64(1)), b.gep(where, [p]))


def transpose(b, rows: list) -> list:
    """The square matrix of ``len(rows)`` vectors of as many lanes, transposed: at each scale
    k (lanes / 2, ..., 1) the off-diagonal k x k blocks swap (lanes * log2(lanes) two-input
    shuffles; a strided gather or scatter costs a load or store per lane)."""
    lanes = len(rows)
    i32 = ir.IntType(32)
    k = lanes // 2
    while k:
        low = ir.Constant(ir.VectorType(i32, lanes),
                          [m if not m & k else lanes + m - k for m in range(lanes)])
        high = ir.Constant(ir.VectorType(i32, lanes),
                           [m + k if not m & k else lanes + m for m in range(lanes)])
        for i in range(lanes):
            if not i & k:
                a, c = rows[i], rows[i + k]
                rows[i], rows[i + k] = b.shuffle_vector(a, c, low), b.shuffle_vector(a, c, high)
        k //= 2
    return rows


def _channel_masks(b, vec, pixels_left, channels) -> list:
    """Per channel row c of a block: lanes j < pixels_left, all off when c >= channels."""
    pixels = b.icmp_signed("<", vec.iota, vec.splat(pixels_left))
    none = ir.Constant(vec.mask_ty, None)
    return [b.select(b.icmp_signed("<", const64(c), channels), pixels, none)
            for c in range(vec.lanes)]


def _small(b, vec, pixels):
    """Planes of fewer pixels than half a vector: a strided gather (scatter) per pixel costs
    less than transposing a block of ``lanes`` pixels most of which do not exist."""
    return b.icmp_signed("<", pixels, const64(vec.lanes // 2))


def _pack(b, vec, plane, tile, where) -> None:
    """The block's channels of each input pixel into its tile slot: ``lanes`` pixels of
    ``lanes`` channel planes loaded as rows, transposed, stored a pixel a vector (small
    planes: a gather per pixel)."""
    src, plane_in, channels = plane
    lanes = vec.lanes
    with b.if_else(_small(b, vec, plane_in)) as (small, large):
        with small, for_range(b, plane_in, name="pg") as p:
            mask = b.icmp_signed("<", vec.iota, vec.splat(channels))
            value = vec.gather(vec.lane_ptrs(b.gep(src, [p]), plane_in), mask)
            vec.store(value, b.gep(tile, [b.mul(b.load(b.gep(where, [p])), const64(lanes))]))
        with large:
            _pack_rows(b, vec, plane, tile, where)


def _pack_rows(b, vec, plane, tile, where) -> None:
    src, plane_in, channels = plane
    lanes = vec.lanes
    with for_range(b, plane_in, step=lanes, name="p0") as p0:
        masks = _channel_masks(b, vec, b.sub(plane_in, p0), channels)
        rows = [vec.masked_load(b.gep(src, [b.add(b.mul(const64(c), plane_in), p0)]), masks[c])
                for c in range(lanes)]
        for j, pixel in enumerate(transpose(b, rows)):
            slot = b.load(b.gep(where, [b.add(p0, const64(j))]))
            vec.store(pixel, b.gep(tile, [b.mul(slot, const64(lanes))]))


def _unpack(b, vec, outs, plane) -> None:
    """The output slots (a pixel a vector) back to the block's NCHW planes, ``lanes``
    pixels at a time: transposed, one masked store per channel (small planes: a scatter per
    pixel)."""
    dst, plane_out, channels = plane
    lanes = vec.lanes
    with b.if_else(_small(b, vec, plane_out)) as (small, large):
        with small, for_range(b, plane_out, name="qs") as q:
            mask = b.icmp_signed("<", vec.iota, vec.splat(channels))
            value = vec.load(b.gep(outs, [b.mul(q, const64(lanes))]))
            vec.scatter(value, vec.lane_ptrs(b.gep(dst, [q]), plane_out), mask)
        with large:
            _unpack_rows(b, vec, outs, plane)


def _unpack_rows(b, vec, outs, plane) -> None:
    dst, plane_out, channels = plane
    lanes = vec.lanes
    with for_range(b, plane_out, step=lanes, name="q0") as q0:
        masks = _channel_masks(b, vec, b.sub(plane_out, q0), channels)
        rows = [vec.load(b.gep(outs, [b.mul(b.add(q0, const64(j)), const64(lanes))]))
                for j in range(lanes)]
        for c, values in enumerate(transpose(b, rows)):
            vec.masked_store(values, b.gep(dst, [b.add(b.mul(const64(c), plane_out), q0)]),
                             masks[c])


def _outputs(b, vec, g, k, taps_of, outs) -> None:
    """Every output pixel of the block: k window rows' FMA chains, merged, clamped, into its
    output slot."""
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
        vec.store(acc, b.gep(outs, [b.mul(pixel, const64(lanes))]))


def scratch_floats(h: int, w: int, hp: int, wp: int, oh: int, ow: int, lanes: int) -> int:
    """Floats of a call's scratch: the tile ((Hp * Wp + 1) slots of ``lanes`` floats), the
    output slots (OH * OW rounded up to the lanes) and the input pixels' tile slots (int64)."""
    def up(n):
        return -(-n // lanes) * lanes
    return (hp * wp + 1) * lanes + up(oh * ow) * lanes + 2 * up(h * w)


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
            floats = scratch_floats(h, w, hp, wp, oh, ow, self.lanes)
            found = self._args[key] = (args, args.ctypes.data, floats)
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
