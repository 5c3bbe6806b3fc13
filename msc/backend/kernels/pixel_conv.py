"""Pixel-tile convolution: NCHW convs with small output planes, vectors along output channels.

The direct conv (direct_conv.py) puts output positions in the vector lanes: on a 14x14 or
7x7 plane its 48-position tiles and padded wide rows waste 20-50% of the multiplies. Here a
register tile is ``MR`` output pixels x ``NV`` vectors of output channels (6 x 64 with
AVX-512, 24 accumulators), the GEMM's tile with the patch matrix never written: pixel ``p``
reads the padded input (the direct conv's pad / phase-split pass, its offsets table) at
``pix[p] + offsets[k]`` for source ``k`` (input channel, tap), one broadcast per pixel, and
the weights are packed in panels ``[K][NV * lanes]``. Any pixel count and channel count runs
without wasted multiplies (narrower tiles at the edges). The tile writes ``[P][O]``
(pixel-major) scratch; a transpose makes the NCHW output. K is blocked (``kc`` sources) so a
weight panel block stays in L2; later blocks add to the scratch.

    kernel = PixelConv2d("nn.conv2d", weight_oihw, bias, relu, attrs)
    kernel(x, out)          # NCHW float32, checked before native code runs
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np
from llvmlite import ir

from ..llvm.jit import get_jit, vector_lanes
from ..llvm.loops import F32_PTR, I64, const64, entry_alloca, for_range, imin, switch_cases
from ..runtime.chain_split import PARTS_PER_THREAD, Launches, Parts
from ..runtime.task_wrap import At, Buffer, ChainEntry
from ..runtime.threads import NativeTasks, cache_bytes, native_address, split_range, task_threads
from .base import Kernel
from .dense import Address
from .direct_conv import PLAN_FIELDS, RELU6, DirectConv2d
from .direct_conv_plan import PREP, chain_plan, checked_plan, conv_seconds
from .direct_conv_prep import Vec
from .direct_conv_prep import gep as _gep
from .gemm import aligned_empty
from .layout import scratch_addresses, scratch_offsets, transpose_fn, transpose_tasks

__all__ = ["PixelConv2d", "pixel_conv_available"]

I64_PTR = I64.as_pointer()
MR, NV = 6, 4  # pixels x channel vectors of the register tile (24 accumulators)
_KC_BYTES = cache_bytes(2) // 4  # weight panel bytes of one K block: a quarter of L2
_PARALLEL_MACS = 1e6  # below this a conv runs on one thread (as the direct conv)
_BATCH_BYTES = 512 * 1024  # [P][O] scratch of one call when it takes several images
_ARGS = ("K", "kc", "O", "relu", "ahead", "p0", "p1", "j0", "j1")
# Calls of at most this many pixels have the first NV tiles of a panel prefetch the next
# panel (``ahead``). Alone, 1 thread, CPU time, weights cold / warm, with / without:
# resnet50's 7x7 convs (and 14x14 of stride 2) 1.04-1.15x / 1.00-1.12x; 14x14 planes (33
# tiles a panel) measured 0.92-0.97x warm and keep the loop without
_PREFETCH_PIXELS = 64


def pixel_conv_available() -> bool:
    """The tile needs 32 vector registers (AVX-512); narrower hosts keep the other paths."""
    return vector_lanes() == 16


def _symbol(lanes: int) -> str:
    return f"msc_pixel_conv_f32_l{lanes}_m{MR}_v{NV}"


def _build(module: ir.Module, lanes: int) -> None:
    """void (x, w, bias, out, offsets, pix, args): out[p][o] (+)= sum_k x[pix[p] + offsets[k]]
    * w[o // nr][k][o % nr] for pixels [p0, p1) and panels [j0, j1) (args: _ARGS); the first
    K block starts from the bias, the last applies relu when set."""
    nr = NV * lanes
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [F32_PTR] * 4 + [I64_PTR] * 3),
                     name=_symbol(lanes))
    x, w, bias, out, offsets, pix, args = fn.args
    for arg in fn.args:
        arg.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    vec = Vec(b, lanes)
    a = {name: b.load(_gep(b, args, const64(i))) for i, name in enumerate(_ARGS)}
    with for_range(b, a["K"], step=a["kc"], name="kb") as k0:
        k1 = imin(b, b.add(k0, a["kc"]), a["K"])
        first = b.icmp_signed("==", k0, const64(0))
        last = b.icmp_signed("==", k1, a["K"])
        relu = b.and_(last, b.icmp_signed("!=", a["relu"], const64(0)))
        six = b.and_(last, b.icmp_signed("==", a["relu"], const64(RELU6)))
        with for_range(b, a["j1"], start=a["j0"], name="j") as j:
            c0 = b.mul(j, const64(nr))
            left = b.sub(a["O"], c0)  # valid channels of this panel
            nv = imin(b, b.sdiv(b.add(left, const64(lanes - 1)), const64(lanes)), NV)
            tile = _Tile(b, vec, a, (x, _gep(b, w, b.mul(j, b.mul(a["K"], const64(nr)))),
                                     _gep(b, bias, c0), _gep(b, out, c0), offsets, pix),
                         left, (k0, k1, first, relu, six), nr)
            with for_range(b, a["p1"], start=a["p0"], step=MR, name="p") as p:
                mr = imin(b, b.sub(a["p1"], p), MR)
                cases = {v * 8 + m: (lambda m=m, v=v: tile.run(p, m, v))
                         for v in range(1, NV + 1) for m in range(1, MR + 1)}
                switch_cases(b, b.add(b.mul(nv, const64(8)), mr), cases)
    b.ret_void()


class _Tile:
    """One panel's tile variants (``run(p, mr, nv)``: pixels p.. p+mr, nv channel vectors)."""

    def __init__(self, b, vec, a, pointers, left, block, nr):
        self.b, self.vec, self.a, self.left, self.nr = b, vec, a, left, nr
        self.x, self.w, self.bias, self.out, self.offsets, self.pix = pointers
        self.k0, self.k1, self.first, self.relu, self.six = block

    def run(self, p, mr: int, nv: int) -> None:
        b, vec, lanes = self.b, self.vec, self.vec.lanes
        masks = [vec.mask(imin(b, b.sub(self.left, const64(lanes * v)), lanes))
                 for v in range(nv)]
        rows = [_gep(b, self.out, b.mul(b.add(p, const64(i)), self.a["O"])) for i in range(mr)]
        bases = [_gep(b, self.x, b.load(_gep(b, self.pix, b.add(p, const64(i)))))
                 for i in range(mr)]
        seeds = [vec.load(_gep(b, self.bias, const64(lanes * v)), masks[v]) for v in range(nv)]
        accs = [[entry_alloca(b, vec.ty, f"acc{i}_{v}") for v in range(nv)] for i in range(mr)]
        for i in range(mr):
            for v in range(nv):
                old = vec.load(_gep(b, rows[i], const64(lanes * v)), masks[v])
                b.store(b.select(self.first, seeds[v], old), accs[i][v])
        # the first ``ahead`` (NV or 0) tiles of a panel prefetch the next panel into L2, one
        # of its NV lines of row k each, so its weights stream in while this panel's other
        # tiles run (a 7x7 plane is 9 tiles: without it the next panel's first one waits)
        tile = b.sdiv(b.sub(p, self.a["p0"]), const64(MR))
        with b.if_else(b.icmp_signed("<", tile, self.a["ahead"])) as (early, later):
            with early:
                self._sources(bases, accs, mr, nv, b.mul(tile, const64(lanes)))
            with later:
                self._sources(bases, accs, mr, nv, None)
        for i in range(mr):
            for v in range(nv):
                value = b.load(accs[i][v])
                clamp = b.and_(vec.splat(self.relu), b.fcmp_ordered("<", value, vec.zero))
                value = b.select(clamp, vec.zero, value)  # relu keeps NaN
                top = vec.splat(ir.Constant(ir.FloatType(), 6.0))
                clamp = b.and_(vec.splat(self.six), b.fcmp_ordered(">", value, top))
                vec.store(b.select(clamp, top, value),  # relu6: 6 above
                          _gep(b, rows[i], const64(lanes * v)), masks[v])

    def _sources(self, bases, accs, mr: int, nv: int, line) -> None:
        """The tile's sum over sources [k0, k1); ``line`` (or None): the offset of the next
        panel's line of each row k to prefetch."""
        b, vec, lanes = self.b, self.vec, self.vec.lanes
        with for_range(b, self.k1, start=self.k0, name="k") as k:
            off = b.load(_gep(b, self.offsets, k))
            wk = _gep(b, self.w, b.mul(k, const64(self.nr)))
            ws = [b.load(b.bitcast(_gep(b, wk, const64(lanes * v)), vec.ty.as_pointer()),
                         align=64) for v in range(nv)]
            if line is not None:
                vec.prefetch(_gep(b, wk, b.add(b.mul(self.a["K"], const64(self.nr)), line)), 2)
            for i in range(mr):
                xv = vec.splat(b.load(_gep(b, bases[i], off)))
                for v in range(nv):
                    b.store(vec.fma(ws[v], xv, b.load(accs[i][v])), accs[i][v])


@cache
def _kernel(lanes: int):
    def build():
        module = ir.Module(name=_symbol(lanes))
        _build(module, lanes)
        return module

    library = get_jit().compile_generated(
        build, [_symbol(lanes)],
        (__name__, "msc.backend.kernels.direct_conv_prep", "msc.backend.llvm.loops"),
        (lanes, MR, NV))
    return library.cfunc(_symbol(lanes), None, *(ctypes.c_void_p,) * 7)


class PixelConv2d(Kernel):
    """out = relu?(conv2d(x, w) + bias), NCHW float32, groups 1 (see the module doc); the
    input's padding / phase planes come from the direct conv's PREP stage."""

    inputs = (0,)

    def __init__(self, op: str, weight_oihw: np.ndarray, bias, relu: bool, attrs: dict):
        self.o, self.c, kh, kw = weight_oihw.shape
        self.op, self.lanes = op, vector_lanes()
        self.relu = RELU6 if relu == RELU6 else int(bool(relu))  # relu: False/True/RELU6
        # the direct conv's stride-1 geometry, offsets table and pad pass, without its
        # weights: a strided conv reads the padded input at strided pixel bases, no phases
        self.strides = tuple(attrs["strides"])
        self.prep = DirectConv2d(op, np.zeros((1, self.c, kh, kw), np.float32), None, False,
                                 1, dict(attrs, strides=(1, 1)))
        nr = NV * self.lanes
        panels = -(-self.o // nr)
        k = self.c * kh * kw
        w = np.zeros((panels * nr, k), np.float32)
        w[:self.o] = weight_oihw.reshape(self.o, k)
        self.w = aligned_empty(panels * k * nr).reshape(panels, k, nr)  # aligned loads
        self.w[:] = w.reshape(panels, nr, k).transpose(0, 2, 1)
        self.bias = np.zeros(panels * nr, np.float32)
        if bias is not None:
            self.bias[:self.o] = np.broadcast_to(bias, (self.o,))
        self.panels, self.k = panels, k
        self.kc = max(1, min(k, _KC_BYTES // (4 * nr)))
        self.run, self.transpose = _kernel(self.lanes), transpose_fn()
        # fetched once: each .ctypes.data costs 1-5 us, a third of a small conv's Python
        self.ptrs = (self.w.ctypes.data, self.bias.ctypes.data)
        self.address = native_address(self.run)
        self._plans: dict = {}
        self._chains: dict = {}  # input shape -> (ChainEntry, scratch bytes)
        self.addr = (Address(), Address())

    def __call__(self, x, out):
        x, plan = checked_plan(self, x, out)
        if out.size:
            self._run(plan, self.addr[0](x), self.addr[1](out))
        return out

    def _run(self, plan, xp: int, op: int) -> None:
        n, o, oh, ow = plan.out_shape
        pixels, prep, m = oh * ow, plan.prep, plan.images
        padded, po = scratch_addresses(prep.scratch[0] if prep.scratch else 0, m * pixels * o)
        threads = task_threads() if plan.macs >= _PARALLEL_MACS else 1
        for i in range(0, n, m):
            if prep.scratch:  # the PREP stage of image i into `padded` (one thread)
                self.prep.run(xp, padded, 0, 0, 0, prep.offsets_ptr, prep.args_ptr,
                              plan.prep_parts[i])
                base, pix = padded, plan.pix_ptr
            else:  # the pixel table holds every image's pixels, from the input's start
                base, pix = xp, plan.pix_ptr + i * pixels * 8
            pointers = (base, *self.ptrs, po, prep.offsets_ptr, pix)
            if threads == 1:
                self.run(*pointers, plan.whole_ptr)
            else:
                plan.tasks(threads, self.address).launch(1, pointers, threads)
            self.transpose(po, op + i * o * pixels * 4, m, pixels, o)

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains (runtime/
        native_run.KernelStep): the calls of ``_run`` on one thread (pad pass, tiles,
        transpose per group of images) as one step, the padded input and the ``[P][O]``
        tiles in the register file's scratch; ``splits`` as the direct conv's. None where
        ``__call__`` decides (and reports)."""
        found = chain_plan(self, buffers)
        if found is None:
            return None
        shape, plan = found
        if shape not in self._chains:
            self._chains[shape] = self._chain_entry(plan, len(buffers))
        entry, nbytes = self._chains[shape]
        form = None
        if plan.out_shape[0] == 1:  # one image: its tiles split from inside the chain
            def form(parts: int) -> Launches:
                return self._split_form(plan, len(buffers), max(2, parts // PARTS_PER_THREAD))
        return (*entry.signature, nbytes, plan.macs >= _PARALLEL_MACS) + (
            (form,) if form else ())

    def _split_form(self, plan, scratch: int, threads: int) -> Launches:
        """One image's calls for a chain's parallel step, each a task list for ``threads``:
        the pad pass by input channel ranges (the direct conv's, where it has enough to
        copy), the tiles as ``_run`` launches them, the [P][O] -> NCHW transpose by output
        channel ranges (on one thread these two took ~4% of resnet50's pixel convs)."""
        calls, nbytes = self._chain_entry(plan, scratch, calls_only=True)
        kinds = [c[0] for c in calls]
        at = kinds.index(self.run)
        calls[at] = (plan.tasks(threads, self.address), calls[at][1][:-1])
        if self.prep.run in kinds:  # the pad stage's task list comes first in its split
            k = kinds.index(self.prep.run)
            pad = plan.prep.split(threads, self.prep.address)[0]
            calls[k] = (pad, calls[k][1][:-1])
        k = kinds.index(self.transpose)
        tiles, out, _, pixels, o = calls[k][1]
        calls[k] = (transpose_tasks(pixels, o, threads), (tiles, out))
        return Launches(tuple(calls), nbytes, conv_seconds(plan.macs, DirectConv2d))

    def _chain_entry(self, plan, scratch: int, calls_only: bool = False) -> tuple:
        n, o, oh, ow = plan.out_shape
        pixels, prep, m = oh * ow, plan.prep, plan.images
        (padded, tiles), nbytes = scratch_offsets(prep.scratch[0] if prep.scratch else 0,
                                                  m * pixels * o)
        padded, tiles = At(scratch, padded), At(scratch, tiles)
        calls = []
        for i in range(0, n, m):
            if prep.scratch:
                calls.append((self.prep.run, (Buffer(0), padded, 0, 0, 0, prep.offsets_ptr,
                                              prep.args_ptr, plan.prep_parts[i])))
                base, pix = padded, plan.pix_ptr
            else:
                base, pix = Buffer(0), plan.pix_ptr + i * pixels * 8
            calls.append((self.run, (base, *self.ptrs, tiles, prep.offsets_ptr, pix,
                                     plan.whole_ptr)))
            calls.append((self.transpose, (tiles, At(1, i * o * pixels * 4), m, pixels, o)))
        return (calls if calls_only else ChainEntry.sequence(calls)), nbytes

    def native_parts(self, buffers: list) -> Parts | None:
        """The images of a batch as independent units for a chain's parallel step
        (runtime/chain_split.py): a part makes the one-thread step's calls for its images
        (groups of up to ``plan.images`` a call), its padded input and tiles in its own
        part of the scratch."""
        found = chain_plan(self, buffers)
        if found is None:
            return None
        plan = found[1]
        n, o, oh, ow = plan.out_shape
        pixels, prep = oh * ow, plan.prep

        def layout(units: int) -> tuple:
            return scratch_offsets(prep.scratch[0] if prep.scratch else 0,
                                   min(units, plan.images) * pixels * o)

        def calls(lo: int, hi: int, scratch: int, at: int) -> list:
            (padded, tiles), _ = layout(hi - lo)
            padded, tiles, out = At(scratch, at + padded), At(scratch, at + tiles), []
            for i in range(lo, hi, plan.images):
                m = min(plan.images, hi - i)
                if prep.scratch:
                    out.append((self.prep.run, (Buffer(0), padded, 0, 0, 0, prep.offsets_ptr,
                                                prep.args_ptr, plan.prep_parts[i])))
                    base, pix = padded, plan.pix_ptr
                else:
                    base, pix = Buffer(0), plan.pix_ptr + i * pixels * 8
                whole = plan.whole_ptr if m == plan.images else plan.pixel_args(m * pixels)
                out.append((self.run, (base, *self.ptrs, tiles, prep.offsets_ptr, pix, whole)))
                out.append((self.transpose, (tiles, At(1, i * o * pixels * 4), m, pixels, o)))
            return out

        return Parts(n, calls, lambda units: layout(units)[1],
                     conv_seconds(plan.macs / n, DirectConv2d))

    def _plan(self, shape: tuple) -> _Plan:
        prep = self.prep._plan(shape)
        n, (sh, sw) = shape[0], self.strides
        oh, ow = (max(d, 0) for d in _strided_dims(self.prep, shape, self.strides))
        wq = int(prep.args[PLAN_FIELDS.index("Wq")])  # the padded row length the offsets assume
        pix = (np.arange(oh)[:, None] * sh * wq + np.arange(ow)[None, :] * sw).reshape(-1)
        images = 1
        if not prep.scratch:
            # read in place: one call takes several images, as rows of more pixels (a 2x2
            # plane at batch 16 is 64 pixels a call, not 16 calls of 4: ~3 us of Python each)
            images = _images_per_call(n, oh * ow * self.o)
            pix = (np.arange(n)[:, None] * (self.c * shape[2] * shape[3]) + pix).reshape(-1)
        plan = self._plans[shape] = _Plan(
            (n, self.o, oh, ow), prep, np.ascontiguousarray(pix, np.int64),
            (self.k, self.kc, self.o, self.relu,
             NV if oh * ow * images <= _PREFETCH_PIXELS else 0), self.panels,
            n * self.o * oh * ow * self.k, shape[2] * shape[3], images)
        return plan


def _images_per_call(n: int, outputs: int) -> int:
    """The most images (a divisor of ``n``) whose ``[P][O]`` scratch fits _BATCH_BYTES."""
    most = max(1, _BATCH_BYTES // max(4 * outputs, 1))
    return max(d for d in range(1, min(n, most) + 1) if n % d == 0)


def _strided_dims(prep: DirectConv2d, shape: tuple, strides: tuple) -> tuple:
    """(OH, OW) of the conv with ``strides``, from the stride-1 prep's window and padding."""
    top, left, bottom, right = prep.padding
    (dh, dw), (sh, sw) = prep.dilation, strides
    return ((shape[2] + top + bottom - dh * (prep.kh - 1) - 1) // sh + 1,
            (shape[3] + left + right - dw * (prep.kw - 1) - 1) // sw + 1)


class _Plan:
    """One input shape: the prep plan, pixel table, whole-image args and thread splits."""

    def __init__(self, out_shape, prep, pix, fixed, panels, macs, in_plane, images=1):
        self.out_shape, self.prep, self.pix, self.macs = out_shape, prep, pix, macs
        self.fixed, self.panels, self.in_plane = fixed, panels, in_plane
        self.pix_ptr, self.images = pix.ctypes.data, images
        self._arrays: list = []
        pixels = out_shape[2] * out_shape[3] * images  # of one call
        self.whole_ptr = self._args(0, pixels, 0, panels)
        self.prep_parts = [prep._part(i, 0, 0, PREP, 0, 0, 0, prep.channels)
                           for i in range(out_shape[0])]
        self._splits: dict = {}

    def pixel_args(self, pixels: int) -> int:
        """The args of one call over ``pixels`` pixels and every panel (a part's last
        group of images, when fewer than ``images``)."""
        return self._args(0, pixels, 0, self.panels)

    def _args(self, p0, p1, j0, j1) -> int:
        arr = np.array((*self.fixed, p0, p1, j0, j1), np.int64)
        self._arrays.append(arr)  # task lists hold its address
        return arr.ctypes.data

    def tasks(self, threads: int, address: int) -> NativeTasks:
        """Parts for ``threads``: panels when there are two per thread, else pixel ranges
        (whole tiles) of every panel."""
        if threads not in self._splits:
            count = 2 * threads
            pixels = self.out_shape[2] * self.out_shape[3] * self.images
            if self.panels >= count:
                parts = [(0, pixels, lo, hi) for lo, hi in split_range(self.panels, count)]
            else:
                parts = [(lo, hi, 0, self.panels)
                         for lo, hi in split_range(pixels, count, MR) if hi > lo]
            tasks = NativeTasks(len(parts))
            tasks.records[:, 0] = address
            tasks.records[:, 7] = [self._args(*part) for part in parts]
            self._splits[threads] = tasks
        return self._splits[threads]
