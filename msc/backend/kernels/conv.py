"""Native "kernel" facts for nn.conv2d and msc.conv2d_bias.

NCHW in and out (the common case, also grouped and strided): direct_conv.DirectConv2d, a
direct convolution (each (channel, tap) pair reads the padded input at a fixed offset, no
im2col; strides split the input into phase planes first). It replaced an im2col + packed GEMM
path that was slower on every measured shape (densenet's 3x3 128->32 convs 0.21-0.52x the
time, shufflenet's grouped 1x1 0.39-0.59x, resnet's 3x3 0.59-0.91x). Depthwise convs run on
the window kernel of pool.py.

Ungrouped NCHW convs with small output planes and long sums (_pixel_wins, AVX-512 hosts) run
as pixel tiles (pixel_conv.PixelConv2d: 6 pixels x 64 channels a register tile reading the
padded input in place, 1.1-1.3x the direct conv and the GEMM path on 14x14 / 7x7 planes), and
so do windowed convs on larger planes with still longer sums (_pixel_large: VGG's 56x56 and
112x112 3x3 convs, 1.1-1.25x the direct conv).

Other layouts (NHWC), and NCHW convs with small output planes (_gemm_wins): pixels on the
GEMM's M side and the weight as prepacked B panels; NCHW data is transposed to NHWC in scratch,
an NCHW result transposed back. The direct kernel's 48-position tile wastes most of a tail on
a 7x7 plane (49 = 48 + 1) and its wide rows a quarter of a 14x14 padded 3x3 conv; there the
GEMM path measured 1.1-1.5x faster (resnet50's 7x7 1x1 and 3x3 convs, its 14x14 3x3 convs),
while on larger planes and 14x14 1x1 convs the direct kernel stays ahead.

Threads (msc/backend/runtime/threads.py): direct convs split output row bands, depthwise images and
channel ranges, NHWC images, else the GEMM.

Bias (msc.conv2d_bias, or fused add / bias_add), scale (fused multiply, batch_norm) and relu
are folded into the weights and the kernel's epilogue. float32 and constant weights only;
everything else uses the op's numpy fact.
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...relax.op.registry import attach
from ..runtime.chain_split import PARTS_PER_THREAD, Launches, Parts
from ..runtime.task_wrap import At, ChainEntry
from ..runtime.threads import parallel_for, split_range, task_threads
from . import gemm as gemm_kernel
from .base import Kernel, KernelFact, Site
from .dense import F32, Address, GemmRunner, as_f32, fold_epilogue
from .direct_conv import RELU6, DirectConv2d, residual_fits
from .direct_conv_plan import conv_seconds
from .dw_lanes import LANES_SIZES, LanesDepthwise, lanes_wins
from .epilogues import upper_bound
from .layout import im2col_fn, scratch_addresses, scratch_offsets, transpose_fn, transpose_tasks
from .pixel_conv import PixelConv2d, pixel_conv_available
from .pool import NO_BOUND, pad4, pair, pick_window, sane_window
from .window_parts import UNITS, window_parts, window_seconds

__all__ = ["Conv2dFact", "conv_geometry"]

_LAYOUTS = ("NCHW", "NHWC")
_PANEL_BYTES = 512 * 1024  # packed patches per GEMM call: about half of a Zen 4 core's L2
_DEPTHWISE_PARALLEL = 1.5e5  # multiply-adds (~20-40 us); shufflenet's are 0.2-1M (gemm.py's note)
_GEMM_PLANE = 64  # output pixels per image up to which any dense NCHW conv takes the GEMM path
_GEMM_PLANE_WINDOW = 196  # the same for windows larger than 1x1 (padded wide rows cost more)
_BATCH_SCRATCH = 2 << 20  # bytes of scratch per call of the GEMM path's batched images
# 1x1 convs with short sums (K = C) on small planes take the direct conv: the pixel tiles and
# the GEMM path pack and transpose more than such sums repay. (window, plane pixels in
# (lo, hi], K below). Whole models, one thread, CPU time, with / without: PoolFormer (16 -> 64
# and 64 -> 16 on 8x8) 460 -> 416 us at batch 16, RepVGG 640 -> 611 us; the same rule for 3x3
# windows (K < 288) measured faster alone but made PoolFormer, ConvNeXt and RepVGG 4-20%
# slower (2026-12-02, docs/perf/corpus-speed.md "channels in the lanes").
_SHORT_SUMS = ((False, 16, 64, 64),)
# (most output pixels, fewest K) pairs where pixel_conv.py beats the direct conv and the GEMM
# path: 14x14 / 7x7 3x3 1.1-1.3x, 28x28 3x3 of stride 2 1.08x; shorter sums (squeezenet's
# 13x13 3x3 with K = 432) measured faster alone but 1.5% slower in the model; 1x1 convs read
# their input as is on the direct path, which keeps 13x13 / 14x14 / 28x28 1x1 with < 1024
# channels (whole models 1-5% faster: squeezenet, inception_v2, densenet121, resnet50)
_PIXEL_LIMITS = ((64, 0), (1024, 512))
_PIXEL_LIMITS_1X1 = ((64, 0), (1024, 1024))
# Larger planes: windowed convs with at least 128 output channels and K >= 2048, or K >= 1152
# with no more output than input channels, run faster as pixel tiles than direct (1 thread,
# CPU time, pixel / direct: VGG's 256 -> 256 on 56x56 0.92, 128 -> 128 on 112x112 0.84-0.88,
# 192 -> 192 on 56x56 0.89, 256 -> 512 on 56x56 0.90, 512 -> 512 on 56x56 0.79; kept direct:
# 128 -> 256 on 56x56 1.04, 64 -> 128 on 112x112 1.15, densenet's 128 -> 32 on 56x56 1.09)
_PIXEL_LARGE = (128, 2048, 1152)  # fewest output channels, K, K when O <= C


def conv_geometry(h: int, w: int, kh: int, kw: int, strides, padding, dilation) -> tuple:
    """(OH, OW) of a 2-D convolution."""
    (sh, sw), (dh, dw) = strides, dilation
    top, left, bottom, right = padding
    oh = (h + top + bottom - dh * (kh - 1) - 1) // sh + 1
    ow = (w + left + right - dw * (kw - 1) - 1) // sw + 1
    return oh, ow


def _plane(site: Site) -> int:
    """Output pixels per image of a static 4-D result, else 0."""
    out = site.out
    if not getattr(out, "is_static", False) or getattr(out, "ndim", 0) != 4:
        return 0
    return int(out.values[2]) * int(out.values[3])


def _short_sum(plane: int, weight_oihw: np.ndarray) -> bool:
    """Whether a dense conv's sum is too short for the pixel tiles or the GEMM path on its
    plane (see _SHORT_SUMS): it takes the direct conv."""
    window, k = weight_oihw.shape[2:] != (1, 1), int(np.prod(weight_oihw.shape[1:]))
    return any(window is w and lo < plane <= hi and k < most
               for w, lo, hi, most in _SHORT_SUMS)


def _pixel_wins(site: Site, weight_oihw: np.ndarray) -> bool:
    """Whether pixel_conv.py takes an ungrouped NCHW conv (measured, 1 thread): its tiles waste
    no multiplies on small planes, but its [P][O] scratch is transposed into NCHW, which the
    direct conv's stores avoid, so larger planes need longer sums (K = C * window) to win."""
    plane, k = _plane(site), int(np.prod(weight_oihw.shape[1:]))
    if _short_sum(plane, weight_oihw):
        return False
    limits = _PIXEL_LIMITS_1X1 if weight_oihw.shape[2:] == (1, 1) else _PIXEL_LIMITS
    return plane > 0 and (any(plane <= most and k >= least for most, least in limits)
                          or _pixel_large(weight_oihw))


def _pixel_large(weight_oihw: np.ndarray) -> bool:
    """Whether a windowed conv's sum is long enough for the pixel tiles on any plane."""
    (o, c, kh, kw), (fewest, long, long_narrow) = weight_oihw.shape, _PIXEL_LARGE
    k = c * kh * kw
    return (kh, kw) != (1, 1) and o >= fewest and (k >= long or (k >= long_narrow and o <= c))


def _gemm_wins(site: Site, weight_oihw: np.ndarray, groups: int) -> bool:
    """Whether an NCHW conv runs faster as im2col + GEMM than directly (measured on resnet50's
    shapes, see the module doc): ungrouped, with a small static output plane."""
    out = site.out
    if groups != 1 or not getattr(out, "is_static", False) or getattr(out, "ndim", 0) != 4:
        return False
    plane = int(out.values[2]) * int(out.values[3])
    if _short_sum(plane, weight_oihw):
        return False
    limit = _GEMM_PLANE if weight_oihw.shape[2:] == (1, 1) else _GEMM_PLANE_WINDOW
    return 0 < plane <= limit


class _ConvKernel(Kernel):
    """Argument checks shared by the variants; ``_run`` sees checked, non-empty arrays."""

    inputs = (0,)
    nchw_in = nchw_out = True

    def __init__(self, op: str, weight_oihw: np.ndarray, groups: int, attrs: dict):
        o, cg, self.kh, self.kw = weight_oihw.shape
        self.op, self.o, self.groups, self.c = op, o, groups, cg * groups
        self.strides, self.padding = attrs["strides"], attrs["padding"]
        self.dilation = attrs["dilation"]

    def __call__(self, x, out):
        x = as_f32(x, "data", self.op)
        if x.ndim != 4:
            raise ShapeError(f"expects a 4-D input, got {x.shape}", op=self.op, param="data")
        n, c, h, w = x.shape if self.nchw_in else (x.shape[0], x.shape[3], *x.shape[1:3])
        if c != self.c:
            raise ShapeError(f"input has {c} channels, the weight {self.c}", op=self.op,
                             param="data")
        oh, ow = conv_geometry(h, w, self.kh, self.kw, self.strides, self.padding, self.dilation)
        oh, ow = max(oh, 0), max(ow, 0)
        want = (n, self.o, oh, ow) if self.nchw_out else (n, oh, ow, self.o)
        if out.shape != want or out.dtype != F32 or not out.flags.c_contiguous:
            raise ShapeError(f"output buffer {out.shape}, expected {want}", op=self.op,
                             param="out")
        if out.size:
            self._run(x, out, n, h, w, oh, ow)
        return out

    def _run(self, x, out, n, h, w, oh, ow) -> None:
        raise NotImplementedError


class _DepthwiseNCHW(_ConvKernel):
    """groups == channels: each output plane is a weighted window sum of one input plane."""

    def __init__(self, op, weight_oihw, bias, relu, groups, attrs, hi: float = np.inf):
        super().__init__(op, weight_oihw, groups, attrs)
        self.w = np.ascontiguousarray(weight_oihw.reshape(self.o, -1), np.float32)
        # the upper clamp of a fused relu6 (clip(x, 0, hi)) as float32 bits; +inf: none
        self.hi = NO_BOUND if hi == np.inf else int(np.array(hi, np.float32).view(np.int32))
        self.bias = np.zeros(self.o, np.float32) if bias is None else np.ascontiguousarray(
            np.broadcast_to(bias, (self.o,)), np.float32)
        self.relu = int(bool(relu))
        # 3x3 windows of stride 1 / 2 read the planes in place (window3.py), others pad
        self.window = pick_window("dwconv", (self.kh, self.kw), self.strides, self.dilation)
        self.ptrs, self.addr = (self.w.ctypes.data, self.bias.ctypes.data), (Address(), Address())
        # small planes and 7x7 windows: the channels in the vector lanes (dw_lanes.py)
        self.lanes = LanesDepthwise(self.w, self.bias, self.kh, self.strides[0],
                                    self.padding[:2], self.relu, self.hi) \
            if self._lanes_fit() else None

    def _lanes_fit(self) -> bool:
        return self.o == self.c and self.kh == self.kw and self.kh in LANES_SIZES and \
            self.strides[0] == self.strides[1] and tuple(self.dilation) == (1, 1)

    def _takes_lanes(self, oh: int, ow: int) -> bool:
        return self.lanes is not None and lanes_wins(self.kh, oh, ow)

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains (runtime/
        native_run.KernelStep): float32 NCHW buffers of the shapes ``__call__`` takes; one
        window call, as ``_run`` makes on one thread; ``splits``: enough work to split."""
        if len(buffers) != 2 or any(np.dtype(d) != F32 for _, d in buffers):
            return None
        (shape, _), (out_shape, _) = buffers
        if len(shape) != 4 or shape[1] != self.c:
            return None
        n, _, h, w = shape
        oh, ow = conv_geometry(h, w, self.kh, self.kw, self.strides, self.padding,
                               self.dilation)
        if tuple(out_shape) != (n, self.o, oh, ow) or min(n, oh, ow) <= 0:
            return None
        splits = n * self.o * oh * ow * self.kh * self.kw >= _DEPTHWISE_PARALLEL
        if self._takes_lanes(oh, ow):
            return (*self.lanes.chain_signature(n, h, w, oh, ow, len(buffers)), splits and n > 1)
        return (*self.window.chain_signature((n * self.o, self.c, *self._geometry(h, w, oh, ow)),
                                             0, *self.ptrs, len(buffers)), splits)

    def native_parts(self, buffers: list) -> Parts | None:
        """Images (one image: input-channel ranges) as the units of a chain's parallel step
        (runtime/chain_split.py), each range one window call as ``_run`` splits them."""
        if self.native_signature(buffers) is None:
            return None
        (n, _, h, w), _ = buffers[0]
        (_, _, oh, ow), _ = buffers[1]
        mult, taps, planes_in, planes_out = self.o // self.c, self.kh * self.kw, h * w, oh * ow
        geometry = self._geometry(h, w, oh, ow)
        per_image = 1 if n > 1 else min(self.c, UNITS)
        ranges = [((i * self.c + c0) * planes_in * 4, (i * self.o + c0 * mult) * planes_out * 4,
                   c0 * mult * taps * 4, c0 * mult * 4, (c1 - c0) * mult, c1 - c0)
                  for i in range(n) for c0, c1 in split_range(self.c, per_image)]
        seconds = window_seconds(n * self.o * planes_out * taps, self.window,
                                 (n * self.o, self.c, *geometry), (buffers[0][0], buffers[1][0]),
                                 0, *self.ptrs)
        return window_parts(self.window, ranges, geometry, 0, *self.ptrs, seconds)

    def _geometry(self, h, w, oh, ow) -> tuple:
        return (self.o // self.c, h, w, self.kh, self.kw, *self.strides, *self.padding[:2],
                *self.dilation, oh, ow, self.relu, self.hi)

    def _run(self, x, out, n, h, w, oh, ow) -> None:
        mult, taps, planes_in, planes_out = self.o // self.c, self.kh * self.kw, h * w, oh * ow
        threads = task_threads() if n * self.o * planes_out * taps >= _DEPTHWISE_PARALLEL else 1
        # Tasks are input-channel ranges of one image: their output planes are contiguous.
        parts = min(self.c, -(-2 * threads // n))
        xp, op, (wp, bp) = self.addr[0](x), self.addr[1](out), self.ptrs
        geometry = self._geometry(h, w, oh, ow)
        if self._takes_lanes(oh, ow):  # tasks of one image each
            run = self.lanes.parallel if threads > 1 and n > 1 else self.lanes
            run(xp, op, n, h, w, oh, ow)
            return
        if threads == 1:
            self.window(xp, op, 0, wp, bp, n * self.o, self.c, *geometry)
            return
        # one native task per image and input-channel range, each with its own scratch
        ranges = [(i, self.c * part // parts, self.c * (part + 1) // parts)
                  for i in range(n) for part in range(parts)]
        self.window.parallel(tuple(((i * self.c + c0) * planes_in * 4,
                                    (i * self.o + c0 * mult) * planes_out * 4,
                                    c0 * mult * taps * 4, c0 * mult * 4, (c1 - c0) * mult, c1 - c0)
                                   for i, c0, c1 in ranges), xp, op, 0, wp, bp, geometry)


class _Conv2dNHWC(_ConvKernel):
    """Pixels as the GEMM's M side, the weight as prepacked B; transposes for NCHW ends."""

    def __init__(self, op, weight_oihw, bias, relu, groups, attrs):
        super().__init__(op, weight_oihw, groups, attrs)
        self.nchw_in = attrs["data_layout"] == "NCHW"
        self.nchw_out = attrs["out_layout"] == "NCHW"
        b_kn = weight_oihw.transpose(2, 3, 1, 0).reshape(-1, self.o)
        self.gemm = GemmRunner(b_kn, bias, relu)
        self.pointwise = (self.kh, self.kw) == (1, 1) and self.strides == (1, 1) and not any(
            self.padding)
        self.im2col, self.transpose = im2col_fn(), transpose_fn()
        self.addr = (Address(), Address())
        self._chains: dict = {}  # (input shape, images a call) -> (ChainEntry, scratch bytes)

    def _run(self, x, out, n, h, w, oh, ow) -> None:
        threads = task_threads() if n > 1 else 1
        if threads > 1 and 2.0 * oh * ow * self.gemm.k * self.o >= gemm_kernel.PARALLEL_FLOPS:
            # Images in parallel, each with its own thread's scratch and an unsplit GEMM.
            parallel_for(n, lambda i: self._images(x, out, i, 1, h, w, oh, ow), threads)
            return
        # Several images a call: one transpose, one GEMM (which splits itself across threads)
        # for all of them. Per image, the four native calls and their Python cost ~9 us,
        # more than the GEMM of a small plane (HF MobileNetV2's 4x4 convs at batch 16).
        per_image = 4 * (h * w * self.c + oh * ow * (self.gemm.k + self.o))
        step = max(1, _BATCH_SCRATCH // per_image)
        for i in range(0, n, step):
            self._images(x, out, i, min(step, n - i), h, w, oh, ow)

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains (runtime/
        native_run.KernelStep): the transposes, patches and GEMM of ``_run`` on one thread as
        one step, their buffers in the register file's scratch; ``splits``: images or the GEMM
        split across threads. None where ``__call__`` decides."""
        if len(buffers) != 2 or any(np.dtype(d) != F32 for _, d in buffers) or not self.gemm.k:
            return None
        (shape, _), (out_shape, _) = buffers
        if len(shape) != 4:
            return None
        n, c, h, w = shape if self.nchw_in else (shape[0], shape[3], *shape[1:3])
        oh, ow = conv_geometry(h, w, self.kh, self.kw, self.strides, self.padding,
                               self.dilation)
        want = (n, self.o, oh, ow) if self.nchw_out else (n, oh, ow, self.o)
        if c != self.c or tuple(out_shape) != want or min(n, oh, ow) <= 0:
            return None
        per_image = 4 * (h * w * c + oh * ow * (self.gemm.k + self.o))
        step = max(1, _BATCH_SCRATCH // per_image)
        splits = n > 1 or gemm_kernel.gemm_splits(min(step, n) * oh * ow, self.o, self.gemm.k,
                                                  self.gemm.nr)
        key = (tuple(shape), step)
        if key not in self._chains:
            calls, nbytes = [], 0
            for i in range(0, n, step):
                more, size = self._image_calls(i, min(step, n - i), h, w, oh, ow, len(buffers))
                calls += more
                nbytes = max(nbytes, size)
            self._chains[key] = (ChainEntry.sequence(calls), nbytes)
        entry, nbytes = self._chains[key]
        form = None
        if n == 1:  # one image: its GEMM's blocks split from inside the chain
            def form(parts: int) -> Launches | None:
                return self._split_form(h, w, oh, ow, len(buffers),
                                        max(2, parts // PARTS_PER_THREAD))
        return (*entry.signature, nbytes, splits) + ((form,) if form else ())

    def _split_form(self, h, w, oh, ow, scratch: int, threads: int) -> Launches | None:
        """One image's calls with the GEMM's blocks at ``threads`` as a task list (gemm.py's
        split, as ``gemm.run`` launches it) and the NCHW result's transpose by output channel
        ranges; the input's transpose and the patches before it on the calling thread. None
        when the GEMM is one block."""
        calls, nbytes = self._image_calls(0, 1, h, w, oh, ow, scratch)
        gemm, at = self.gemm, [c[0] for c in calls].index(self.gemm.driver)
        src, *_, dst, m = calls[at][1][:5]
        tasks = gemm_kernel.gemm_tasks(gemm.driver, gemm.nr, m, gemm.n, gemm.k, gemm.k, gemm.n,
                                       gemm.relu, threads)
        if tasks is None:
            return None
        calls[at] = (tasks, (src, *gemm.ptrs, dst))
        if calls[-1][0] is self.transpose and at == len(calls) - 2:  # [P][O] -> NCHW
            tiles, out, _, pixels, o = calls[-1][1]
            calls[-1] = (transpose_tasks(pixels, o, threads), (tiles, out))
        return Launches(tuple(calls), nbytes, conv_seconds(m * gemm.k * self.o, DirectConv2d))

    def native_parts(self, buffers: list) -> Parts | None:
        """Images as the units of a chain's parallel step (runtime/chain_split.py): a part
        makes ``_images``' calls for its images, up to the one-thread step's count a call,
        in its own part of the scratch."""
        if self.native_signature(buffers) is None:
            return None
        (shape, _), (out_shape, _) = buffers
        n, c, h, w = shape if self.nchw_in else (shape[0], shape[3], *shape[1:3])
        oh, ow = (out_shape[2:] if self.nchw_out else out_shape[1:3])
        per_image = 4 * (h * w * c + oh * ow * (self.gemm.k + self.o))
        step = max(1, _BATCH_SCRATCH // per_image)

        def calls(lo: int, hi: int, scratch: int, at: int) -> list:
            return [call for i in range(lo, hi, step) for call in self._image_calls(
                i, min(step, hi - i), h, w, oh, ow, scratch, at)[0]]

        def nbytes(units: int) -> int:
            return self._image_calls(0, min(step, units), h, w, oh, ow, 2)[1]

        macs = oh * ow * self.gemm.k * self.o
        return Parts(n, calls, nbytes, conv_seconds(macs, DirectConv2d))

    def _image_calls(self, i, m, h, w, oh, ow, scratch: int, at: int = 0) -> tuple:
        """(the native calls of ``_images`` on the step's buffers, scratch bytes), their
        scratch from byte ``at`` of buffer ``scratch``."""
        c, o, p, hw = self.c, self.o, oh * ow, h * w
        k = self.kh * self.kw * c
        nchw_in, nchw_out = self.nchw_in and hw > 1, self.nchw_out and p > 1
        (t, a, cbuf), nbytes = scratch_offsets(m * hw * c if nchw_in else 0,
                                               0 if self.pointwise else m * p * k,
                                               m * p * o if nchw_out else 0)
        t, a, cbuf = (At(scratch, at + off) for off in (t, a, cbuf))
        src, dst = At(0, i * hw * c * 4), At(1, i * p * o * 4)
        calls = []
        if nchw_in:
            calls.append((self.transpose, (src, t, m, c, hw)))
            src = t
        if not self.pointwise:
            for j in range(m):
                calls.append((self.im2col, (At(src.index, src.offset + j * hw * c * 4),
                                            At(scratch, a.offset + j * p * k * 4), h, w, c, 0,
                                            c, self.kh, self.kw, *self.strides,
                                            *self.padding[:2], *self.dilation, oh, ow)))
            src = a
        gemm = self.gemm
        calls.append((gemm.driver, (src, *gemm.ptrs, cbuf if nchw_out else dst, m * p, gemm.n,
                                    gemm.k, gemm.k, gemm.n, gemm.relu)))
        if nchw_out:
            calls.append((self.transpose, (cbuf, dst, m, p, o)))
        return calls, nbytes

    def _images(self, x, out, i, m, h, w, oh, ow) -> None:
        """Images ``i .. i + m``: NHWC pixels of consecutive images are consecutive GEMM rows."""
        c, o, p, hw = self.c, self.o, oh * ow, h * w
        k = self.kh * self.kw * c
        # a 1x1 plane is laid out alike in NCHW and NHWC (squeeze-excite's convs): no
        # transposes, no scratch (a 480 -> 120 one: 11.4 -> 9.9 us, its GEMM 6.2 us)
        nchw_in, nchw_out = self.nchw_in and hw > 1, self.nchw_out and p > 1
        t, a, cbuf = scratch_addresses(m * hw * c if nchw_in else 0,
                                       0 if self.pointwise else m * p * k,
                                       m * p * o if nchw_out else 0)
        src, dst = self.addr[0](x) + i * hw * c * 4, self.addr[1](out) + i * p * o * 4
        if nchw_in:
            self.transpose(src, t, m, c, hw)
            src = t
        if not self.pointwise:
            for j in range(m):
                self.im2col(src + j * hw * c * 4, a + j * p * k * 4, h, w, c, 0, c, self.kh,
                            self.kw, *self.strides, *self.padding[:2], *self.dilation, oh, ow)
            src = a
        self.gemm.run(src, m * p, cbuf if nchw_out else dst)
        if nchw_out:
            self.transpose(cbuf, dst, m, p, o)


def _weight_oihw(site: Site, layout: str) -> np.ndarray | None:
    w = site.const(1)
    if w is None or w.ndim != 4 or sorted(layout) != sorted("OIHW"):
        return None
    return np.ascontiguousarray(np.transpose(w, [layout.index(ch) for ch in "OIHW"]),
                                np.float32)


def _attrs(site: Site) -> dict:
    data_layout = site.attr("data_layout") or "NCHW"
    return {"strides": pair(site.attr("strides", 1)),
            "padding": pad4(site.attr("padding", 0)),
            "dilation": pair(site.attr("dilation", 1)),
            "data_layout": data_layout,
            "out_layout": site.attr("out_layout") or data_layout,
            "groups": int(site.attr("groups", 1))}


def _depthwise(weight_shape, attrs: dict) -> bool:
    """An NCHW conv make() gives to _DepthwiseNCHW (groups > 1, one input channel a group)."""
    return (attrs["data_layout"] == attrs["out_layout"] == "NCHW" and attrs["groups"] > 1
            and weight_shape[1] == 1)


class Conv2dFact(KernelFact):
    epilogues = frozenset({"bias", "scale", "relu"})

    def __init__(self, has_bias: bool = False):
        self.has_bias = has_bias

    def match(self, site: Site) -> bool:
        x, w, out = site.tensor(0), site.tensor(1), site.out
        if x is None or w is None or getattr(out, "dtype", None) != "float32":
            return False
        if x.dtype != "float32" or w.dtype != "float32":
            return False
        if site.attr("out_dtype") not in (None, "", "void", "float32"):
            return False
        attrs = _attrs(site)
        if attrs["data_layout"] not in _LAYOUTS or attrs["out_layout"] not in _LAYOUTS:
            return False
        if not sane_window(attrs["strides"], attrs["dilation"], attrs["padding"]):
            return False
        nchw = attrs["data_layout"] == attrs["out_layout"] == "NCHW"
        if attrs["groups"] < 1 or (attrs["groups"] > 1 and not nchw):
            return False
        weight = _weight_oihw(site, site.attr("kernel_layout") or "OIHW")
        if weight is None or weight.shape[0] % attrs["groups"] or not all(weight.shape):
            return False
        return not self.has_bias or (site.const(2) is not None and site.const(2).dtype == F32)

    def channel_axis(self, site: Site) -> int | None:
        return _attrs(site)["out_layout"].index("C")

    def epilogues_for(self, site: Site) -> frozenset:
        """The direct conv's tile stores add a residual (ResNet's shortcut) when its output
        rows are written as they are: 1x1 convs without padding that take the direct path."""
        attrs, w = _attrs(site), site.const(1)
        if (w is not None and w.ndim == 4 and (site.attr("kernel_layout") or "OIHW") == "OIHW"
                and _depthwise(w.shape, attrs)):
            return self.epilogues | {"clip", "clip6"}  # the window kernels clamp above
        if (w is not None and w.ndim == 4 and (site.attr("kernel_layout") or "OIHW") == "OIHW"
                and attrs["data_layout"] == attrs["out_layout"] == "NCHW"
                and (attrs["groups"] > 1 or not _gemm_wins(site, w, 1) or (
                    _pixel_wins(site, w) and pixel_conv_available()))):
            extra = {"clip6"}  # the direct and pixel convs' relu6 (not the GEMM path's)
        else:
            extra = set()
        if (w is None or w.ndim != 4 or attrs["groups"] != 1
                or attrs["data_layout"] != "NCHW" or attrs["out_layout"] != "NCHW"
                or (site.attr("kernel_layout") or "OIHW") != "OIHW"
                or not residual_fits(w.shape, attrs) or _gemm_wins(site, w, 1)
                or (_pixel_wins(site, w) and pixel_conv_available())):
            return self.epilogues | extra
        return self.epilogues | {"residual"} | extra

    def make(self, site: Site) -> Kernel:
        weight = _weight_oihw(site, site.attr("kernel_layout") or "OIHW")
        bias, relu, scale = fold_epilogue(site.const(2) if self.has_bias else None,
                                          site.epilogue)
        if scale is not None:
            weight = weight * np.broadcast_to(scale, (weight.shape[0],))[:, None, None, None]
        attrs = _attrs(site)
        groups = attrs["groups"]
        nchw = attrs["data_layout"] == attrs["out_layout"] == "NCHW"
        residual = [i for e in site.epilogue if e[0] == "residual"
                    for i, v in enumerate(site.args) if v.id == e[1]]
        relu6 = upper_bound(site.epilogue) == 6.0  # epilogues_for allowed it on this path
        if residual:  # epilogues_for allowed it: a direct conv
            return DirectConv2d(site.op, weight, bias, RELU6 if relu6 else relu, groups,
                                attrs, residual=residual[-1])
        if _depthwise(weight.shape, attrs):
            return _DepthwiseNCHW(site.op, weight, bias, relu, groups, attrs,
                                  upper_bound(site.epilogue))
        if nchw and groups == 1 and _pixel_wins(site, weight) and pixel_conv_available():
            return PixelConv2d(site.op, weight, bias, RELU6 if relu6 else relu, attrs)
        if nchw and not _gemm_wins(site, weight, groups):
            return DirectConv2d(site.op, weight, bias, RELU6 if relu6 else relu, groups, attrs)
        return _Conv2dNHWC(site.op, weight, bias, relu, groups, attrs)


_ZEROS = [np.zeros(1024, np.float32)]


def zeros_f32(n: int) -> int:
    """Address of at least ``n`` float32 zeros (read-only). Outgrown arrays stay alive: another
    thread's kernel may still be reading one."""
    if _ZEROS[-1].size < n:
        _ZEROS.append(np.zeros(max(n, 2 * _ZEROS[-1].size), np.float32))
    return _ZEROS[-1].ctypes.data


attach("nn.conv2d", "kernel", Conv2dFact())
attach("msc.conv2d_bias", "kernel", Conv2dFact(has_bias=True))
