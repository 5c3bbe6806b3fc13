"""The int8 kernels a folded QDQ conv or matmul runs as (made by qdq_fold.py).

:class:`QConv2d` (NCHW, any window / stride / padding / dilation, groups 1): per image, the
uint8 input is unfolded into patch rows ``[K4, OH*OW]`` (k = (c, kh, kw), positions outside
the image read the zero point, rows past K are zero), packed into VNNI panels, and multiplied
by the int8 weight ``[O, K4]`` on the "row" int8 GEMM, whose epilogue writes NCHW directly
(float32, or uint8 / int8 requantized). A 1x1 stride-1 conv with C a multiple of 4 packs the
input as it is. :class:`QDense` runs ``[..., K] @ W`` on the "col" GEMM with the weight
packed once. Both take an int8 activation by flipping its sign bit (x ^ 0x80 = x + 128 as
uint8, zero point + 128), so the GEMM always multiplies u8 by s8.

    conv = QConv2d(w_q, attrs, x_zero=128, scale=sx * sw, bias=b, out=("u8", sy, zy))
    conv(x_u8, out)    # checks x and out, then native code only
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np
from llvmlite import ir

from ...errors import ShapeError
from ..llvm.jit import get_jit
from ..llvm.loops import I32, I64, const64, for_range
from ..runtime.threads import parallel_for, task_threads
from .base import Kernel
from .int8_gemm import (
    I8,
    I8_PTR,
    NR,
    OUTS,
    PARALLEL_MACS,
    QGemmConfig,
    aligned_bytes,
    host_vnni,
    pack_vnni,
    qgemm_driver,
    run_qgemm,
)
from .layout import scratch, scratch_addresses

__all__ = ["QConv2d", "QDense", "pack_fn", "unfold_fn"]

_NP_OUT = {"s32": np.int32, "f32": np.float32, "u8": np.uint8, "s8": np.int8}
_ACT = {"uint8": (np.uint8, 0), "int8": (np.int8, 0x80)}  # dtype -> (numpy, xor to u8)
_SYMBOLS = ("msc_qpack_vnni_u8", "msc_qunfold_u8")
_PARALLEL_PACK = 1 << 19  # bytes packed per image; below this one thread packs


def _build_pack(module: ir.Module) -> None:
    """void (src, lds, dst, groups, n, flip): rows [4*groups, n] (row stride lds) as VNNI
    panels; columns past n are 0; every byte is xored with ``flip``."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I8_PTR, I64, I8_PTR, I64, I64, I8]),
                     name=_SYMBOLS[0])
    src, lds, dst, groups, n, flip = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    v16, v64 = ir.VectorType(I8, 16), ir.VectorType(I8, 64)
    mask_ty = ir.VectorType(ir.IntType(1), 16)
    load = ir.Function(module, ir.FunctionType(v16, [v16.as_pointer(), I32, mask_ty, v16]),
                       name="llvm.masked.load.v16i8.p0")
    flips = b.shuffle_vector(b.insert_element(ir.Constant(v16, ir.Undefined), flip, I32(0)),
                             ir.Constant(v16, ir.Undefined), ir.Constant(ir.VectorType(I32, 16),
                                                                           None))
    lanes = ir.Constant(ir.VectorType(I64, 16), list(range(16)))
    cat = ir.Constant(ir.VectorType(I32, 32), list(range(32)))
    # out[4i + j] = row j at column i: rows 0, 1 are the first concat, rows 2, 3 the second
    weave = ir.Constant(ir.VectorType(I32, 64),
                        [(j // 2) * 32 + (j % 2) * 16 + i for i in range(16) for j in range(4)])
    panels = b.sdiv(b.add(n, const64(NR - 1)), const64(NR))
    with for_range(b, panels, name="p") as p, for_range(b, groups, name="g") as g:
        out = b.gep(dst, [b.mul(b.add(b.mul(p, groups), g), const64(4 * NR))])
        for v in range(NR // 16):
            col = b.add(b.mul(p, const64(NR)), const64(16 * v))
            limit = b.insert_element(ir.Constant(ir.VectorType(I64, 16), ir.Undefined),
                                     b.sub(n, col), I32(0))
            limit = b.shuffle_vector(limit, ir.Constant(limit.type, ir.Undefined),
                                     ir.Constant(ir.VectorType(I32, 16), None))
            mask = b.icmp_signed("<", lanes, limit)
            rows = []
            for j in range(4):
                ptr = b.gep(src, [b.add(b.mul(b.add(b.mul(g, const64(4)), const64(j)), lds),
                                        col)])
                row = b.call(load, [b.bitcast(ptr, v16.as_pointer()), I32(1), mask,
                                    ir.Constant(v16, None)])
                rows.append(b.select(mask, b.xor(row, flips), ir.Constant(v16, None)))
            pair = [b.shuffle_vector(rows[i], rows[i + 1], cat) for i in (0, 2)]
            woven = b.shuffle_vector(pair[0], pair[1], weave)
            b.store(woven, b.bitcast(b.gep(out, [const64(64 * v)]), v64.as_pointer()),
                    align=64)
    b.ret_void()


_UNFOLD_ARGS = ("x", "dst", "c", "h", "w", "kh", "kw", "sh", "sw", "pt", "pl", "dh", "dw",
                "oh", "ow", "k4", "fill", "xp", "hp", "wp")
_SLACK = 128  # bytes after the padded planes and the patch rows: whole-vector copies


def _build_unfold(module: ir.Module) -> None:
    """void (x, dst, C, H, W, KH, KW, SH, SW, PT, PL, DH, DW, OH, OW, K4, fill, xp, HP, WP):
    patch rows dst[k, oh*OW + ow] = x[c, ih, iw] (k = (c*KH + i)*KW + j), ``fill`` outside
    the image and on rows C*KH*KW..K4. The input is first copied into padded planes ``xp``
    [C, HP, WP] (``fill`` around it), so every patch row is a plain copy: 64 bytes a step,
    whole vectors (rows are written in address order, so a vector that runs past a row end is
    overwritten by the next row; both buffers have _SLACK spare bytes)."""
    fn = ir.Function(module, ir.FunctionType(
        ir.VoidType(), [I8_PTR, I8_PTR] + [I64] * 14 + [I8, I8_PTR, I64, I64]), name=_SYMBOLS[1])
    a = dict(zip(_UNFOLD_ARGS, fn.args))
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    _pad_planes(b, a)
    plane, padded = b.mul(a["oh"], a["ow"]), b.mul(a["hp"], a["wp"])
    taps = b.mul(a["kh"], a["kw"])
    k = b.mul(a["c"], taps)
    unit = b.icmp_signed("==", a["sw"], const64(1))
    with for_range(b, k, name="k") as kk:
        c, tap = b.sdiv(kk, taps), b.srem(kk, taps)
        i, j = b.sdiv(tap, a["kw"]), b.srem(tap, a["kw"])
        src = b.gep(a["xp"], [b.add(b.mul(c, padded), b.mul(j, a["dw"]))])
        row = b.gep(a["dst"], [b.mul(kk, plane)])
        with for_range(b, a["oh"], name="oh") as oh:
            ih = b.add(b.mul(oh, a["sh"]), b.mul(i, a["dh"]))
            line, out = b.gep(src, [b.mul(ih, a["wp"])]), b.gep(row, [b.mul(oh, a["ow"])])
            with b.if_else(unit) as (contiguous, strided):
                with contiguous:
                    _copy64(b, line, out, a["ow"])
                with strided:
                    _strided_copy(b, line, out, a["ow"], a["sw"])
    _fill(b, b.gep(a["dst"], [b.mul(k, plane)]), const64(0), b.mul(b.sub(a["k4"], k), plane),
          a["fill"])
    b.ret_void()


def _pad_planes(b, a) -> None:
    """xp[c, PT + y, PL + x] = x[c, y, x], ``fill`` elsewhere."""
    total = b.mul(a["c"], b.mul(a["hp"], a["wp"]))
    _fill(b, a["xp"], const64(0), total, a["fill"])
    with for_range(b, b.mul(a["c"], a["h"]), name="row") as r:
        c, y = b.sdiv(r, a["h"]), b.srem(r, a["h"])
        dst = b.gep(a["xp"], [b.add(b.mul(b.add(b.mul(c, a["hp"]), b.add(y, a["pt"])), a["wp"]),
                                    a["pl"])])
        b.call(_intrinsic(b.function.module, "memcpy"), [
            dst, b.gep(a["x"], [b.mul(r, a["w"])]), a["w"], ir.Constant(ir.IntType(1), 0)])


def _strided_copy(b, src, dst, count, stride) -> None:
    """dst[t] = src[t * stride]; stride 2 (resnet's downsampling convs) has its own loop,
    which LLVM vectorizes with a constant stride."""
    with b.if_else(b.icmp_signed("==", stride, const64(2))) as (two, other):
        for arm, step in ((two, const64(2)), (other, stride)):
            with arm, for_range(b, count, name="ow") as ow:
                b.store(b.load(b.gep(src, [b.mul(ow, step)])), b.gep(dst, [ow]))


def _copy64(b, src, dst, count) -> None:
    """dst[0:count] = src[0:count] in whole 64-byte vectors (may write up to 63 bytes more)."""
    v64 = ir.VectorType(I8, 64).as_pointer()
    with for_range(b, count, step=64, name="chunk") as t:
        value = b.load(b.bitcast(b.gep(src, [t]), v64), align=1)
        b.store(value, b.bitcast(b.gep(dst, [t]), v64), align=1)


def _fill(b, ptr, start, stop, value) -> None:
    module = b.function.module
    b.call(_intrinsic(module, "memset"), [b.gep(ptr, [start]), value,
                                          b.sub(stop, start), ir.Constant(ir.IntType(1), 0)])


def _intrinsic(module: ir.Module, name: str) -> ir.Function:
    """llvm.memcpy / llvm.memset on byte pointers (declared once per module)."""
    symbol = f"llvm.{name}.p0.p0.i64" if name == "memcpy" else f"llvm.{name}.p0.i64"
    if symbol in module.globals:
        return module.globals[symbol]
    second = I8_PTR if name == "memcpy" else I8
    return ir.Function(module, ir.FunctionType(ir.VoidType(), [I8_PTR, second, I64,
                                                               ir.IntType(1)]), name=symbol)


@cache
def _library():
    def build():
        module = ir.Module(name="msc_qlayout")
        _build_pack(module)
        _build_unfold(module)
        return module
    return get_jit().compile_generated(build, list(_SYMBOLS), (__name__, "msc.backend.llvm.loops"))


@cache
def pack_fn():
    """``pack(src, lds, dst, groups, n, flip)`` (pointers as ints)."""
    return _library().cfunc(_SYMBOLS[0], None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                            ctypes.c_int64, ctypes.c_int64, ctypes.c_int8)


@cache
def unfold_fn():
    """``unfold(x, dst, C, H, W, KH, KW, SH, SW, PT, PL, DH, DW, OH, OW, K4, fill, xp, HP,
    WP)``."""
    return _library().cfunc(_SYMBOLS[1], None, ctypes.c_void_p, ctypes.c_void_p,
                            *[ctypes.c_int64] * 14, ctypes.c_int8, ctypes.c_void_p,
                            ctypes.c_int64, ctypes.c_int64)


# ---------------------------------------------------------------------------------------------
# Kernels


class _Epilogue:
    """Per-channel comp (int32), scale, bias (float32) and the output's quantization.

    ``post``: None, or ``(mid kind, mid scale, mid zero, pscale, pbias, relu2)`` when a
    quantize -> dequantize -> per-channel affine chain follows (int8_gemm's ``mid``); ``out``
    is then that chain's end."""

    def __init__(self, w_rows: np.ndarray, x_zero: int, scale, bias, out, relu: bool,
                 post: tuple | None = None):
        chans = w_rows.shape[0]

        def per_channel(v, default):
            return np.ascontiguousarray(np.broadcast_to(
                np.float32(default) if v is None else v, (chans,)), np.float32)
        self.comp = np.ascontiguousarray(
            (int(x_zero) * w_rows.astype(np.int64).sum(axis=1)).astype(np.int32))
        self.scale, self.bias = per_channel(scale, 1), per_channel(bias, 0)
        kind, out_scale, out_zero = out if isinstance(out, tuple) else (out, 1.0, 0)
        self.kind, self.dtype = kind, np.dtype(_NP_OUT[kind])
        self.mid = post[0] if post else ""
        first = (post[1], post[2]) if post else (out_scale, out_zero)
        self.pscale = per_channel(post[3] if post else None, 1)
        self.pbias = per_channel(post[4] if post else None, 0)
        second = (out_scale, out_zero, int(bool(post[5]))) if post else (1.0, 0, 0)
        self.args = (self.comp.ctypes.data, self.scale.ctypes.data, self.bias.ctypes.data,
                     float(first[0]), int(first[1]), int(bool(relu)), self.pscale.ctypes.data,
                     self.pbias.ctypes.data, float(second[0]), int(second[1]), second[2])


def _check(x, dtype, param: str, op: str) -> np.ndarray:
    if type(x) is not np.ndarray or x.dtype != dtype:
        raise ShapeError(f"expected a {np.dtype(dtype)} array, got "
                         f"{getattr(x, 'dtype', type(x).__name__)}", op=op, param=param)
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)


def conv_dims(k, x, channels: int) -> tuple:
    """(checked x, (N, H, W, OH, OW)) for an NCHW conv kernel ``k`` (its window, strides,
    padding, dilation) on ``x`` of ``channels`` channels."""
    x = _check(x, k.x_np, "data", k.op)
    if x.ndim != 4 or x.shape[1] != channels:
        raise ShapeError(f"expects [N, {channels}, H, W], got {x.shape}", op=k.op,
                         param="data")
    n, _, h, w = x.shape
    (sh, sw), (dh, dw) = k.strides, k.dilation
    pt, pl, pb, pr = k.padding
    oh = max((h + pt + pb - dh * (k.kh - 1) - 1) // sh + 1, 0)
    ow = max((w + pl + pr - dw * (k.kw - 1) - 1) // sw + 1, 0)
    return x, (n, h, w, oh, ow)


def _check_out(out, shape: tuple, dtype, op: str) -> None:
    if (type(out) is not np.ndarray or out.shape != shape or out.dtype != dtype
            or not out.flags.c_contiguous or not out.flags.writeable):
        raise ShapeError(f"output buffer {getattr(out, 'shape', None)} "
                         f"{getattr(out, 'dtype', None)}, expected {shape} {np.dtype(dtype)}",
                         op=op, param="out")


class QConv2d(Kernel):
    """int8 NCHW conv2d (groups 1) with int32 accumulation; see the module doc."""

    inputs = (0,)

    def __init__(self, w_q: np.ndarray, attrs: dict, x_dtype: str, x_zero: int, scale, bias,
                 out, relu: bool = False, op: str = "int8.conv2d", vnni: bool | None = None,
                 post: tuple | None = None):
        self.op = op
        self.o, self.c, self.kh, self.kw = w_q.shape
        self.groups = int(attrs.get("groups", 1))  # one GEMM per group, on its channel slices
        self.k = self.c * self.kh * self.kw
        self.k4 = -(-self.k // 4) * 4
        self.w = aligned_bytes(self.o * self.k4, np.int8).reshape(self.o, self.k4)
        self.w[:] = 0
        self.w[:, :self.k] = w_q.reshape(self.o, -1)
        self.x_np, self.flip = _ACT[x_dtype]
        zero = int(x_zero) + (128 if self.flip else 0)
        self.zero = zero
        self.epi = _Epilogue(self.w, zero, scale, bias, out, relu, post)
        self.strides, self.padding, self.dilation = (attrs["strides"], attrs["padding"],
                                                     attrs["dilation"])
        self.cfg = QGemmConfig("row", self.epi.kind, host_vnni() if vnni is None else vnni,
                               self.epi.mid)
        self.driver = qgemm_driver(self.cfg)
        self.direct = (self.kh, self.kw) == (1, 1) and self.strides == (1, 1) and not any(
            self.padding) and self.c % 4 == 0
        self.pack, self.unfold = pack_fn(), unfold_fn()
        self.w_ptr = self.w.ctypes.data
        og = self.o // self.groups  # each group's epilogue arrays start at its first channel
        self.group_epi = [tuple(v + 4 * og * g if k in (0, 1, 2, 6, 7) else v
                                for k, v in enumerate(self.epi.args)) for g in range(self.groups)]

    def __call__(self, x, out):
        x, (n, h, w, oh, ow) = conv_dims(self, x, self.c * self.groups)
        _check_out(out, (n, self.o, oh, ow), self.epi.dtype, self.op)
        if out.size and self.groups > 1:
            self._grouped(x, out, n, (h, w, oh, ow))
        elif out.size:
            x_ptr, out_ptr = x.ctypes.data, out.ctypes.data  # 1-5 us each: read once
            for i in range(n):
                self._image(x_ptr, out_ptr, i, h, w, oh, ow)
        return out

    def _grouped(self, x, out, n: int, dims: tuple) -> None:
        """Every (image, group) as one unfold + pack + GEMM, the pairs on the threads: NCHW
        keeps a group's input and output channels contiguous, so a group is an image of
        C / groups channels (shufflenet's 4-group 1x1 convs are 68 x 68 GEMMs)."""
        h, w, oh, ow = dims
        p, kg, og = oh * ow, self.k4 // 4, self.o // self.groups
        pt, pl, pb, pr = self.padding
        hp, wp = h + pt + pb, w + pl + pr
        sizes = (0 if self.direct else -(-(self.k4 * p + _SLACK) // 4),
                 -(-p // NR) * kg * NR, 0 if self.direct else -(-(self.c * hp * wp + _SLACK) // 4))
        flip, fill = self.flip - 256 if self.flip else 0, (self.zero - 128 if self.flip
                                                          else self.zero) & 0xFF
        size, pairs = OUTS[self.cfg.out], n * self.groups
        base, dst0, w0 = x.ctypes.data, out.ctypes.data, self.w.ctypes.data

        def run(first: int, stop: int) -> None:
            cols, packed, xp = scratch_addresses(*sizes)
            for i in range(first, stop):
                g = i % self.groups
                src = base + i * self.c * h * w
                if not self.direct:
                    self.unfold(src, cols, self.c, h, w, self.kh, self.kw, *self.strides, pt,
                                pl, *self.dilation, oh, ow, self.k4, fill, xp, hp, wp)
                    src = cols
                self.pack(src, p, packed, kg, p, flip)
                self.driver(w0 + g * og * self.k4, packed, dst0 + i * og * p * size, og, p,
                            kg, self.k4, p, *self.group_epi[g])
        threads = task_threads() if pairs > 1 and out.size * self.k >= PARALLEL_MACS else 1
        if threads == 1:
            run(0, pairs)
            return
        parts = min(pairs, threads)
        parallel_for(parts, lambda t: run(pairs * t // parts, pairs * (t + 1) // parts),
                     threads)

    def _image(self, x_ptr: int, out_ptr: int, i, h, w, oh, ow) -> None:
        p = oh * ow
        groups = self.k4 // 4
        panels = -(-p // NR)
        pt, pl, pb, pr = self.padding
        hp, wp = h + pt + pb, w + pl + pr
        cols_bytes = 0 if self.direct else self.k4 * p + _SLACK
        pad_bytes = 0 if self.direct else self.c * hp * wp + _SLACK
        cols, packed, xp = scratch_addresses(-(-cols_bytes // 4), panels * groups * NR,
                                             -(-pad_bytes // 4))
        src = x_ptr + i * self.c * h * w
        if not self.direct:
            self.unfold(src, cols, self.c, h, w, self.kh, self.kw, *self.strides, pt, pl,
                        *self.dilation, oh, ow, self.k4,
                        (self.zero - 128 if self.flip else self.zero) & 0xFF, xp, hp, wp)
            src = cols
        self._pack(src, p, packed, groups, panels)
        dst = out_ptr + i * self.o * p * OUTS[self.cfg.out]
        run_qgemm(self.driver, self.cfg, self.w_ptr, packed, dst, self.o, p, groups, self.k4,
                  p, self.epi.args)

    def _pack(self, src: int, p: int, dst: int, groups: int, panels: int) -> None:
        """The patch rows as VNNI panels; panel ranges on the threads when there are any."""
        flip = self.flip - 256 if self.flip else 0
        threads = task_threads() if p * groups * 4 >= _PARALLEL_PACK else 1
        if threads == 1 or panels < 2:
            self.pack(src, p, dst, groups, p, flip)
            return
        parts = min(panels, 2 * threads)
        bounds = [panels * i // parts for i in range(parts + 1)]

        def task(i: int) -> None:
            p0, p1 = bounds[i], bounds[i + 1]
            self.pack(src + p0 * NR, p, dst + p0 * groups * NR * 4, groups,
                      min(p, p1 * NR) - p0 * NR, flip)
        parallel_for(parts, task, threads)


class QDense(Kernel):
    """int8 ``[..., K] @ W[K, N]`` (W given as int8 [K, N]) on the "col" GEMM."""

    inputs = (0,)

    def __init__(self, w_kn: np.ndarray, x_dtype: str, x_zero: int, scale, bias, out,
                 relu: bool = False, op: str = "int8.matmul", vnni: bool | None = None,
                 post: tuple | None = None):
        self.op = op
        self.k, self.n = w_kn.shape
        self.k4 = -(-self.k // 4) * 4
        self.packed = pack_vnni(w_kn)
        self.x_np, self.flip = _ACT[x_dtype]
        zero = int(x_zero) + (128 if self.flip else 0)
        self.epi = _Epilogue(np.ascontiguousarray(w_kn.T), zero, scale, bias, out, relu, post)
        self.cfg = QGemmConfig("col", self.epi.kind, host_vnni() if vnni is None else vnni,
                               self.epi.mid)
        self.driver = qgemm_driver(self.cfg)

    def __call__(self, x, out):
        x = _check(x, self.x_np, "data", self.op)
        if not x.shape or x.shape[-1] != self.k:
            raise ShapeError(f"expects [..., {self.k}], got {x.shape}", op=self.op,
                             param="data")
        _check_out(out, x.shape[:-1] + (self.n,), self.epi.dtype, self.op)
        m = x.size // self.k if self.k else int(np.prod(x.shape[:-1]))
        if not (m and self.n):
            return out
        if self.flip or self.k != self.k4:
            (buf,) = scratch(-(-m * self.k4 // 4))
            rows = buf.view(np.uint8)[: m * self.k4].reshape(m, self.k4)
            rows[:, self.k:] = 0
            rows[:, :self.k] = x.reshape(m, self.k).view(np.uint8) ^ np.uint8(self.flip)
            x = rows
        run_qgemm(self.driver, self.cfg, x.ctypes.data, self.packed.ctypes.data,
                  out.ctypes.data, m, self.n, self.k4 // 4, self.k4, self.n, self.epi.args)
        return out
