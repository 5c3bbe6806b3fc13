"""Native data-movement kernels for the GEMM-based ops: transpose, NHWC im2col, scratch space.

Convolutions run as GEMMs with pixels on the M side and the packed weight on the B side
(shared/notes/llvmlite-kernels.md: that orientation reaches the GEMM's full speed). These
kernels move activations into that form::

    transpose(src, dst, batch, rows, cols)      # dst[b, c, r] = src[b, r, c]   (NCHW <-> NHWC)
    im2col(x_hwc, a, geometry)                  # a[oh*OW + ow, (kh*KW + kw)*Cg + c]

``scratch(nbytes...)`` hands out 64-byte aligned float32 work arrays from one growing,
thread-local arena: kernels run one at a time per thread, so every kernel can share it.
Callers validate shapes; these functions trust their (checked) arguments.
"""

from __future__ import annotations

import ctypes
import threading
from contextlib import contextmanager
from functools import cache

import numpy as np
from llvmlite import ir

from ..jit import get_jit
from ..loops import F32, F32_PTR, I64, const64, for_range, imin

__all__ = ["NR", "VecOps", "im2col", "im2col_pack_fn", "scratch", "transpose", "valid_range"]

_TILE = 16  # transpose tile: a 16x16 float block (1 KiB) stays in L1 for both sides
_SYMBOLS = ("msc_transpose_f32_t16", "msc_im2col_nhwc_f32", "msc_im2col_pack_nchw_f32")
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
        with for_range(b, rows, step=_TILE, name="r0") as r0:
            rmax = imin(b, b.sub(rows, r0), _TILE)
            with for_range(b, cols, step=_TILE, name="c0") as c0:
                cmax = imin(b, b.sub(cols, c0), _TILE)
                with for_range(b, cmax, name="c") as c:
                    col = b.add(c0, c)
                    drow = _gep(b, d, b.add(b.mul(col, rows), r0))
                    with for_range(b, rmax, name="r") as r:
                        v = b.load(_gep(b, s, b.add(b.mul(b.add(r0, r), cols), col)))
                        b.store(v, _gep(b, drow, r))
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


_PACK_GEOMETRY = ("C", "H", "W", "KH", "KW", "sh", "sw", "ph", "pw", "dh", "dw", "OH", "OW",
                  "K", "ones", "p_lo", "p_hi")
NR = 64  # panel width of the packed GEMM operand (16 lanes x 4 vectors)


def _build_im2col_pack(module: ir.Module) -> None:
    """void (x, panels, *geometry): NCHW patches straight into the GEMM's packed-B layout.

    Only columns p_lo <= p < p_hi of the [K, P] patch matrix are packed (p_lo a multiple of
    64): column p = oh*OW + ow goes to panel (p - p_lo) // 64, lane p % 64; row
    k = (c*KH + kh)*KW + kw. Each output row splits at panel boundaries and at the padding
    edges into runs of zeros and one strided copy, so the inner loops vectorize. With
    ``ones`` set, row K-1 is all ones (a bias column on the weight side).
    """
    fn = _declare(module, _SYMBOLS[2], ir.VoidType(),
                  [F32_PTR, F32_PTR] + [I64] * len(_PACK_GEOMETRY))
    x, bp = fn.args[:2]
    x.add_attribute("noalias")
    bp.add_attribute("noalias")
    g = dict(zip(_PACK_GEOMETRY, fn.args[2:]))
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    one, ow_n = ir.Constant(F32, 1.0), g["OW"]
    panel_stride = b.mul(g["K"], const64(NR))
    with for_range(b, g["C"], name="c") as c, for_range(b, g["KH"], name="kh") as kh, \
            for_range(b, g["KW"], name="kw") as kw:
        k = b.add(b.mul(b.add(b.mul(c, g["KH"]), kh), g["KW"]), kw)
        kbase = _gep(b, bp, b.mul(k, const64(NR)))
        off = b.sub(b.mul(kw, g["dw"]), g["pw"])  # iw = ow * sw + off
        lo, hi = valid_range(b, off, g["sw"], g["W"], ow_n)
        oh_lo = b.sdiv(g["p_lo"], ow_n)
        oh_hi = b.add(b.sdiv(b.sub(g["p_hi"], const64(1)), ow_n), const64(1))
        with for_range(b, oh_hi, start=oh_lo, name="oh") as oh:
            ih = b.add(b.sub(b.mul(oh, g["sh"]), g["ph"]), b.mul(kh, g["dh"]))
            row_ok = b.icmp_unsigned("<", ih, g["H"])
            lo_r, hi_r = b.select(row_ok, lo, ow_n), b.select(row_ok, hi, ow_n)
            ih_safe = b.select(row_ok, ih, const64(0))
            src = _gep(b, x, b.add(b.mul(b.add(b.mul(c, g["H"]), ih_safe), g["W"]), off))
            rel0 = b.sub(b.mul(oh, ow_n), g["p_lo"])  # p - p_lo at ow = 0
            ow_a = _max(b, b.sub(const64(0), rel0), const64(0))
            ow_b = imin(b, b.sub(b.sub(g["p_hi"], g["p_lo"]), rel0), ow_n)
            _pack_row(b, kbase, panel_stride, src, rel0, ow_a, ow_b, lo_r, hi_r, g["sw"])
    with b.if_then(b.icmp_signed("!=", g["ones"], const64(0))):
        last = _gep(b, bp, b.mul(b.sub(g["K"], const64(1)), const64(NR)))
        span = b.sub(g["p_hi"], g["p_lo"])
        panels = b.sdiv(b.add(span, const64(NR - 1)), const64(NR))
        with for_range(b, panels, name="q") as q, for_range(b, const64(NR), name="l") as lane:
            b.store(one, _gep(b, last, b.add(b.mul(q, panel_stride), lane)))
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


def _pack_row(b, kbase, panel_stride, src, rel0, ow_a, ow_b, lo, hi, stride) -> None:
    """Write src[ow * stride] (zeros outside [lo, hi)) for ow in [ow_a, ow_b) to the panels;
    ``rel0`` is the packed column of ow = 0."""
    first = b.ashr(b.add(rel0, ow_a), const64(6))
    last = b.ashr(b.add(rel0, b.sub(ow_b, const64(1))), const64(6))
    vec = VecOps(b)
    with for_range(b, b.add(last, const64(1)), start=first, name="q") as q:
        q0 = b.sub(b.mul(q, const64(NR)), rel0)                   # ow of the panel's lane 0
        a, e = _max(b, q0, ow_a), imin(b, b.add(q0, const64(NR)), ow_b)
        dst = _gep(b, kbase, b.add(b.mul(q, panel_stride), b.sub(a, q0)))
        z_end = imin(b, e, _max(b, a, lo))
        c_end = imin(b, e, _max(b, z_end, hi))
        vec.fill(dst, b.sub(z_end, a), None)
        unit = b.icmp_signed("==", stride, const64(1))
        with b.if_else(unit) as (contiguous, strided):
            with contiguous:  # the common case: masked 16-lane copies, no scalar tail
                vec.fill(_gep(b, dst, b.sub(z_end, a)), b.sub(c_end, z_end), _gep(b, src, z_end))
            with strided:
                two = b.icmp_signed("==", stride, const64(2))
                with b.if_else(two) as (even, other):
                    with even:  # stride 2: two loads and a shuffle per 16 lanes
                        start, count = _gep(b, src, b.mul(z_end, const64(2))), b.sub(c_end, z_end)
                        out = _gep(b, dst, b.sub(z_end, a))
                        with vec.loop(count) as (t, mask):
                            value = vec.load_even(_gep(b, start, b.mul(t, const64(2))),
                                                  b.sub(count, t))
                            vec.store(value, _gep(b, out, t), mask)
                    with other, for_range(b, c_end, start=z_end, name="t") as t:
                        b.store(b.load(_gep(b, src, b.mul(t, stride))),
                                _gep(b, dst, b.sub(t, a)))
        vec.fill(_gep(b, dst, b.sub(c_end, a)), b.sub(e, c_end), None)


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


def _intrinsic(module, name, ret, args):
    existing = module.globals.get(name)
    return existing if existing is not None else _declare(module, name, ret, args)


def _max(b, x, y):
    return b.select(b.icmp_signed(">", x, y), x, y)


@cache
def _library():
    module = ir.Module(name="msc_layout_f32")
    _build_transpose(module)
    _build_im2col(module)
    _build_im2col_pack(module)
    lib = get_jit().compile(module, list(_SYMBOLS))
    ptr = ctypes.c_void_p
    return (lib.cfunc(_SYMBOLS[0], None, ptr, ptr, *(ctypes.c_int64,) * 3),
            lib.cfunc(_SYMBOLS[1], None, ptr, ptr, *(ctypes.c_int64,) * len(_GEOMETRY)),
            lib.cfunc(_SYMBOLS[2], None, ptr, ptr, *(ctypes.c_int64,) * len(_PACK_GEOMETRY)))


def im2col_pack_fn():
    """``(x_chw, panels, C, H, W, KH, KW, sh, sw, ph, pw, dh, dw, OH, OW, K, ones, p_lo,
    p_hi)``."""
    return _library()[2]


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


# ---------------------------------------------------------------------------------------------
# Scratch arena.

_ALIGN = 64
_local = threading.local()


def scratch(*sizes: int) -> list[np.ndarray]:
    """float32 work arrays of the given element counts, 64-byte aligned, from the arena.

    The arrays are only valid until the next ``scratch`` call on this thread.
    """
    padded = [-(-s // 16) * 16 for s in sizes]  # 16 floats = 64 bytes
    total = sum(padded)
    arena = getattr(_local, "arena", None)
    if arena is None or arena.size < total:
        raw = np.empty(total + _ALIGN // 4, np.float32)
        start = (-raw.ctypes.data % _ALIGN) // 4
        arena = _local.arena = raw[start: start + total]
    out, offset = [], 0
    for size, pad in zip(sizes, padded):
        out.append(arena[offset: offset + size])
        offset += pad
    return out
