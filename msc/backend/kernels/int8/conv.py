"""The int8 kernels a folded QDQ conv or matmul runs as (made by fuse/qdq/fold.py).

:class:`QConv2d` (NCHW, any window / stride / padding / dilation, groups 1): per image, the
uint8 input is unfolded into patch rows ``[K4, OH*OW]`` (k = (c, kh, kw), positions outside
the image read the zero point, rows past K are zero), packed into VNNI panels, and multiplied
by the int8 weight ``[O, K4]`` on the "row" int8 GEMM, whose epilogue writes NCHW directly
(float32, or uint8 / int8 requantized). A 1x1 stride-1 conv with C a multiple of 4 packs the
input as it is. The three steps run fused per block of pixels, as native task lists
(int8/conv_tasks.py). :class:`QDense` runs ``[..., K] @ W`` on the "col" GEMM with the weight
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

from ....errors import ShapeError
from ...llvm.jit import get_jit
from ...runtime.chain_split import Launches, Parts
from ...runtime.task_wrap import At, Buffer, ChainEntry
from ...runtime.threads import NativeTasks, native_address, split_range, task_threads
from ..base import Kernel
from ..layout import scratch, scratch_addresses, scratch_offsets
from .conv_tasks import PACK, PARALLEL_MACS, build_pack, conv_plan
from .gemm import (
    NR,
    QGemmConfig,
    aligned_bytes,
    gemm_blocks,
    host_vnni,
    pack_vnni,
    qgemm_driver,
    qgemm_tasks,
    run_qgemm,
)
from .gemm import PARALLEL_MACS as GEMM_PARALLEL_MACS
from .layout import transpose_fn
from .pixel_rows import NHWC_SLACK, unfold_fn
from .tasks import ChainSteps, mac_seconds

__all__ = ["QConv2d", "QDense", "pack_fn"]

NP_OUT = {"s32": np.int32, "f32": np.float32, "u8": np.uint8, "s8": np.int8}
ACT_DTYPES = {"uint8": (np.uint8, 0), "int8": (np.int8, 0x80)}  # dtype -> (numpy, xor to u8)
# Output pixels per image under which a batch's patch embedding takes the pixel rows: every
# plane measured (4x4 to 16x16 outputs, 8x8 and 16x16 patches, one thread, batch 16) ran in
# 0.39-0.50 of the per-image row path's time.
PIXEL_ROWS_PLANE = 1 << 16
# Other windows take the NHWC pixel rows with at most one GEMM vector of output channels and
# at least one of input channels: one thread, batch 16, against the row path, 3x3 16 -> 16 on
# 16x16 planes 0.84, on 8x8 0.77, 36 -> 16 on 7x7 0.49, 2x2 stride 2 0.80; 3x3 8 -> 8 1.31
# (half-empty transposes, runs of 24 bytes); O = 24 wastes 40 of the "col" GEMM's 64
# columns; 1x1 stride 2 1.40 (the NHWC copy moves 4x the pixels the conv reads).
NHWC_OUTPUTS = 16
NHWC_CHANNELS = 16


@cache
def _library():
    def build():
        module = ir.Module(name="msc_qlayout")
        build_pack(module)
        return module
    return get_jit().compile_generated(build, [PACK], (__name__, "msc.backend.llvm.loops",
                                                       "msc.backend.kernels.int8.conv_tasks"))


@cache
def pack_fn():
    """``pack(src, lds, dst, groups, n, flip)`` (pointers as ints)."""
    return _library().cfunc(PACK, None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                            ctypes.c_int64, ctypes.c_int64, ctypes.c_int8)


# ---------------------------------------------------------------------------------------------
# Kernels


class Epilogue:
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
        self.kind, self.dtype = kind, np.dtype(NP_OUT[kind])
        self.mid = post[0] if post else ""
        first = (post[1], post[2]) if post else (out_scale, out_zero)
        self.pscale = per_channel(post[3] if post else None, 1)
        self.pbias = per_channel(post[4] if post else None, 0)
        second = (out_scale, out_zero, int(bool(post[5]))) if post else (1.0, 0, 0)
        self.args = (self.comp.ctypes.data, self.scale.ctypes.data, self.bias.ctypes.data,
                     float(first[0]), int(first[1]), int(bool(relu)), self.pscale.ctypes.data,
                     self.pbias.ctypes.data, float(second[0]), int(second[1]), second[2])


def _round64(nbytes: int) -> int:
    return -(-nbytes // 64) * 64


def check_operand(x, dtype, param: str, op: str) -> np.ndarray:
    if type(x) is not np.ndarray or x.dtype != dtype:
        raise ShapeError(f"expected a {np.dtype(dtype)} array, got "
                         f"{getattr(x, 'dtype', type(x).__name__)}", op=op, param=param)
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)


def conv_dims(k, x, channels: int) -> tuple:
    """(checked x, (N, H, W, OH, OW)) for an NCHW conv kernel ``k`` (its window, strides,
    padding, dilation) on ``x`` of ``channels`` channels."""
    x = check_operand(x, k.x_np, "data", k.op)
    if x.ndim != 4 or x.shape[1] != channels:
        raise ShapeError(f"expects [N, {channels}, H, W], got {x.shape}", op=k.op,
                         param="data")
    return x, _out_dims(k, x.shape)


def _out_dims(k, shape: tuple) -> tuple:
    n, _, h, w = shape
    (sh, sw), (dh, dw) = k.strides, k.dilation
    pt, pl, pb, pr = k.padding
    oh = max((h + pt + pb - dh * (k.kh - 1) - 1) // sh + 1, 0)
    ow = max((w + pl + pr - dw * (k.kw - 1) - 1) // sw + 1, 0)
    return n, h, w, oh, ow


def static_conv_dims(k, buffers: list, channels: int, out_channels: int) -> tuple | None:
    """(N, H, W, OH, OW) when ``buffers`` ((shape, dtype) of the input and the output) are
    exactly what conv kernel ``k``'s ``__call__`` takes, with work to do; else None. What a
    native chain step checks once, when the plan is made (runtime/native_run.KernelStep)."""
    if len(buffers) != 2:
        return None
    (shape, dtype), (out_shape, out_dtype) = buffers
    if np.dtype(dtype) != k.x_np or len(shape) != 4 or shape[1] != channels:
        return None
    dims = _out_dims(k, tuple(shape))
    n, _, _, oh, ow = dims
    if tuple(out_shape) != (n, out_channels, oh, ow) or np.dtype(out_dtype) != k.epi.dtype or (
            min(n, oh, ow) <= 0):
        return None
    return dims


def check_out(out, shape: tuple, dtype, op: str) -> None:
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
        self.x_np, self.flip = ACT_DTYPES[x_dtype]
        zero = int(x_zero) + (128 if self.flip else 0)
        self.zero = zero
        self.epi = Epilogue(self.w, zero, scale, bias, out, relu, post)
        self.strides, self.padding, self.dilation = (attrs["strides"], attrs["padding"],
                                                     attrs["dilation"])
        self.cfg = QGemmConfig("row", self.epi.kind, host_vnni() if vnni is None else vnni,
                               self.epi.mid)
        self.driver = qgemm_driver(self.cfg)
        self.direct = (self.kh, self.kw) == (1, 1) and self.strides == (1, 1) and not any(
            self.padding) and self.c % 4 == 0
        self.w_ptr = self.w.ctypes.data
        self._plans: dict = {}  # (n, h, w, threads) -> int8_conv_tasks.ConvPlan
        self._steps = ChainSteps()
        # a 1x1 conv of 1x1 planes is x [N, C] @ W^T: the "col" GEMM with the images as its
        # rows (this conv's "row" GEMM would run one 64-column panel per image for 1 column)
        self.dense = QDense(np.ascontiguousarray(w_q.reshape(self.o, self.c).T), x_dtype,
                            x_zero, scale, bias, out, relu, op, vnni, post) if (
            (self.kh, self.kw) == (1, 1) and self.groups == 1 and self.strides == (1, 1)
            and not any(self.padding)) else None
        # any other window at batch > 1: every image's pixel rows through one "col" GEMM
        # (int8/pixel_rows.py), made on first use
        self._dense_args = (w_q, x_dtype, x_zero, scale, bias, out, relu, op, vnni, post)
        self.pixel_dense: QDense | None = None
        self._unfold_rows: dict = {}  # (n, h, w) -> the unfold's argument row

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains (runtime/
        native_run.KernelStep): the one-thread task list of ``__call__`` on the step's
        buffers, its arena in the register file's scratch; ``splits``: work enough to split
        across threads (the kernel object runs it then)."""
        dims = static_conv_dims(self, buffers, self.c * self.groups, self.o)
        if dims is None:
            return None
        n, h, w, oh, ow = dims
        if self._as_rows(n, h * w):
            return self._rows_signature(buffers, n, h * w)
        if self._pixel_mode(n, oh * ow):
            return self._pixel_signature(buffers, dims)
        def build():
            plan = conv_plan(self, n, (h, w, oh, ow), 1)
            macs = n * self.o * self.k4 * oh * ow
            return ([(plan.blocks, (Buffer(0), Buffer(2), Buffer(1)))], plan.arena,
                    macs >= PARALLEL_MACS, lambda threads: self._split_form(n, dims, threads))
        return self._steps.signature(dims, build)

    def _split_form(self, n: int, dims: tuple, threads: int) -> Launches:
        """The blocks of ``__call__`` at ``threads`` for a chain's parallel step."""
        plan = conv_plan(self, n, dims[1:], threads)
        seconds = mac_seconds(n * self.o * self.k4 * dims[3] * dims[4])
        return Launches(((plan.blocks, (Buffer(0), Buffer(2), Buffer(1))),), plan.arena,
                        seconds)

    def _as_rows(self, n: int, p: int) -> bool:
        """Whether the images' pixels run as the rows of one "col" GEMM (``self.dense``): a
        1x1 conv of 1x1 planes, or of planes under one 64-column panel at batch > 1 (its
        "row" GEMM would run one mostly empty panel per image: MobileNets' last stages)."""
        return self.dense is not None and (p == 1 or (n > 1 and p < NR))

    def _pixel_mode(self, n: int, p: int) -> str | None:
        """How the images' output pixels run as the rows of one "col" GEMM at batch > 1
        (int8/pixel_rows.py), or None (the per-image row path). "patch": patch embeddings
        (window = stride, no padding, 4x4 and up: ViT's 8x8, ConvNeXt's 4x4 stem; 0.4-0.5 of
        the row path's time) straight from NCHW. "nhwc": other windows with one GEMM vector of
        output channels (O <= 16: RepVGG's 3x3 convs of 16 channels) through NHWC planes, a
        window row one run of kw * C bytes (the limits: NHWC_OUTPUTS, NHWC_CHANNELS)."""
        if n < 2 or p >= PIXEL_ROWS_PLANE or self.groups != 1 or self.dense is not None or (
                tuple(self.dilation) != (1, 1)):
            return None
        if (tuple(self.strides) == (self.kh, self.kw) and self.kh * self.kw >= 16
                and not any(self.padding)):
            return "patch"
        if self.o <= NHWC_OUTPUTS and self.c >= NHWC_CHANNELS and self.kh * self.kw > 1:
            return "nhwc"
        return None

    def _pixel_parts(self, dims: tuple, parts: int = 1) -> tuple:
        """(dense, unfold, its argument row's address, scratch byte offsets (xh, rows,
        done), scratch bytes) of the pixel-row path for (N, H, W, OH, OW); ``parts``: NHWC
        planes for that many image ranges at once (a split's)."""
        n, h, w, oh, ow = dims
        nhwc = self._pixel_mode(n, oh * ow) == "nhwc"
        if self.pixel_dense is None:
            w_q, *rest = self._dense_args
            order = (2, 3, 1, 0) if nhwc else (1, 2, 3, 0)  # K: (i, j, c) or (c, i, j)
            self.pixel_dense = QDense(np.ascontiguousarray(
                w_q.transpose(order).reshape(-1, self.o)), *rest)
        dense = self.pixel_dense
        pt, pl, pb, pr = self.padding
        hp, wp = h + pt + pb, w + pl + pr
        key = (n, h, w)
        if key not in self._unfold_rows:
            if len(self._unfold_rows) > 64:
                self._unfold_rows.clear()
            self._unfold_rows[key] = np.array((
                n, self.c, h, w, *self.strides, oh, ow, self.k, dense.k4, self.flip, pt, pl,
                hp, wp, self.zero & 0xFF), np.int64)
        m = n * oh * ow
        (xh, rows, done), nbytes = scratch_offsets(
            parts * _round64(hp * wp * self.c * nhwc + NHWC_SLACK) // 4,
            -(-(m * dense.k4 + NHWC_SLACK) // 4), -(-m * self.o * self.epi.dtype.itemsize // 4))
        return (dense, unfold_fn((self.kh, self.kw), nhwc), self._unfold_rows[key].ctypes.data,
                (xh, rows, done), nbytes)

    def _pixel_signature(self, buffers: list, dims: tuple) -> tuple | None:
        """The chain step of the pixel-row path: unfold, GEMM, transpose to NCHW; split
        (its GEMM over the threads, by ``__call__``) at run_qgemm's size."""
        n, _, _, oh, ow = dims
        m, p = n * oh * ow, oh * ow
        size = self.epi.dtype.itemsize

        def build():
            dense, unfold, row, (xh, rows, done), nbytes = self._pixel_parts(dims)
            calls = [(unfold, [Buffer(0), At(2, xh), At(2, rows), row]),
                     dense.driver_call(At(2, rows), At(2, done), m),
                     (transpose_fn(size), [At(2, done), Buffer(1), n, p, self.o])]
            entry = ChainEntry.sequence(calls)
            entry.keep = self._unfold_rows[dims[:3]]  # the unfold's row, for the step's life
            return entry, nbytes, m * self.o * self.k4 >= GEMM_PARALLEL_MACS
        return self._steps.signature(("pixels", *dims), build)

    def _run_pixel_rows(self, x, out, dims: tuple) -> None:
        """Unfold, GEMM, transpose; on several threads each step split (image ranges for
        the copies, run_qgemm's blocks for the GEMM)."""
        n, _, _, oh, ow = dims
        threads = task_threads() if n * oh * ow * self.o * self.k4 >= GEMM_PARALLEL_MACS else 1
        parts = min(n, 2 * threads) if threads > 1 else 1
        dense, unfold, row, (xh, rows, done), nbytes = self._pixel_parts(dims, parts)
        (base,) = scratch_addresses(-(-nbytes // 4))
        m = n * oh * ow
        if parts == 1:
            unfold(x.ctypes.data, base + xh, base + rows, row)
        else:
            unfolds, transposes = self._pixel_split(dims, parts)
            unfolds.launch(1, (x.ctypes.data, base, base, 0), threads)
        run_qgemm(dense.driver, dense.cfg, base + rows, dense.packed.ctypes.data, base + done,
                  m, self.o, dense.k4 // 4, dense.k4, self.o, dense.epi.args)
        if parts == 1:
            transpose_fn(self.epi.dtype.itemsize)(base + done, out.ctypes.data, n, oh * ow,
                                                  self.o)
        else:
            transposes.launch(1, (base, out.ctypes.data), threads)

    def _pixel_split(self, dims: tuple, parts: int) -> tuple:
        """(unfold tasks, transpose tasks) over ``parts`` image ranges, each unfolding
        through its own NHWC planes: launched with bases (x, scratch, scratch, 0) and
        (scratch, out)."""
        key = ("split", *dims, parts)
        found = self._unfold_rows.get(key)
        if found is not None:
            return found
        n, h, w, oh, ow = dims
        dense, unfold, _, (xh, rows, done), _ = self._pixel_parts(dims, parts)
        p, size = oh * ow, self.epi.dtype.itemsize
        pt, pl, pb, pr = self.padding
        planes = _round64((h + pt + pb) * (w + pl + pr) * self.c + NHWC_SLACK)
        ranges = split_range(n, parts)
        unfolds, transposes = NativeTasks(len(ranges)), NativeTasks(len(ranges))
        first = self._unfold_rows[(n, h, w)]
        kept = []
        for t, (i0, i1) in enumerate(ranges):
            kept.append(first.copy())
            kept[-1][0] = i1 - i0
            unfolds.records[t, :5] = (native_address(unfold), i0 * self.c * h * w,
                                      xh + t * planes, rows + i0 * p * dense.k4,
                                      kept[-1].ctypes.data)
            transposes.records[t, :6] = (native_address(transpose_fn(size)),
                                         done + i0 * p * self.o * size, i0 * self.o * p * size,
                                         i1 - i0, p, self.o)
        unfolds.keep = kept
        self._unfold_rows[key] = (unfolds, transposes)
        return unfolds, transposes

    def _rows_signature(self, buffers: list, n: int, p: int) -> tuple | None:
        """The chain step of the pixel-row GEMM: 1x1 planes are already rows; others go
        through two transposes in the register file's scratch."""
        if p == 1:
            return self.dense.native_signature([((n, self.c), buffers[0][1]),
                                                ((n, self.o), buffers[1][1])])
        if self.dense.flip:
            return None  # __call__ flips the bytes first
        macs = n * p * self.o * self.dense.k4

        def build():
            return (ChainEntry.sequence(self._rows_calls(0, n, p, 0)), self._rows_bytes(n, p),
                    macs >= GEMM_PARALLEL_MACS, lambda threads: Parts(
                        n, lambda lo, hi, scratch, offset: self._rows_calls(lo, hi, p, offset),
                        lambda units: self._rows_bytes(units, p), mac_seconds(macs) / n))
        return self._steps.signature(("rows", n, p), build)

    def _rows_bytes(self, n: int, p: int) -> int:
        """Scratch bytes of the pixel rows and GEMM rows of ``n`` images."""
        return self._rows_offsets(n, p)[1]

    def _rows_offsets(self, n: int, p: int) -> tuple:
        size = self.epi.dtype.itemsize
        return scratch_offsets(-(-n * p * self.c // 4), -(-n * p * self.o * size // 4))

    def _rows_calls(self, lo: int, hi: int, p: int, offset: int) -> list:
        """Images ``lo..hi`` as pixel rows, one GEMM, and back, in the step's scratch (buffer
        2) from byte ``offset``: the same rows and sums as all images at once."""
        size, count = self.epi.dtype.itemsize, hi - lo
        (rows, done), _ = self._rows_offsets(count, p)
        rows_at, done_at = At(2, offset + rows), At(2, offset + done)
        return [(transpose_fn(1), [At(0, lo * self.c * p), rows_at, count, self.c, p]),
                self.dense.driver_call(rows_at, done_at, count * p),
                (transpose_fn(size), [done_at, At(1, lo * self.o * p * size), count, p,
                                      self.o])]

    def __call__(self, x, out):
        x, (n, h, w, oh, ow) = conv_dims(self, x, self.c * self.groups)
        check_out(out, (n, self.o, oh, ow), self.epi.dtype, self.op)
        if not out.size:
            return out
        p = h * w
        if self._as_rows(n, p):  # NCHW -> pixel rows -> one GEMM -> NCHW
            rows = np.ascontiguousarray(x.reshape(n, self.c, p).transpose(0, 2, 1))
            done = np.empty((n, p, self.o), out.dtype)
            self.dense(rows.reshape(n * p, self.c), done.reshape(n * p, self.o))
            out.reshape(n, self.o, p)[...] = done.transpose(0, 2, 1)
            return out
        if self._pixel_mode(n, oh * ow):
            self._run_pixel_rows(x, out, (n, h, w, oh, ow))
            return out
        threads = task_threads()
        key = (n, h, w, threads)
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) > 64:  # many input sizes: start over
                self._plans.clear()
            plan = self._plans[key] = conv_plan(self, n, (h, w, oh, ow), threads)
        (arena,) = scratch_addresses(-(-plan.arena // 4))
        plan.run(x.ctypes.data, arena, out.ctypes.data, threads)
        return out


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
        self.x_np, self.flip = ACT_DTYPES[x_dtype]
        zero = int(x_zero) + (128 if self.flip else 0)
        self.epi = Epilogue(np.ascontiguousarray(w_kn.T), zero, scale, bias, out, relu, post)
        self.cfg = QGemmConfig("col", self.epi.kind, host_vnni() if vnni is None else vnni,
                               self.epi.mid)
        self.driver = qgemm_driver(self.cfg)
        self._steps = ChainSteps()

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains: the GEMM driver
        on the step's buffers (uint8 rows whose K is a multiple of 4, read in place; other
        inputs are copied by ``__call__``, which then runs); ``splits``: as ``run_qgemm``."""
        if len(buffers) != 2 or self.flip or self.k != self.k4 or not self.n:
            return None
        (shape, dtype), (out_shape, out_dtype) = buffers
        if (np.dtype(dtype) != self.x_np or not shape or shape[-1] != self.k
                or tuple(out_shape) != tuple(shape[:-1]) + (self.n,)
                or np.dtype(out_dtype) != self.epi.dtype):
            return None
        m = int(np.prod(shape[:-1], dtype=np.int64))
        if not m:
            return None

        def build():
            entry = ChainEntry.sequence([self.driver_call(Buffer(0), Buffer(1), m)])
            macs = m * self.n * self.k4
            return (entry, 0, macs >= GEMM_PARALLEL_MACS and len(gemm_blocks(m, self.n, 2)) > 1,
                    lambda threads: self._split_form(m, threads))
        return self._steps.signature((m,), build)

    def _split_form(self, m: int, threads: int) -> Launches | None:
        """The GEMM blocks of ``run_qgemm`` at ``threads`` for a chain's parallel step."""
        tasks = qgemm_tasks(self.driver, self.cfg, m, self.n, self.k4 // 4, self.k4, self.n,
                            self.epi.args, threads)
        return None if tasks is None else Launches(
            ((tasks, (Buffer(0), self.packed.ctypes.data, Buffer(1))),), 0,
            mac_seconds(m * self.n * self.k4))

    def driver_call(self, a, c, m: int) -> tuple:
        """(driver, arguments) of ``m`` uint8 rows at ``a`` (K a multiple of 4, unflipped)
        into ``c``: a ChainEntry call (``a`` / ``c``: Buffer / At of the step)."""
        return self.driver, [a, self.packed.ctypes.data, c, m, self.n, self.k4 // 4, self.k4,
                             self.n, *self.epi.args]

    def __call__(self, x, out):
        x = check_operand(x, self.x_np, "data", self.op)
        if not x.shape or x.shape[-1] != self.k:
            raise ShapeError(f"expects [..., {self.k}], got {x.shape}", op=self.op,
                             param="data")
        check_out(out, x.shape[:-1] + (self.n,), self.epi.dtype, self.op)
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
