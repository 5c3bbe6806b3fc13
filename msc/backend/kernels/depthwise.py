"""3x3 depthwise convolution on NCHW float32 planes, read in place (no padded copy).

The window kernel of pool.py pads every plane into scratch and keeps many per-plane values
live; on the small planes of ShuffleNet / MobileNet (7x7 to 28x28, hundreds of channels) its
per-plane setup spills and dominates: 544 planes of 7x7 took ~95 us, 5 GFLOP/s, where
onnxruntime's NCHWc kernel takes ~14 us. Here each output row is 16-column vectors, each of
the 9 taps one masked load of the input row (lanes whose input column or row falls in the
padding are masked off, so they read nothing and add zero), with one partial sum per window
row (three short FMA chains, not one of nine). The column masks depend only on the vector's
first column, so they are made once per column block and reused down the plane. Stride 2
reads the even lanes of two masked loads. The entry takes pool.py's window arguments, so
conv.py's threading (tasks of channel ranges) is the same for both::

    kernel = depthwise_3x3(stride)          # a pool._Window, or None for other strides
    kernel(x_ptr, out_ptr, 0, w_ptr, bias_ptr, *ints)   # ints: pool._ARGS
"""

from __future__ import annotations

import ctypes
from contextlib import contextmanager
from functools import cache

from llvmlite import ir

from ..llvm.jit import get_jit
from ..llvm.loops import F32_PTR, I64, const64, for_range, imin
from .layout import VecOps
from .pool import _ARGS, _PLANE_ARGS, _Window

__all__ = ["depthwise_3x3", "takes_depthwise_3x3"]

_TAPS = 3
_STRIDES = (1, 2)


def takes_depthwise_3x3(kh: int, kw: int, strides: tuple, dilation: tuple) -> bool:
    """Whether :func:`depthwise_3x3` runs this window (any padding, channel multiplier)."""
    return (kh, kw) == (_TAPS, _TAPS) and tuple(dilation) == (1, 1) and \
        strides[0] == strides[1] and strides[0] in _STRIDES


def _symbol(stride: int) -> str:
    return f"msc_depthwise3x3_s{stride}_nchw_f32"


def _ceil_div(b, a, stride: int):
    """ceil(a / stride) for a signed ``a`` and stride 1 or 2 (an arithmetic shift)."""
    if stride == 1:
        return a
    return b.neg(b.ashr(b.neg(a), const64(stride - 1)))


def _build(module: ir.Module, stride: int) -> None:
    """void (x, out, aux, w, bias, tmp, int64 [*pool._ARGS, *pool._PLANE_ARGS]); aux and
    tmp are unused (the window kernel's signature)."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [F32_PTR] * 6 + [I64.as_pointer()]),
                     name=_symbol(stride))
    x, out, _, w, bias, _ = fn.args[:6]
    for arg in fn.args[:6]:
        arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    g = {name: b.load(b.gep(fn.args[6], [const64(i)]))
         for i, name in enumerate(_ARGS + _PLANE_ARGS)}
    vec = VecOps(b)
    fma = module.globals.get("llvm.fma.v16f32") or ir.Function(
        module, ir.FunctionType(vec.ty, [vec.ty] * 3), "llvm.fma.v16f32")
    relu = vec.splat(b.icmp_signed("!=", g["relu"], const64(0)))
    args = (b, vec, fma, g, x, out, w, bias, relu)
    if stride == 1:
        # rows as wide as the input's and narrower than a vector: one flat run of positions
        flat_ok = b.and_(b.icmp_signed("==", g["OW"], g["W"]),
                         b.icmp_signed("<", g["W"], const64(VecOps.LANES)))
        with b.if_else(flat_ok) as (flat, rows):
            with flat:
                _flat_planes(*args)
            with rows:
                _row_planes(stride, *args)
    else:
        _row_planes(stride, *args)
    b.ret_void()


@contextmanager
def _planes(b, g, x):
    """Yields (output plane p, its input plane pointer, output channel) for every plane, as
    nested loops over images, input channels and the channel multiplier: no division per
    plane (a 64-bit idiv costs more than a 7x7 plane's FMAs). ``planes`` is a multiple of
    C * mult (whole images, or one image's channel range per task)."""
    per_image = b.mul(g["C"], g["mult"])
    plane_in = b.mul(g["H"], g["W"])
    with for_range(b, b.sdiv(g["planes"], per_image), name="img") as img, \
            for_range(b, g["C"], name="ci") as ci, for_range(b, g["mult"], name="m") as m:
        src_plane = b.add(b.mul(img, g["C"]), ci)
        co = b.add(b.mul(ci, g["mult"]), m)
        p = b.add(b.mul(img, per_image), co)
        yield p, b.gep(x, [b.mul(src_plane, plane_in)]), co


def _row_planes(stride, b, vec, fma, g, x, out, w, bias, relu) -> None:
    """Any padding: per plane, 16-column blocks, rows inner."""
    plane_out = b.mul(g["OH"], g["OW"])
    with _planes(b, g, x) as (p, src, co):
        plane = _Plane(b, vec, fma, g, stride)
        plane.src = src
        plane.dst = b.gep(out, [b.mul(p, plane_out)])
        plane.weights, plane.start = _weights(b, vec, w, bias, co)
        plane.relu = relu
        with for_range(b, g["OW"], step=VecOps.LANES, name="ow0") as ow0:
            plane.column_block(ow0)


def _weights(b, vec, w, bias, co):
    taps = b.mul(co, const64(_TAPS * _TAPS))
    return ([vec.splat(b.load(b.gep(w, [b.add(taps, const64(t))])))
             for t in range(_TAPS * _TAPS)], vec.splat(b.load(b.gep(bias, [co]))))


def _flat_planes(b, vec, fma, g, x, out, w, bias, relu) -> None:
    """Stride 1 with OW == W: output position q = oh*W + ow reads input q + (kh-ph)*W +
    (kw-pw), so 16 consecutive positions are one masked load per tap whatever the row
    breaks (a 7x7 plane is 4 vectors, not 7 rows of 7 lanes). The 9 tap masks of a block
    depend only on its positions: made once per block, then every plane runs."""
    plane = b.mul(g["OH"], g["OW"])
    i32 = ir.IntType(32)
    lanes = ir.Constant(ir.VectorType(i32, VecOps.LANES), list(range(VecOps.LANES)))
    f32v = ir.VectorType(ir.FloatType(), VecOps.LANES)
    with for_range(b, plane, step=VecOps.LANES, name="q0") as q0:
        q = b.add(vec.splat(b.trunc(q0, i32)), lanes)
        # oh = q / W through float (exact for planes far below 2^22 positions)
        inv = vec.splat(b.fdiv(ir.Constant(ir.FloatType(), 1.0), b.sitofp(g["W"], ir.FloatType())))
        oh = b.fptosi(b.fmul(b.fadd(b.sitofp(q, f32v), vec.splat(ir.Constant(ir.FloatType(), 0.5))),
                             inv), q.type)
        ow = b.sub(q, b.mul(oh, vec.splat(b.trunc(g["W"], i32))))
        inside = b.icmp_signed("<", q, vec.splat(b.trunc(plane, i32)))
        masks, offsets = [], []
        for kh in range(_TAPS):
            r = b.add(oh, vec.splat(b.trunc(b.sub(const64(kh), g["ph"]), i32)))
            row_ok = b.icmp_unsigned("<", r, vec.splat(b.trunc(g["H"], i32)))
            for kw in range(_TAPS):
                c = b.add(ow, vec.splat(b.trunc(b.sub(const64(kw), g["pw"]), i32)))
                col_ok = b.icmp_unsigned("<", c, vec.splat(b.trunc(g["W"], i32)))
                masks.append(b.and_(inside, b.and_(row_ok, col_ok)))
                offsets.append(b.add(q0, b.add(b.mul(b.sub(const64(kh), g["ph"]), g["W"]),
                                               b.sub(const64(kw), g["pw"]))))
        with _planes(b, g, x) as (p, src, co):
            weights, acc0 = _weights(b, vec, w, bias, co)
            partial = []
            for kh in range(_TAPS):
                acc = acc0 if kh == 0 else vec.zero
                for kw in range(_TAPS):
                    t = kh * _TAPS + kw
                    value = vec.load(b.gep(src, [offsets[t]]), masks[t])
                    acc = b.call(fma, [value, weights[t], acc])
                partial.append(acc)
            acc = b.fadd(b.fadd(partial[0], partial[1]), partial[2])
            clamp = b.and_(relu, b.fcmp_ordered("<", acc, vec.zero))  # relu keeps NaN
            acc = b.select(clamp, vec.zero, acc)
            vec.store(acc, b.gep(out, [b.add(b.mul(p, plane), q0)]), inside)


class _Plane:
    """One output plane, a 16-column block at a time, rows inner."""

    def __init__(self, b, vec, fma, g, stride):
        self.b, self.vec, self.fma, self.g, self.stride = b, vec, fma, g, stride

    def column_block(self, ow0) -> None:
        b, g, vec, s = self.b, self.g, self.vec, self.stride
        left = b.sub(g["OW"], ow0)
        out_mask = vec.mask(left)
        cols, masks = [], []
        for kw in range(_TAPS):
            # input column of lane i: base + s*i; lanes outside [0, W) read nothing
            base = b.sub(b.add(b.mul(ow0, const64(s)), const64(kw)), g["pw"])
            lo = _ceil_div(b, b.neg(base), s)
            hi = imin(b, _ceil_div(b, b.sub(g["W"], base), s), left)
            cols.append(base)
            masks.append(vec.between(lo, hi))
        with for_range(b, g["OH"], name="oh") as oh:
            acc = self._row(oh, cols, masks)
            clamp = b.and_(self.relu, b.fcmp_ordered("<", acc, vec.zero))  # relu keeps NaN
            acc = b.select(clamp, vec.zero, acc)
            dst = b.gep(self.dst, [b.add(b.mul(oh, g["OW"]), ow0)])
            vec.store(acc, dst, out_mask)

    def _row(self, oh, cols, masks):
        b, g, vec, s = self.b, self.g, self.vec, self.stride
        partial = []
        for kh in range(_TAPS):
            r = b.sub(b.add(b.mul(oh, const64(s)), const64(kh)), g["ph"])
            inside = b.icmp_unsigned("<", r, g["H"])  # rows in the padding add nothing
            row = b.gep(self.src, [b.mul(b.select(inside, r, const64(0)), g["W"])])
            valid = vec.splat(inside)
            acc = self.start if kh == 0 else vec.zero
            for kw in range(_TAPS):
                mask = b.and_(masks[kw], valid)
                ptr = b.gep(row, [cols[kw]])
                value = vec.load(ptr, mask) if s == 1 else \
                    vec.load_even_masked(ptr, mask, vec.zero)
                acc = b.call(self.fma, [value, self.weights[kh * _TAPS + kw], acc])
            partial.append(acc)
        return b.fadd(b.fadd(partial[0], partial[1]), partial[2])


@cache
def _library():
    def build():
        module = ir.Module(name="msc_depthwise3x3_nchw_f32")
        for stride in _STRIDES:
            _build(module, stride)
        return module

    return get_jit().compile_generated(
        build, [_symbol(s) for s in _STRIDES],
        (__name__, "msc.backend.kernels.layout", "msc.backend.llvm.loops"), _STRIDES)


@cache
def depthwise_3x3(stride: int) -> _Window | None:
    """The entry for ``stride`` (1 or 2), wrapped like pool.window_kernels()'s, else None."""
    if stride not in _STRIDES:
        return None
    raw = _library().cfunc(_symbol(stride), None, *(ctypes.c_void_p,) * 7)
    return _Window(raw)
