"""int8 depthwise conv2d (NCHW, one input and one output channel per group): shufflenet's and
mobilenet's 3x3 convs, which a GEMM would run as thousands of 1 x 9 products.

Per image, the uint8 / int8 input is first copied into padded planes (the zero point around
it, int8/conv_tasks.py's ``pad_planes``), so that every tap reads in range. Then per channel and
output row, 16 output pixels at a time: ``acc += x[ih, iw + lane * stride] * w[c, tap]`` in
int32 lanes (stride 1: one 16-byte load per tap; stride 2: a 32-byte load whose even bytes
are the lanes), and the int8 GEMM's epilogue (int8/gemm.py, "row" orientation: one channel a
row) takes out ``zx * sum w``, dequantizes, applies bias / relu and requantizes, in the same
registers. Exact: int32 sums of u8 x s8 products, the same epilogue arithmetic as QConv2d.

    dw = QDepthwise(w_q [C, 1, KH, KW], attrs, "uint8", zx, scale, bias, out=("u8", sy, zy))
    dw(x, out)
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np
from llvmlite import ir

from ...llvm.jit import get_jit
from ...llvm.loops import I32, I64, const64, entry_alloca, for_range
from ...runtime.chain_split import Launches
from ...runtime.task_wrap import Buffer, wrapped_tasks
from ...runtime.threads import split_range, task_threads
from ..base import Kernel
from ..layout import scratch_addresses
from .conv import ACT_DTYPES, Epilogue, check_out, conv_dims, static_conv_dims
from .conv_tasks import SLACK, pad_planes
from .dw_lanes import LanesDepthwise, lanes_wins
from .gemm import (
    DRIVER_CTYPES,
    DRIVER_TYPES,
    I8,
    I8_PTR,
    LANES,
    OUTS,
    IRTypes,
    QGemmConfig,
    emit_epilogue,
    splat,
)
from .tasks import ChainSteps, Plans, int8_seconds

__all__ = ["QDepthwise"]

_PARALLEL = 1 << 14  # output elements (~15 us); below this one thread runs the whole conv
_PAD_ARGS = ("x", "xp", "c", "h", "w", "hp", "wp", "pt", "pl", "fill")
# after the GEMM driver's epilogue arguments (comp ... relu2): the conv's own
_ARGS = ("xp", "wt", "c", "c0", "c1", "hp", "wp", "oh", "ow", "kh", "kw", "dh", "dw", "sh")
_EPI_NAMES = ("comp", "scale", "bias", "oscale", "ozp", "relu", "pscale", "pbias", "s2", "z2",
              "relu2")


def _symbol(cfg: QGemmConfig, stride: int, signed: bool, window: tuple) -> str:
    return (f"msc_qdw_s{stride}_k{window[0]}x{window[1]}_{'s8' if signed else 'u8'}_"
            f"{cfg.symbol[10:]}")


def _build(cfg: QGemmConfig, stride: int, signed: bool, window: tuple) -> ir.Module:
    """``void (out, xp, <epilogue args>, wt, C, c0, c1, HP, WP, OH, OW, KH, KW, DH, DW, SH)``
    for channels c0..c1 (out and xp first: a task list adds their bases there), and a
    padding function ``void (x, xp, C, H, W, HP, WP, PT, PL, fill)``; the row stride of the input (1 or 2) and the window are compiled in (the taps
    unrolled, their weights splatted once per channel)."""
    symbol = _symbol(cfg, stride, signed, window)
    module = ir.Module(name=symbol)
    t = IRTypes(module, cfg)
    epi_types = DRIVER_TYPES[8:]
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I8_PTR, I8_PTR, *epi_types,
                                                             I32.as_pointer()] + [I64] * 12),
                     name=symbol)
    out, xp, *rest = fn.args
    epi = dict(zip(_EPI_NAMES, rest[:11]))
    a = dict(zip(_ARGS, (xp, *rest[11:])))
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    epi["relu"] = b.icmp_signed("!=", epi["relu"], I32(0))
    epi["relu2"] = b.icmp_signed("!=", epi["relu2"], I32(0))
    slot = entry_alloca(b, t.i32v, "acc")
    size = OUTS[cfg.out]
    kh, kw = window
    plane = b.mul(a["hp"], a["wp"])
    with for_range(b, a["c1"], start=a["c0"], name="ch") as c:
        src = b.gep(a["xp"], [b.mul(c, plane)])
        chan = {k: b.gep(epi[k], [c]) for k in ("comp", "scale", "bias", "pscale", "pbias")}
        weights = [splat(b, b.load(b.gep(a["wt"], [b.add(b.mul(c, const64(kh * kw)),
                                                          const64(tap))])))
                   for tap in range(kh * kw)]
        with for_range(b, a["oh"], name="oh") as oh, \
                for_range(b, a["ow"], step=LANES, name="ow") as ow:
            acc = ir.Constant(t.i32v, None)
            for i in range(kh):
                line = b.gep(src, [b.mul(b.add(b.mul(oh, a["sh"]), b.mul(const64(i), a["dh"])),
                                         a["wp"])])
                for j in range(kw):
                    start = b.add(b.mul(ow, const64(stride)), b.mul(const64(j), a["dw"]))
                    x = _lanes(b, b.gep(line, [start]), stride, signed)
                    acc = b.add(acc, b.mul(x, weights[i * kw + j]))
            b.store(acc, slot)
            dst = b.gep(out, [b.mul(b.add(b.mul(b.add(b.mul(c, a["oh"]), oh), a["ow"]), ow),
                                    const64(size))])
            args = dict(epi, **chan, c=dst, ldc=const64(0), ncols=b.sub(a["ow"], ow))
            emit_epilogue(b, t, args, [[slot]])
    b.ret_void()
    build_pad(module, symbol + "_pad")
    return module


def _lanes(b, ptr, stride: int, signed: bool):
    """16 input bytes at ``ptr``, ``ptr + stride``, ... as int32 lanes."""
    count = LANES * stride
    vec = b.load(b.bitcast(ptr, ir.VectorType(I8, count).as_pointer()), align=1)
    if stride > 1:
        picks = ir.Constant(ir.VectorType(I32, LANES), [k * stride for k in range(LANES)])
        vec = b.shuffle_vector(vec, ir.Constant(vec.type, ir.Undefined), picks)
    wide = ir.VectorType(I32, LANES)
    return b.sext(vec, wide) if signed else b.zext(vec, wide)


def build_pad(module: ir.Module, name: str) -> None:
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I8_PTR, I8_PTR] + [I64] * 7 + [I8]),
                     name=name)
    a = dict(zip(_PAD_ARGS, fn.args))
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    pad_planes(b, a)
    b.ret_void()


@cache
def _library(cfg: QGemmConfig, stride: int, signed: bool, window: tuple):
    symbol = _symbol(cfg, stride, signed, window)
    return get_jit().compile_generated(
        lambda: _build(cfg, stride, signed, window), [symbol, symbol + "_pad"],
        (__name__, "msc.backend.kernels.int8.gemm", "msc.backend.kernels.int8.conv_tasks",
         "msc.backend.llvm.loops"), (repr(cfg), stride, signed, window))


@cache
def _functions(cfg: QGemmConfig, stride: int, signed: bool, window: tuple):
    lib = _library(cfg, stride, signed, window)
    conv = lib.cfunc(_symbol(cfg, stride, signed, window), None, ctypes.c_void_p,
                     ctypes.c_void_p, *DRIVER_CTYPES[8:], ctypes.c_void_p,
                     *[ctypes.c_int64] * 12)
    pad = lib.cfunc(_symbol(cfg, stride, signed, window) + "_pad", None, ctypes.c_void_p, ctypes.c_void_p, *[ctypes.c_int64] * 7,
                    ctypes.c_int8)
    return conv, pad


def depthwise_ok(attrs: dict, channels: int, groups: int, w_shape: tuple) -> bool:
    """Whether :class:`QDepthwise` runs a conv: one channel in and out per group, strides
    (1, 1) or (2, 2)."""
    return (groups == channels == w_shape[0] and w_shape[1] == 1
            and attrs["strides"] in ((1, 1), (2, 2)) and w_shape[2] * w_shape[3] <= 49)


class QDepthwise(Kernel):
    """int8 depthwise NCHW conv2d; see the module doc."""

    inputs = (0,)

    def __init__(self, w_q: np.ndarray, attrs: dict, x_dtype: str, x_zero: int, scale, bias,
                 out, relu: bool = False, op: str = "int8.conv2d", vnni: bool = False,
                 post: tuple | None = None, lanes: bool | None = None):
        self.op = op
        self.lanes = lanes  # the channels-in-lanes kernel: None by plane size, or always / never
        self.c, _, self.kh, self.kw = w_q.shape
        self.w = np.ascontiguousarray(w_q.reshape(self.c, -1).astype(np.int32))
        self.x_np, flip = ACT_DTYPES[x_dtype]
        self.zero = int(x_zero)
        self.epi = Epilogue(w_q.reshape(self.c, -1), self.zero, scale, bias, out, relu, post)
        self.strides, self.padding, self.dilation = (attrs["strides"], attrs["padding"],
                                                     attrs["dilation"])
        cfg = QGemmConfig("row", self.epi.kind, False, self.epi.mid)
        self.conv, self.pad = _functions(cfg, self.strides[1], bool(flip), (self.kh, self.kw))
        self.size = OUTS[cfg.out]
        self._plans = Plans()
        self._steps = ChainSteps()
        self.lanes_form = None  # int8/dw_lanes.LanesDepthwise, made on first use

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains: the one-thread
        task lists of ``__call__``, their scratch in the register file's; ``splits``: as
        ``__call__``."""
        dims = static_conv_dims(self, buffers, self.c, self.c)
        if dims is None:
            return None
        n, h, w, oh, ow = dims

        def build():
            launches, nbytes = self._plan(n, (h, w, oh, ow), 1)
            return ([(tasks, tuple(Buffer(i) for i in roles)) for tasks, roles in launches],
                    nbytes, self.c * oh * ow >= _PARALLEL, split)

        def split(threads: int) -> Launches:
            launches, nbytes = self._plan(n, (h, w, oh, ow), threads)
            reads = n * self.c * oh * ow * self.kh * self.kw
            return Launches(tuple((tasks, tuple(Buffer(i) for i in roles))
                                  for tasks, roles in launches),
                            nbytes, int8_seconds("int8_dw_read", reads, self._probe))
        return self._steps.signature(dims, build)

    def _probe(self) -> tuple:
        """(call, window reads) of this conv on one 64 x 64 image (the Python call's few us a
        small part): the per-read rate."""
        x, (_, _, _, oh, ow) = conv_dims(self, np.zeros((1, self.c, 64, 64), self.x_np),
                                         self.c)
        out = np.empty((1, self.c, oh, ow), self.epi.dtype)
        return lambda: self(x, out), out.size * self.kh * self.kw

    def __call__(self, x, out):
        x, (n, h, w, oh, ow) = conv_dims(self, x, self.c)
        check_out(out, (n, self.c, oh, ow), self.epi.dtype, self.op)
        if not out.size:
            return out
        threads = task_threads() if self.c * oh * ow >= _PARALLEL else 1
        launches, nbytes = self._plans.get((n, h, w, threads),
                                           lambda: self._plan(n, (h, w, oh, ow), threads))
        (scratch,) = scratch_addresses(-(-nbytes // 4))
        addresses = (x.ctypes.data, out.ctypes.data, scratch)
        for tasks, roles in launches:
            tasks.launch(1, tuple(addresses[i] for i in roles), threads)
        return out

    def _plan(self, n: int, dims: tuple, threads: int) -> tuple:
        """([(task list, roles)], scratch bytes): each list is launched with the addresses
        its roles name (0: x, 1: out, 2: the scratch) as its bases. Small planes take the
        channels-in-lanes kernel (int8/dw_lanes.py), the others pad + row passes."""
        parts = 2 * threads if threads > 1 else 1
        _, _, oh, ow = dims
        if lanes_wins(oh, ow) if self.lanes is None else self.lanes:
            if self.lanes_form is None:
                self.lanes_form = LanesDepthwise(self)
            tasks, nbytes = self.lanes_form.tasks(n, dims, parts)
            return [(tasks, (0, 1, 2))], nbytes
        pad, conv, nbytes = self._rows_plan(n, dims, parts)
        return [(pad, (0, 2)), (conv, (1, 2))], nbytes

    def _rows_plan(self, n: int, dims: tuple, parts: int) -> tuple:
        """(pad tasks, conv tasks, scratch bytes) over (image, channel range) pairs."""
        h, w, oh, ow = dims
        pt, pl, pb, pr = self.padding
        # a 16-lane load reads up to 16 * stride bytes past a row's last output pixel
        hp, wp = h + pt + pb, w + pl + pr + LANES * self.strides[1]
        image = self.c * hp * wp
        ranges = [(i, c0, c1) for i in range(n) for c0, c1 in split_range(self.c, parts)]
        fill = self.zero - 256 * (self.zero > 127)
        itemsize = np.dtype(self.x_np).itemsize
        pad = wrapped_tasks(self.pad, [
            (((i * self.c + c0) * h * w) * itemsize, i * image + c0 * hp * wp, c1 - c0, h, w,
             hp, wp, pt, pl, fill) for i, c0, c1 in ranges])
        tail = (hp, wp, oh, ow, self.kh, self.kw, *self.dilation, self.strides[0])
        conv = wrapped_tasks(self.conv, [
            (i * self.c * oh * ow * self.size, i * image, *self.epi.args, self.w.ctypes.data,
             self.c, c0, c1, *tail) for i, c0, c1 in ranges])
        return pad, conv, n * image + SLACK
