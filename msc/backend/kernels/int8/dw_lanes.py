"""int8 depthwise convs with the channels in the lanes: small planes and wide windows.

dwconv.py runs a depthwise conv plane by plane, 16 output pixels of a row in the lanes. On
the small planes of a network's last stages at batch 16 (MobileNetV2's 3x3 convs on 1x1 to
4x4 planes, ConvNeXt's 7x7 on 4x4 and 8x8) a row holds 1-8 pixels, so most lanes idle, and
each plane pays its own padding copy and epilogue set-up: 16 x 240 planes of 1x1 took 90 us.
Here, per image, a block of 16 channels is widened into a tile of float32 vectors
``[Hp][Wp][16]`` whose border holds the zero point (written once per call; the interior is
overwritten by every block), each output pixel is k * k FMAs of whole vectors (weights
packed ``[tap][channel]`` once; every partial sum is an integer under 2^24, so the float
sums are the int32 sums exactly), the int8 GEMM's "col" epilogue
(int8/gemm.py: per-channel comp, scale, bias in the lanes) requantizes the 16 channels, and
the bytes go back to NCHW. Both copies move 16 pixels of 16 channels with in-register
transposes (kernels/dw_lanes.py's ``transpose``); planes of fewer than 8 pixels use a gather
(scatter) per pixel. Exact: the int32 sums of u8 x s8 products and the epilogue arithmetic of
QConv2d / QDepthwise, so the bytes equal the plane kernel's.

    kernel = LanesDepthwise(qdw)                   # a QDepthwise: weights, epilogue, attrs
    kernel.tasks(n, (h, w, oh, ow), parts)         # (NativeTasks, scratch bytes per call)
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np
from llvmlite import ir

from ...llvm.jit import get_jit
from ...llvm.loops import F32, I32, I64, const64, entry_alloca, for_range, imin
from ...runtime.threads import NativeTasks, native_address, split_range
from ..dw_lanes import transpose
from .gemm import I8, I8_PTR, LANES, OUTS, IRTypes, QGemmConfig, emit_epilogue

__all__ = ["LanesDepthwise", "lanes_wins"]

FIELDS = ("images", "c", "h", "w", "sh", "sw", "dh", "dw", "pt", "pl", "oh", "ow", "hp", "wp",
          "zero", "wt", "comp", "scale", "bias", "oscale", "ozp", "relu", "pscale", "pbias",
          "s2", "z2", "relu2", "tile_bytes", "where")
_SMALL = 8  # planes of fewer pixels: a gather / scatter per pixel, not a 16 x 16 transpose
# Output pixels per plane up to which the lanes beat dwconv.py's row kernel (16 pixels of a
# row in the lanes): it idles lanes on rows under 16 pixels, so the lanes win there; from
# 16 x 16 on both fill their vectors.
_PLANE_LIMIT = 16 * 16


def lanes_wins(oh: int, ow: int) -> bool:
    """Whether a depthwise conv of (oh, ow) output planes takes this kernel."""
    return ow < LANES and oh * ow < _PLANE_LIMIT


def _symbol(cfg: QGemmConfig, signed: bool, window: tuple) -> str:
    return (f"msc_qdw_lanes_k{window[0]}x{window[1]}_{'s8' if signed else 'u8'}_"
            f"{cfg.symbol[10:]}")


class _Block:
    """The IR values of one build: the builder, the types, the row's fields."""

    def __init__(self, b, t: IRTypes, v: dict, size: int, signed: bool):
        self.b, self.t, self.v, self.size, self.signed = b, t, v, size, signed
        self.iota = ir.Constant(ir.VectorType(I32, LANES), list(range(LANES)))
        self.where = None  # the input pixels' tile slots (int64), set by _build
        elem = I8 if size == 1 else (F32 if t.cfg.out == "f32" else I32)
        self.out_ty = ir.VectorType(elem, LANES)

    def lanes_below(self, count):
        """Lanes j < count (count: i64)."""
        b = self.b
        limit = b.trunc(count, I32)
        first = b.insert_element(ir.Constant(ir.VectorType(I32, LANES), ir.Undefined), limit,
                                 I32(0))
        splat = b.shuffle_vector(first, ir.Constant(first.type, ir.Undefined),
                                 ir.Constant(ir.VectorType(I32, LANES), None))
        return b.icmp_signed("<", self.iota, splat)

    def widen(self, bytes_vec):
        """Bytes as float32 lanes: every product (|x * w| <= 255 * 128) and every partial
        sum of a window of up to 514 taps is an integer under 2^24, so float FMAs (two a
        cycle, one instruction) give the int32 sums exactly."""
        wide = ir.VectorType(F32, LANES)
        return self.b.sitofp(bytes_vec, wide) if self.signed else self.b.uitofp(bytes_vec, wide)


def _declare(module, name, ret, args):
    return module.globals.get(name) or ir.Function(module, ir.FunctionType(ret, args), name)


def _masked(module, kind: str, ty: ir.VectorType):
    """llvm.masked.{load,store,gather,scatter} for ``ty`` (16 lanes)."""
    sfx = f"v{LANES}{'i8' if ty.element == I8 else 'f32' if ty.element == F32 else 'i32'}"
    mask = ir.VectorType(ir.IntType(1), LANES)
    ptrs = ir.VectorType(ty.element.as_pointer(), LANES)
    table = {"load": (ty, [ty.as_pointer(), I32, mask, ty]),
             "store": (ir.VoidType(), [ty, ty.as_pointer(), I32, mask]),
             "gather": (ty, [ptrs, I32, mask, ty]),
             "scatter": (ir.VoidType(), [ty, ptrs, I32, mask])}
    ret, args = table[kind]
    name = f"llvm.masked.{kind}.{sfx}.p0" if kind in ("load", "store") else \
        f"llvm.masked.{kind}.{sfx}.v{LANES}p0"
    return _declare(module, name, ret, args)


def _lane_ptrs(blk: _Block, base, stride, elem):
    """Pointers base + lane * stride (elements of ``elem``) for every lane."""
    b = blk.b
    wide = ir.VectorType(I64, LANES)
    start = b.ptrtoint(base, I64)
    first = b.insert_element(ir.Constant(wide, ir.Undefined), start, I32(0))
    starts = b.shuffle_vector(first, ir.Constant(wide, ir.Undefined),
                              ir.Constant(ir.VectorType(I32, LANES), None))
    nbytes = b.mul(stride, const64(elem.width // 8 if isinstance(elem, ir.IntType) else 4))
    step = b.insert_element(ir.Constant(wide, ir.Undefined), nbytes, I32(0))
    steps = b.shuffle_vector(step, ir.Constant(wide, ir.Undefined),
                             ir.Constant(ir.VectorType(I32, LANES), None))
    lanes = ir.Constant(wide, list(range(LANES)))
    return b.inttoptr(b.add(starts, b.mul(lanes, steps)),
                      ir.VectorType(elem.as_pointer(), LANES))


def _slot(blk: _Block, tile, index):
    """The tile's float32 vector ``index`` (a pixel's 16 channels)."""
    b = blk.b
    return b.bitcast(b.gep(tile, [b.mul(index, const64(4 * LANES))]),
                     ir.VectorType(F32, LANES).as_pointer())


def _pixel_slots(blk: _Block, where) -> None:
    """where[p] = the tile slot of input pixel p (row-major in the H x W plane), once per
    call: a division per pixel and block cost as much as the block's copies."""
    b, v = blk.b, blk.v
    with for_range(b, v["h"], name="sh") as ih, for_range(b, v["w"], name="sw") as iw:
        slot = b.add(b.mul(b.add(ih, v["pt"]), v["wp"]), b.add(iw, v["pl"]))
        b.store(slot, b.gep(where, [b.add(b.mul(ih, v["w"]), iw)]))


def _input_slot(blk: _Block, p):
    return blk.b.load(blk.b.gep(blk.where, [p]))


def _pack(blk: _Block, src, tile, channels) -> None:
    """The block's channels of every input pixel into its tile slot, as float32."""
    b, v = blk.b, blk.v
    module = b.module
    bytes_ty = ir.VectorType(I8, LANES)
    plane = b.mul(v["h"], v["w"])
    chan_mask = blk.lanes_below(channels)
    with b.if_else(b.icmp_signed("<", plane, const64(_SMALL))) as (small, large):
        with small, for_range(b, plane, name="pg") as p:
            value = b.call(_masked(module, "gather", bytes_ty), [
                _lane_ptrs(blk, b.gep(src, [p]), plane, I8), I32(1), chan_mask,
                ir.Constant(bytes_ty, None)])
            b.store(blk.widen(value), _slot(blk, tile, _input_slot(blk, p)), align=4)
        with large, for_range(b, plane, step=LANES, name="p0") as p0:
            pixels = blk.lanes_below(b.sub(plane, p0))
            load = _masked(module, "load", bytes_ty)
            rows = []
            for c in range(LANES):
                mask = b.select(b.icmp_signed("<", const64(c), channels), pixels,
                                ir.Constant(pixels.type, None))
                ptr = b.gep(src, [b.add(b.mul(const64(c), plane), p0)])
                rows.append(b.call(load, [b.bitcast(ptr, bytes_ty.as_pointer()), I32(1), mask,
                                          ir.Constant(bytes_ty, None)]))
            count = imin(b, b.sub(plane, p0), const64(LANES))
            for j, pixel in enumerate(transpose(b, rows)):
                with b.if_then(b.icmp_signed("<", const64(j), count)):
                    slot = _input_slot(blk, b.add(p0, const64(j)))
                    b.store(blk.widen(pixel), _slot(blk, tile, slot), align=4)


def _accumulate(blk: _Block, tile, wt, oh, ow, window: tuple):
    """The int32 sums of one output pixel: k window rows' FMA chains, merged pairwise
    (exact: see _Block.widen)."""
    b, v = blk.b, blk.v
    kh, kw = window
    vec = ir.VectorType(F32, LANES)
    fma = _declare(b.module, f"llvm.fma.v{LANES}f32", vec, [vec] * 3)
    corner = b.add(b.mul(b.mul(oh, v["sh"]), v["wp"]), b.mul(ow, v["sw"]))
    rows = []
    for i in range(kh):
        acc = ir.Constant(vec, None)
        line = b.add(corner, b.mul(const64(i), b.mul(v["dh"], v["wp"])))
        for j in range(kw):
            x = b.load(_slot(blk, tile, b.add(line, b.mul(const64(j), v["dw"]))), align=4)
            w = b.load(b.bitcast(b.gep(wt, [const64((i * kw + j) * LANES)]), vec.as_pointer()),
                       align=4)
            acc = b.call(fma, [x, w, acc])
        rows.append(acc)
    while len(rows) > 1:
        pairs = [b.fadd(a, c) for a, c in zip(rows[::2], rows[1::2])]
        rows = pairs + rows[len(pairs) * 2:]
    return b.fptosi(rows[0], ir.VectorType(I32, LANES))


def _outputs(blk: _Block, tile, wt, outs, epi: dict, window: tuple) -> None:
    """Every output pixel of the block: its sums, the epilogue, into its output slot."""
    b, v, t = blk.b, blk.v, blk.t
    slot = entry_alloca(b, ir.VectorType(I32, LANES), "acc")
    with for_range(b, v["oh"], name="oh") as oh, for_range(b, v["ow"], name="ow") as ow:
        b.store(_accumulate(blk, tile, wt, oh, ow, window), slot)
        q = b.add(b.mul(oh, v["ow"]), ow)
        dst = b.gep(outs, [b.mul(q, const64(LANES * blk.size))])
        emit_epilogue(b, t, dict(epi, c=dst, ldc=const64(0)), [[slot]])


def _unpack(blk: _Block, outs, dst, channels) -> None:
    """The output slots (a pixel's 16 channels each) back to the block's NCHW planes."""
    b, v = blk.b, blk.v
    module = b.module
    ty = blk.out_ty
    plane = b.mul(v["oh"], v["ow"])
    chan_mask = blk.lanes_below(channels)

    def slot(q):
        return b.bitcast(b.gep(outs, [b.mul(q, const64(LANES * blk.size))]), ty.as_pointer())
    typed = b.bitcast(dst, ty.element.as_pointer())
    with b.if_else(b.icmp_signed("<", plane, const64(_SMALL))) as (small, large):
        with small, for_range(b, plane, name="qs") as q:
            b.call(_masked(module, "scatter", ty), [
                b.load(slot(q), align=1), _lane_ptrs(blk, b.gep(typed, [q]), plane, ty.element),
                I32(1), chan_mask])
        with large, for_range(b, plane, step=LANES, name="q0") as q0:
            pixels = blk.lanes_below(b.sub(plane, q0))
            rows = [b.load(slot(b.add(q0, const64(j))), align=1) for j in range(LANES)]
            store = _masked(module, "store", ty)
            for c, values in enumerate(transpose(b, rows)):
                mask = b.select(b.icmp_signed("<", const64(c), channels), pixels,
                                ir.Constant(pixels.type, None))
                ptr = b.gep(typed, [b.add(b.mul(const64(c), plane), q0)])
                b.call(store, [values, b.bitcast(ptr, ty.as_pointer()), I32(1), mask])


def _fill_border(blk: _Block, tile) -> None:
    """Every tile slot = the zero point (the interior is overwritten by each block)."""
    b, v = blk.b, blk.v
    zero = b.sitofp(v["zero"], F32)
    vec = ir.VectorType(F32, LANES)
    first = b.insert_element(ir.Constant(vec, ir.Undefined), zero, I32(0))
    splat = b.shuffle_vector(first, ir.Constant(vec, ir.Undefined),
                             ir.Constant(ir.VectorType(I32, LANES), None))
    with for_range(b, b.mul(v["hp"], v["wp"]), name="z") as s:
        b.store(splat, _slot(blk, tile, s), align=4)


def _epilogue_args(b, v: dict, c0) -> dict:
    """emit_epilogue's arguments ("col": per-channel arrays from channel c0)."""
    def ptr(name, ty):
        return b.gep(b.inttoptr(v[name], ty.as_pointer()), [c0])

    def f32(name):
        return b.bitcast(b.trunc(v[name], I32), F32)
    return {"comp": ptr("comp", I32), "scale": ptr("scale", F32), "bias": ptr("bias", F32),
            "pscale": ptr("pscale", F32), "pbias": ptr("pbias", F32), "oscale": f32("oscale"),
            "s2": f32("s2"), "ozp": b.trunc(v["ozp"], I32), "z2": b.trunc(v["z2"], I32),
            "relu": b.icmp_signed("!=", v["relu"], const64(0)),
            "relu2": b.icmp_signed("!=", v["relu2"], const64(0))}


def _build(cfg: QGemmConfig, signed: bool, window: tuple) -> ir.Module:
    """``void (x, out, scratch, row)``: every image of the row, blocks of 16 channels."""
    symbol = _symbol(cfg, signed, window)
    module = ir.Module(name=symbol)
    t = IRTypes(module, cfg)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64] * 4), name=symbol)
    x_int, out_int, scratch_int, row_int = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    row = b.inttoptr(row_int, I64.as_pointer())
    v = {name: b.load(b.gep(row, [const64(i)]), name=name) for i, name in enumerate(FIELDS)}
    size = OUTS[cfg.out]
    blk = _Block(b, t, v, size, signed)
    tile = b.inttoptr(scratch_int, I8_PTR)
    outs = b.gep(tile, [v["tile_bytes"]])
    x, out = b.inttoptr(x_int, I8_PTR), b.inttoptr(out_int, I8_PTR)
    wt = b.inttoptr(v["wt"], F32.as_pointer())
    taps = window[0] * window[1]
    _fill_border(blk, tile)
    blk.where = b.bitcast(b.gep(tile, [v["where"]]), I64.as_pointer())
    _pixel_slots(blk, blk.where)
    plane_in, plane_out = b.mul(v["h"], v["w"]), b.mul(v["oh"], v["ow"])
    with for_range(b, v["images"], name="img") as img, \
            for_range(b, v["c"], step=LANES, name="c0") as c0:
        channels = imin(b, b.sub(v["c"], c0), const64(LANES))
        first = b.add(b.mul(img, v["c"]), c0)
        _pack(blk, b.gep(x, [b.mul(first, plane_in)]), tile, channels)
        epi = dict(_epilogue_args(b, v, c0), ncols=channels)
        _outputs(blk, tile, b.gep(wt, [b.mul(c0, const64(taps))]), outs, epi, window)
        _unpack(blk, outs, b.gep(out, [b.mul(b.mul(first, plane_out), const64(size))]),
                channels)
    b.ret_void()
    return module


@cache
def _function(cfg: QGemmConfig, signed: bool, window: tuple):
    symbol = _symbol(cfg, signed, window)
    library = get_jit().compile_generated(
        lambda: _build(cfg, signed, window), [symbol],
        (__name__, "msc.backend.kernels.int8.gemm", "msc.backend.kernels.dw_lanes",
         "msc.backend.llvm.loops"), (repr(cfg), signed, window))
    return library.cfunc(symbol, None, *[ctypes.c_int64] * 4)


def _f32_bits(value: float) -> int:
    return int(np.float32(value).view(np.uint32))


class LanesDepthwise:
    """The lanes form of a :class:`~.dwconv.QDepthwise` ``k`` (its weights, epilogue and
    attrs): task lists over images, kept per geometry by the caller."""

    def __init__(self, k):
        self.k = k
        taps = k.kh * k.kw
        blocks = -(-k.c // LANES)
        # [block][tap][16 channels] float32 (exact small integers): a vector per tap
        wt = np.zeros((blocks * LANES, taps), np.float32)
        wt[:k.c] = k.w
        self.wt = np.ascontiguousarray(wt.reshape(blocks, LANES, taps).transpose(0, 2, 1))
        cfg = QGemmConfig("col", k.epi.kind, False, k.epi.mid)
        self.size = OUTS[cfg.out]
        self.fn = _function(cfg, k.x_np == np.int8, (k.kh, k.kw))
        self.address = native_address(self.fn)

    def _row(self, images: int, dims: tuple) -> tuple[np.ndarray, int]:
        """(argument row, scratch bytes of one task)."""
        k = self.k
        h, w, oh, ow = dims
        (sh, sw), (dh, dw) = k.strides, k.dilation
        pt, pl = k.padding[0], k.padding[1]
        hp = max(h + pt, (oh - 1) * sh + (k.kh - 1) * dh + 1)
        wp = max(w + pl, (ow - 1) * sw + (k.kw - 1) * dw + 1)
        tile_bytes = hp * wp * 4 * LANES
        comp, scale, bias, oscale, ozp, relu, pscale, pbias, s2, z2, relu2 = k.epi.args
        row = np.array([images, k.c, h, w, sh, sw, dh, dw, pt, pl, oh, ow, hp, wp, k.zero,
                        self.wt.ctypes.data, comp, scale, bias, _f32_bits(oscale), ozp, relu,
                        pscale, pbias, _f32_bits(s2), z2, relu2, tile_bytes, 0], np.int64)
        outs = -(-oh * ow // LANES) * LANES * LANES * self.size
        row[-1] = tile_bytes + outs  # the slots of the input pixels, int64 each
        return row, -(-(tile_bytes + outs + 8 * h * w + 64) // 64) * 64

    def tasks(self, n: int, dims: tuple, parts: int) -> tuple[NativeTasks, int]:
        """(task list over ``parts`` ranges of images launched with bases (x, out,
        scratch), scratch bytes in all)."""
        h, w, oh, ow = dims
        k = self.k
        ranges = split_range(n, parts)
        tasks = NativeTasks(len(ranges))
        tasks.records[:, 0] = self.address
        rows, at = [], 0
        itemsize = np.dtype(k.x_np).itemsize
        for t, (i0, i1) in enumerate(ranges):
            row, nbytes = self._row(i1 - i0, dims)
            rows.append(row)
            tasks.records[t, 1:5] = (i0 * k.c * h * w * itemsize,
                                     i0 * k.c * oh * ow * self.size, at, row.ctypes.data)
            at += nbytes
        tasks.keep = rows
        return tasks, at
