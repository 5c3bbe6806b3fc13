"""Native "kernel" facts for nn.max_pool2d and nn.avg_pool2d on NCHW float32 data.

Each output row is accumulated window row by window row: for every (kh, kw) the valid output
columns [lo, hi) read one (strided) run of the input row, so the inner loop is a 16-lane
masked vector max / add with no bounds checks (stride 1 and 2 are vectorized, other strides
run scalar). Average pooling multiplies by a per-output reciprocal window count computed once
per input size in numpy, which covers both count_include_pad modes and ceil_mode::

    attach("nn.max_pool2d", "kernel", Pool2dFact("max"))
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np
from llvmlite import ir

from ...errors import ShapeError
from ...relax.op.infer import pool_out_dim
from ...relax.op.registry import attach
from ..dispatch import Kernel, KernelFact, Site
from ..jit import get_jit
from ..loops import F32, F32_PTR, I64, const64, entry_alloca, for_range
from .dense import F32 as F32_DTYPE
from .dense import as_f32
from .layout import VecOps, valid_range

__all__ = ["Pool2dFact", "window_kernels"]

_MODES = ("max", "avg", "dwconv")
_ARGS = ("planes", "C", "mult", "H", "W", "KH", "KW", "sh", "sw", "ph", "pw", "dh", "dw", "OH",
         "OW", "relu")


def pair(v) -> tuple:
    v = tuple(int(x) for x in (v if isinstance(v, (tuple, list)) else (v,)))
    return v * 2 if len(v) == 1 else v[:2]


def pad4(v) -> tuple:
    """(top, left, bottom, right) from TVM's 1, 2 or 4 padding values."""
    v = tuple(int(x) for x in (v if isinstance(v, (tuple, list)) else (v,)))
    if len(v) == 1:
        return v * 4
    if len(v) == 2:
        return v * 2
    return v


def sane_window(strides, dilation, padding, kernel=(1, 1)) -> bool:
    """Attrs the native window loops can take (anything else would divide by zero or index
    outside the loops' assumptions): positive strides, dilations and kernel, padding >= 0."""
    return (len(strides) == len(dilation) == len(kernel) == 2 and len(padding) == 4
            and min(*strides, *dilation, *kernel) >= 1 and min(padding) >= 0)


def _symbol(mode: str) -> str:
    return f"msc_window2d_{mode}_nchw_f32"


def _gep(b, ptr, offset):
    return b.gep(ptr, [offset], inbounds=True)


def _build(module: ir.Module, mode: str) -> None:
    """void (x, out, aux, w, bias, *_ARGS) for one mode, over ``planes`` output planes.

    Output plane p reads input plane (p // (C*mult)) * C + (p % (C*mult)) // mult (mult > 1
    only for depthwise convs with a channel multiplier). max: -inf start, max; avg: sum then
    times ``aux`` (1 / window count per output); dwconv: bias start, += w * x, then relu.
    """
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [F32_PTR] * 5 + [I64] * len(_ARGS)),
                     name=_symbol(mode))
    x, out, aux, w, bias = fn.args[:5]
    for arg in fn.args[:5]:
        arg.add_attribute("noalias")
    g = dict(zip(_ARGS, fn.args[5:]))
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    vec = VecOps(b)
    plane_in, plane_out = b.mul(g["H"], g["W"]), b.mul(g["OH"], g["OW"])
    channels_out = b.mul(g["C"], g["mult"])
    taps = b.mul(g["KH"], g["KW"])
    ranges = _column_ranges(b, g)
    with for_range(b, g["planes"], name="p") as p:
        co = b.srem(p, channels_out)
        src_plane = b.add(b.mul(b.sdiv(p, channels_out), g["C"]), b.sdiv(co, g["mult"]))
        src_base = _gep(b, x, b.mul(src_plane, plane_in))
        weights = _gep(b, w, b.mul(co, taps))
        if mode == "max":
            init = vec.splat(ir.Constant(F32, float("-inf")))
        elif mode == "avg":
            init = vec.zero
        else:
            init = vec.splat(b.load(_gep(b, bias, co)))
        unit = b.icmp_signed("==", g["sw"], const64(1))
        two = b.icmp_signed("==", g["sw"], const64(2))
        with for_range(b, g["OH"], name="oh") as oh:
            row = _gep(b, out, b.add(b.mul(p, plane_out), b.mul(oh, g["OW"])))
            with b.if_else(b.or_(unit, two)) as (in_registers, in_memory):
                with in_registers, b.if_else(unit) as (stride1, stride2):
                    for stride, block in ((1, stride1), (2, stride2)):
                        with block:
                            _register_row(b, vec, g, src_base, row, oh, mode, init, weights,
                                          ranges, stride)
                with in_memory:
                    with vec.loop(g["OW"]) as (t, mask):
                        vec.store(init, _gep(b, row, t), mask)
                    with for_range(b, g["KH"], name="kh") as kh:
                        ih = b.add(b.sub(b.mul(oh, g["sh"]), g["ph"]), b.mul(kh, g["dh"]))
                        with b.if_then(b.icmp_unsigned("<", ih, g["H"])):
                            src_row = _gep(b, src_base, b.mul(ih, g["W"]))
                            _window_row(b, vec, g, src_row, row, mode, weights, kh, ranges)
            _finish_row(b, vec, g, row, mode, aux, oh)
    b.ret_void()


def _register_row(b, vec, g, src_base, row, oh, mode, init, weights, ranges, stride) -> None:
    """Column stride 1 or 2 (a Python constant): 16 output columns at a time, the window
    summed in a register (a masked load per tap, one store per vector)."""
    pad_value = vec.splat(ir.Constant(F32, float("-inf"))) if mode == "max" else vec.zero
    with vec.loop(g["OW"]) as (t, mask):
        acc = entry_alloca(b, vec.ty, "acc")
        b.store(init, acc)
        with for_range(b, g["KH"], name="kh") as kh:
            ih = b.add(b.sub(b.mul(oh, g["sh"]), g["ph"]), b.mul(kh, g["dh"]))
            with b.if_then(b.icmp_unsigned("<", ih, g["H"])):
                src_row = _gep(b, src_base, b.mul(ih, g["W"]))
                with for_range(b, g["KW"], name="kw") as kw:
                    lo, hi = (b.sub(b.load(_gep(b, arr, kw)), t) for arr in ranges)
                    lanes = b.and_(mask, vec.between(lo, hi))
                    off = b.sub(b.mul(kw, g["dw"]), g["pw"])
                    start = _gep(b, src_row, b.add(b.mul(t, const64(stride)), off))
                    value = vec.load(start, lanes, pad_value) if stride == 1 else \
                        vec.load_even_masked(start, lanes, pad_value)
                    tap = _tap(b, weights, kh, kw, g) if mode == "dwconv" else None
                    b.store(_combine(b, vec, mode, b.load(acc), value, tap), acc)
        vec.store(b.load(acc), _gep(b, row, t), mask)


def _tap(b, weights, kh, kw, g):
    return b.load(_gep(b, weights, b.add(b.mul(kh, g["KW"]), kw)))


def _combine(b, vec, mode, acc, value, tap):
    if mode == "max":
        return b.select(b.fcmp_unordered(">", value, acc), value, acc)  # NaN wins
    if mode == "avg":
        return b.fadd(acc, value)
    scalar = isinstance(value.type, ir.FloatType)
    return b.fadd(acc, b.fmul(value, tap if scalar else vec.splat(tap)))


def _finish_row(b, vec, g, row, mode, aux, oh) -> None:
    if mode == "avg":
        inv_row = _gep(b, aux, b.mul(oh, g["OW"]))
        with vec.loop(g["OW"]) as (t, mask):
            value = b.fmul(vec.load(_gep(b, row, t), mask), vec.load(_gep(b, inv_row, t), mask))
            vec.store(value, _gep(b, row, t), mask)
    elif mode == "dwconv":
        relu = b.icmp_signed("!=", g["relu"], const64(0))
        with b.if_then(relu), vec.loop(g["OW"]) as (t, mask):
            value = vec.load(_gep(b, row, t), mask)
            negative = b.fcmp_ordered("<", value, vec.zero)
            vec.store(b.select(negative, vec.zero, value), _gep(b, row, t), mask)


def _column_ranges(b, g) -> tuple:
    """Stack arrays lo[kw], hi[kw]: the valid output columns of each kernel column, computed
    once per call (their divisions would otherwise run for every output row)."""
    lo_arr, hi_arr = b.alloca(I64, size=g["KW"]), b.alloca(I64, size=g["KW"])
    with for_range(b, g["KW"], name="kw0") as kw:
        off = b.sub(b.mul(kw, g["dw"]), g["pw"])
        lo, hi = valid_range(b, off, g["sw"], g["W"], g["OW"])
        b.store(lo, _gep(b, lo_arr, kw))
        b.store(hi, _gep(b, hi_arr, kw))
    return lo_arr, hi_arr


def _window_row(b, vec, g, src_row, row, mode, weights, kh, ranges) -> None:
    """row[ow] (max|+|w*)= src_row[ow * sw + kw * dw - pw] over kw, for the valid ow only."""
    with for_range(b, g["KW"], name="kw") as kw:
        off = b.sub(b.mul(kw, g["dw"]), g["pw"])
        lo, hi = (b.load(_gep(b, arr, kw)) for arr in ranges)
        src = _gep(b, src_row, b.add(b.mul(lo, g["sw"]), off))
        dst, count, stride = _gep(b, row, lo), b.sub(hi, lo), g["sw"]
        tap = _tap(b, weights, kh, kw, g) if mode == "dwconv" else None

        def combine(acc, value):
            return _combine(b, vec, mode, acc, value, tap)

        with b.if_else(b.icmp_signed("==", stride, const64(1))) as (unit, other):
            with unit, vec.loop(count) as (t, mask):
                at = _gep(b, dst, t)
                vec.store(combine(vec.load(at, mask), vec.load(_gep(b, src, t), mask)), at, mask)
            with other:
                two = b.icmp_signed("==", stride, const64(2))
                with b.if_else(two) as (even, scalar):
                    with even, vec.loop(count) as (t, mask):
                        at = _gep(b, dst, t)
                        value = vec.load_even(_gep(b, src, b.mul(t, const64(2))),
                                              b.sub(count, t))
                        vec.store(combine(vec.load(at, mask), value), at, mask)
                    with scalar, for_range(b, count, name="s") as t:
                        at = _gep(b, dst, t)
                        value = b.load(_gep(b, src, b.mul(t, stride)))
                        b.store(combine(b.load(at), value), at)


@cache
def window_kernels() -> dict:
    """mode -> ctypes entry ``(x, out, aux, w, bias, *_ARGS)``."""
    module = ir.Module(name="msc_window2d_nchw_f32")
    for mode in _MODES:
        _build(module, mode)
    library = get_jit().compile(module, [_symbol(m) for m in _MODES])
    return {m: library.cfunc(_symbol(m), None, *(ctypes.c_void_p,) * 5,
                             *(ctypes.c_int64,) * len(_ARGS)) for m in _MODES}


class _Pool2dKernel(Kernel):
    inputs = (0,)

    def __init__(self, op: str, kind: str, attrs: dict):
        self.op, self.avg = op, kind == "avg"
        self.kernel, self.strides = attrs["pool_size"], attrs["strides"]
        self.dilation, self.padding = attrs["dilation"], attrs["padding"]
        self.ceil, self.include_pad = attrs["ceil_mode"], attrs["count_include_pad"]
        self.run = window_kernels()[kind]
        self._inv: dict = {}

    def out_dims(self, h: int, w: int) -> tuple:
        top, left, bottom, right = self.padding
        return tuple(int(pool_out_dim(size, k, s, b, a, d, self.ceil)) for size, k, s, b, a, d in
                     ((h, self.kernel[0], self.strides[0], top, bottom, self.dilation[0]),
                      (w, self.kernel[1], self.strides[1], left, right, self.dilation[1])))

    def __call__(self, x, out):
        x = as_f32(x, "data", self.op)
        if x.ndim != 4:
            raise ShapeError(f"expects NCHW data, got {x.shape}", op=self.op, param="data")
        n, c, h, w = x.shape
        oh, ow = self.out_dims(h, w)
        want = (n, c, oh, ow)
        if out.shape != want or out.dtype != F32_DTYPE or not out.flags.c_contiguous:
            raise ShapeError(f"output buffer {out.shape}, expected {want}", op=self.op,
                             param="out")
        if out.size:
            aux = self._inverse_counts(h, w, oh, ow).ctypes.data if self.avg else 0
            self.run(x.ctypes.data, out.ctypes.data, aux, 0, 0, n * c, c, 1, h, w,
                     *self.kernel, *self.strides, *self.padding[:2], *self.dilation, oh, ow, 0)
        return out

    def _inverse_counts(self, h, w, oh, ow) -> np.ndarray:
        inv = self._inv.get((h, w))
        if inv is None:
            counts = [self._axis_counts(size, o, axis) for axis, (size, o) in
                      enumerate(((h, oh), (w, ow)))]
            total = np.outer(*counts).astype(np.float32)
            inv = self._inv[(h, w)] = np.ascontiguousarray(1.0 / np.maximum(total, 1.0))
        return inv

    def _axis_counts(self, size: int, out: int, axis: int) -> np.ndarray:
        """Window positions counted per output: inside the input, or inside the explicitly
        padded input when count_include_pad (never the extra ceil_mode tail)."""
        before, after = self.padding[axis], self.padding[axis + 2]
        lo, hi = (-before, size + after) if self.include_pad else (0, size)
        start = np.arange(out) * self.strides[axis] - before
        taps = start[:, None] + np.arange(self.kernel[axis]) * self.dilation[axis]
        return ((taps >= lo) & (taps < hi)).sum(axis=1)


def _attrs(site: Site) -> dict:
    return {"pool_size": pair(site.attr("pool_size", 1)),
            "strides": pair(site.attr("strides", 1)),
            "dilation": pair(site.attr("dilation", 1)),
            "padding": pad4(site.attr("padding", 0)),
            "ceil_mode": bool(site.attr("ceil_mode", False)),
            "count_include_pad": bool(site.attr("count_include_pad", False))}


class Pool2dFact(KernelFact):
    def __init__(self, kind: str):
        self.kind = kind

    def match(self, site: Site) -> bool:
        x = site.tensor(0)
        layout = site.attr("layout") or "NCHW"
        if not (x is not None and x.dtype == "float32" and x.ndim == 4 and layout == "NCHW"
                and (site.attr("out_layout") or layout) == "NCHW"):
            return False
        a = _attrs(site)
        return sane_window(a["strides"], a["dilation"], a["padding"], a["pool_size"])

    def make(self, site: Site) -> Kernel:
        return _Pool2dKernel(site.op, self.kind, _attrs(site))


attach("nn.max_pool2d", "kernel", Pool2dFact("max"))
attach("nn.avg_pool2d", "kernel", Pool2dFact("avg"))
