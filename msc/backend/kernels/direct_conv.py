"""Direct NCHW convolution: no im2col, the taps read the (padded) input in place.

With stride 1 an output pixel ``(oh, ow)`` reads input ``(oh + kh*dh, ow + kw*dw)`` of the
zero-padded image. Counting pixels in the padded width ``Wq`` ("wide" positions
``q = oh*Wq + ow``), every tap is one constant offset ``kh*dh*Wq + kw*dw`` from ``q``, so a
convolution is a sum over sources (input channel, tap) of contiguous vector loads: a register
tile of ``R`` output channels x ``V`` vectors of positions is accumulated over all sources
(V loads, R weight broadcasts, R*V FMAs each), then stored once with the bias and relu. The
``OW..Wq`` columns of each wide row are dropped by a compaction pass (or by the tile stores
themselves when the wide output outgrows L2); a 1x1 conv without padding reads the input as
is (stride 1) and writes the output directly (any stride). When the output rows are as wide
as the input's, one run of max(left, right) zeros between padded rows serves as the right
padding of one row and the left padding of the next, so a 3x3 conv computes one wide column
a row, not two.

Stride s > 1 splits each padded input plane into its s x s phase planes first
(``phase[a][b][i][j] = xpad[i*s + a][j*s + b]``): tap (kh, kw) of output (oh, ow) is then
row oh + kh*dh // s of phase (kh*dh % s, ...), so a strided conv is a stride-1 sum over the
same number of sources, with no wasted multiplies (only the phases some tap uses are made).

The im2col + GEMM path packs ``K x P`` patches (9x the input for a 3x3 conv) on every call;
this reads the input ``O / R`` times from L2 instead, and measured faster on every NCHW shape
of the light zoo (DenseNet's 3x3 growth convs 2-4x, ShuffleNet's grouped 1x1 2x, strided
stems and downsamples 1.2-1.4x)::

    kernel = DirectConv2d("nn.conv2d", weight_oihw, bias, relu, groups, attrs)
    kernel(x, out)          # NCHW float32, checked before native code runs
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np
from llvmlite import ir

from ...errors import ShapeError
from ..llvm.jit import get_jit, vector_lanes
from ..llvm.loops import F32_PTR, I64, const64, entry_alloca, for_range, imin
from ..runtime.chain_split import Parts
from ..runtime.task_wrap import At, Buffer, ChainEntry
from ..runtime.threads import cache_bytes, native_address, task_threads
from .base import Kernel, f32_address
from .dense import Address
from .direct_conv_plan import COMPACT, CONV, PREP, ConvPlan, chain_plan, checked_plan, conv_seconds
from .direct_conv_prep import Vec, build_compact, build_pad, build_split
from .direct_conv_prep import gep as _gep
from .layout import scratch_addresses, scratch_offsets

__all__ = ["DirectConv2d", "chain_plan", "direct_conv_fits", "residual_fits", "tile_shape"]

I64_PTR = I64.as_pointer()
_L2_BYTES = cache_bytes(2) // 2  # input bytes of one chunk of positions: half a core's L2
_PARALLEL_MACS = 1e6  # below this (~20 us) a conv runs on one thread (a split costs ~7 us)
# 1x1 convs reading their input in place prefetch a later source's line (_ahead): (sources
# ahead, fewest 4 KiB pages a tile's sources touch, fewest input pixels a plane). Alone, 1
# thread, CPU time, with / without: 256 -> 64 / 128 on 56x56 1.10-1.12x, 512 -> 128 / 256 on
# 28x28 1.07-1.08x, 256 -> 32 on 27x27 1.05x, 128 -> 16 on 55x55 1.04x; measured slower and
# kept without: 64 channels on 56x56 0.97-0.98x, 128 on 28x28 0.99x, 14x14 / 13x13 planes
# 0.97-0.98x, 3x3 convs (padded planes) 0.96-0.98x at any distance
_PREFETCH = (4, 128, 512)
RELU6 = 2  # the "relu" argument's value for min(max(x, 0), 6) (MobileNetV2's relu6)
_CONV_ARGS = ("G", "S", "ld_group", "OB", "og", "ld_out", "Q", "chunk", "relu", "Wq", "OW",
              "ahead")


def tile_shape(lanes: int) -> tuple[int, int]:
    """(R output channels, V vectors) of the register tile: R*V accumulators plus V loaded
    vectors and a broadcast fit the vector register file (32 with AVX-512, else 16)."""
    return (8, 3) if lanes == 16 else (4, 3)


def _symbol(lanes: int) -> str:
    r, v = tile_shape(lanes)
    return f"msc_direct_conv_nchw_f32_l{lanes}_r{r}_v{v}"


def _build_conv(module: ir.Module, lanes: int) -> ir.Function:
    """void (x, w, bias, out, offsets, *_CONV_ARGS), over G groups of S sources each.

    A source is one (input channel, tap): wide position q of group g reads
    x[g * ld_group + offsets[s] + q]; w: [G, OB, S, R]; bias: [G, OB*R]; out: [G*og, ld_out],
    positions q < Q written (relu when set). With OW < Wq the positions are wide rows of Wq
    and the store drops each row's last Wq - OW columns (out rows of OW, ld_out a plane of
    the output): a vector spans at most two rows when Wq >= lanes (the driver's condition).
    """
    r_n, v_n = tile_shape(lanes)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [F32_PTR] * 5 + [I64_PTR]
                                             + [I64] * len(_CONV_ARGS)),
                     name=f"conv_l{lanes}")
    fn.linkage = "internal"
    x, w, bias, out, res, offsets = fn.args[:6]
    for arg in fn.args[:6]:
        arg.add_attribute("noalias")
    g = dict(zip(_CONV_ARGS, fn.args[6:]))
    g["res"] = res  # null, or a residual laid out as the output (narrow stores only)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    vec = Vec(b, lanes)
    per_block = b.mul(g["S"], const64(r_n))
    step = lanes * v_n
    with for_range(b, g["G"], name="g") as grp:
        xg = _gep(b, x, b.mul(grp, g["ld_group"]))
        wg = _gep(b, w, b.mul(b.mul(grp, g["OB"]), per_block))
        bg = _gep(b, bias, b.mul(b.mul(grp, g["OB"]), const64(r_n)))
        og = _gep(b, out, b.mul(b.mul(grp, g["og"]), g["ld_out"]))
        g["rg"] = _gep(b, res, b.mul(b.mul(grp, g["og"]), g["ld_out"]))
        with for_range(b, g["Q"], step=g["chunk"], name="qc") as qc:
            q_end = imin(b, b.add(qc, g["chunk"]), g["Q"])
            with for_range(b, g["OB"], name="ob") as ob:
                tile = _Tile(b, vec, g, offsets, r_n)
                tile.at(xg, _gep(b, wg, b.mul(ob, per_block)), bg, og, ob)
                with for_range(b, q_end, start=qc, step=step, name="q0") as q0:
                    tile.dispatch(q0, b.sub(q_end, q0), v_n)
    b.ret_void()
    return fn


class _Tile:
    """The R x V register tile at one output-channel block; ``dispatch`` picks the widest
    variant the remaining positions need (a tail runs with fewer vectors)."""

    def __init__(self, b, vec, g, offsets, r_n):
        self.b, self.vec, self.g, self.offsets, self.r_n = b, vec, g, offsets, r_n

    def at(self, xg, wb, bg, og, ob) -> None:
        self.xg, self.wb, self.og = xg, wb, og
        self.first = self.b.mul(ob, const64(self.r_n))
        self.bias = [self.b.load(_gep(self.b, bg, self.b.add(self.first, const64(r))))
                     for r in range(self.r_n)]

    def dispatch(self, q0, left, v_n) -> None:
        """Full tiles load without masks; a tail runs the fewest vectors that cover it."""
        b, lanes = self.b, self.vec.lanes
        with b.if_else(b.icmp_signed(">=", left, const64(lanes * v_n))) as (full, tail):
            with full:
                self.run(q0, None, v_n)
            with tail:
                self._tail(q0, left, v_n)

    def _tail(self, q0, left, v_n) -> None:
        b, lanes = self.b, self.vec.lanes
        if v_n == 1:
            self.run(q0, left, 1)
            return
        with b.if_else(b.icmp_signed(">", left, const64(lanes * (v_n - 1)))) as (wide, narrow):
            with wide:
                self.run(q0, left, v_n)
            with narrow:
                self._tail(q0, left, v_n - 1)

    def run(self, q0, left, v_n) -> None:
        """The tile at positions q0 + [0, lanes * v_n); ``left`` (or None: all) are valid."""
        b, vec, g, r_n, lanes = self.b, self.vec, self.g, self.r_n, self.vec.lanes
        masks = [vec.all if left is None else vec.mask(imin(b, b.sub(left, const64(lanes * v)),
                                                              lanes)) for v in range(v_n)]
        accs = [[entry_alloca(b, vec.ty, f"acc{r}_{v}") for v in range(v_n)]
                for r in range(r_n)]
        for r in range(r_n):
            start = vec.splat(self.bias[r])
            for v in range(v_n):
                b.store(start, accs[r][v])
        # one (channel, tap) per iteration: unrolled taps get all their loads hoisted, then
        # spilled; the offsets table makes strides, padding and phases one indirection.
        # ahead > 0: each source also prefetches the tile's first line of a later source
        # (see DirectConv2d._ahead), a loop of its own so the others run without it
        with b.if_else(b.icmp_signed(">", g["ahead"], const64(0))) as (ahead, plain):
            for prefetch in (True, False):
                with ahead if prefetch else plain:
                    self._sources(q0, masks, accs, v_n, prefetch)
        self._store(q0, masks, accs, v_n)

    def _sources(self, q0, masks, accs, v_n, prefetch: bool) -> None:
        b, vec, g, r_n, lanes = self.b, self.vec, self.g, self.r_n, self.vec.lanes
        with for_range(b, g["S"], name="s") as src:
            xt = _gep(b, self.xg, b.add(b.load(_gep(b, self.offsets, src)), q0))
            wt = _gep(b, self.wb, b.mul(src, const64(r_n)))
            xs = [vec.load(_gep(b, xt, const64(lanes * v)), masks[v]) for v in range(v_n)]
            if prefetch:
                later = imin(b, b.add(src, g["ahead"]), b.sub(g["S"], const64(1)))
                vec.prefetch(_gep(b, self.xg, b.add(b.load(_gep(b, self.offsets, later)), q0)))
            for r in range(r_n):
                wv = vec.splat(b.load(_gep(b, wt, const64(r))))
                for v in range(v_n):
                    b.store(vec.fma(xs[v], wv, b.load(accs[r][v])), accs[r][v])

    def _store(self, q0, masks, accs, v_n) -> None:
        b, vec, g, lanes = self.b, self.vec, self.g, self.vec.lanes
        relu = vec.splat(b.icmp_signed("!=", g["relu"], const64(0)))
        six = vec.splat(b.icmp_signed("==", g["relu"], const64(RELU6)))
        top = vec.splat(ir.Constant(ir.FloatType(), 6.0))
        has_res = b.icmp_unsigned("!=", g["res"], ir.Constant(F32_PTR, None))

        def activated(value):  # relu (relu6: clamped to 6 too) keeps NaN
            value = b.select(b.and_(relu, b.fcmp_ordered("<", value, vec.zero)), vec.zero, value)
            return b.select(b.and_(six, b.fcmp_ordered(">", value, top)), top, value)

        values = []
        for r in range(len(accs)):
            channel = b.add(self.first, const64(r))
            valid = vec.splat(b.icmp_signed("<", channel, g["og"]))
            at = b.mul(channel, g["ld_out"])
            for v in range(v_n):
                values.append((at, v, b.load(accs[r][v]), valid))
        with b.if_else(b.icmp_signed("!=", g["Wq"], g["OW"])) as (compact, plain):
            with compact:
                places = [self._places(b.add(q0, const64(lanes * v)), masks[v])
                          for v in range(v_n)]
                for at, v, value, valid in values:
                    value = activated(value)
                    for offset, mask in places[v]:
                        vec.store(value, _gep(b, _gep(b, self.og, at), offset),
                                  b.and_(mask, valid))
            # a fused residual (laid out as the output) is added before the relu; no load
            # without one (masked-off loads of a bad address take a slow assist on AMD)
            with plain, b.if_else(has_res) as (added, alone):
                for residual in (True, False):
                    with added if residual else alone:
                        self._store_rows(q0, masks, values, activated, residual)

    def _store_rows(self, q0, masks, values, activated, residual: bool) -> None:
        b, vec, g, lanes = self.b, self.vec, self.g, self.vec.lanes
        for at, v, value, valid in values:
            where = b.add(at, b.add(q0, const64(lanes * v)))
            mask = b.and_(masks[v], valid)
            if residual:
                value = b.fadd(value, vec.load(_gep(b, g["rg"], where), mask))
            vec.store(activated(value), _gep(b, self.og, where), mask)

    def _places(self, q, mask) -> list:
        """(offset, mask) stores of the vector at wide position q when rows are compacted
        (Wq > OW, Wq >= lanes): the lanes left of this row's end at their output offset, the
        next row's lanes shifted back by the Wq - OW dropped columns."""
        b, vec, g = self.b, self.vec, self.g
        i32 = ir.IntType(32)
        wq, ow = b.trunc(g["Wq"], i32), b.trunc(g["OW"], i32)
        q32 = b.trunc(q, i32)
        row = b.udiv(q32, wq)
        col = b.sub(q32, b.mul(row, wq))
        here = b.sext(b.add(b.mul(row, ow), col), I64)  # output offset of lane 0
        drop = b.sext(b.sub(wq, ow), I64)
        first = b.and_(mask, b.icmp_signed("<", vec.ids, vec.splat(b.sub(ow, col))))
        second = b.and_(mask, b.icmp_signed(">=", vec.ids, vec.splat(b.sub(wq, col))))
        return [(here, first), (b.sub(here, drop), second)]


PLAN_FIELDS = ("n", "G", "S", "ld_group", "OB", "og", "Q", "chunk", "relu", "mode", "H", "W",
         "Wq", "Hq", "top", "left", "sh", "sw", "ld", "n_phase", "C_all", "O_all", "OH", "OW",
         "fuse", "ahead", "w", "bias")
PLAIN, PADDED, SPLIT = 0, 1, 2  # how the input reaches the kernel: as is, padded, phases


def _build_driver(module: ir.Module, lanes: int) -> None:
    """void (x, padded, wide, res, out, offsets, plan, part): one image's stages, the
    int64 ``plan`` (PLAN_FIELDS with the weights' and bias's addresses, then the phase pairs) read
    in native code (a ctypes call with 20 ints costs ~5 us); ``res``: null, or a residual
    added before the relu (narrow output rows only). ``part`` = [image, first row, end row, stages, first unit, end unit,
    first channel, end channel] lets threads split an image: PREP pads (or splits) input
    channels [first, end channel); CONV and COMPACT run output rows [first, end row) of the
    output units [first, end unit), a unit being a group when G > 1, else a block of R output
    channels."""
    conv, pad, compact = (build(module, lanes) for build in (_build_conv, build_pad, build_compact))
    split = build_split(module)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [F32_PTR] * 5 + [I64_PTR] * 3),
                     name=_symbol(lanes))
    x, padded, wide, res, out, offsets, plan, part = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    a = {name: b.load(_gep(b, plan, const64(i))) for i, name in enumerate(PLAN_FIELDS)}
    w, bias = b.inttoptr(a["w"], F32_PTR), b.inttoptr(a["bias"], F32_PTR)
    image, row0, row1, stages, u0, u1, c0, c1 = (b.load(_gep(b, part, const64(i)))
                                                 for i in range(8))
    phases = _gep(b, plan, const64(len(PLAN_FIELDS)))
    src = _gep(b, x, b.mul(image, b.mul(a["C_all"], b.mul(a["H"], a["W"]))))
    dst = _gep(b, out, b.mul(image, b.mul(a["O_all"], b.mul(a["OH"], a["OW"]))))
    plain = b.icmp_signed("==", a["mode"], const64(PLAIN))
    # wide rows as long as the output's (a strided 1x1 conv): the conv writes the output itself
    narrow = b.icmp_signed("==", a["Wq"], a["OW"])
    q0, q1 = b.mul(row0, a["Wq"]), b.mul(row1, a["Wq"])

    def stage(bit):
        return b.icmp_signed("!=", b.and_(stages, const64(bit)), const64(0))

    padded_mode = b.icmp_signed("==", a["mode"], const64(PADDED))
    planes, src_c = b.sub(c1, c0), _gep(b, src, b.mul(c0, b.mul(a["H"], a["W"])))
    padded_c = _gep(b, padded, b.mul(c0, a["ld"]))
    with b.if_then(b.and_(stage(PREP), b.not_(plain))), \
            b.if_else(padded_mode) as (one, more):
        with one:
            b.call(pad, [src_c, padded_c, planes, a["H"], a["W"], a["Wq"], a["top"],
                         a["left"], a["ld"]])
        with more:
            b.call(split, [src_c, padded_c, phases, planes, a["H"], a["W"], a["top"],
                           a["left"], a["sh"], a["sw"], a["Hq"], a["Wq"], a["ld"],
                           a["n_phase"]])
    unit = _Units(b, a, lanes, u0, u1)
    plane_out = b.mul(a["OH"], a["OW"])
    # the tile store drops the wide columns itself, no compaction pass (see _fuse_compact)
    fused = b.icmp_signed("!=", a["fuse"], const64(0))
    direct = b.or_(narrow, fused)
    with b.if_then(stage(CONV)):
        # positions [q0, q1) of the wide output: the input pointer moves by q0, the output
        # by row0 whole output rows (direct) or q0 wide positions
        base = b.select(plain, src, padded)
        out_off = b.add(b.mul(image, b.mul(a["O_all"], plane_out)),
                        b.add(b.mul(unit.o0, plane_out), b.mul(row0, a["OW"])))
        at_out = _gep(b, out, out_off)
        null = ir.Constant(F32_PTR, None)
        at_res = b.select(b.icmp_unsigned("==", res, null), null, _gep(b, res, out_off))
        at_wide = _gep(b, wide, b.add(b.mul(unit.o0, a["Q"]), q0))
        b.call(conv, [_gep(b, _gep(b, base, unit.x_off), q0), _gep(b, w, unit.w_off),
                      _gep(b, bias, unit.bias_off), b.select(direct, at_out, at_wide), at_res,
                      offsets,
                      unit.groups, a["S"], a["ld_group"], unit.blocks, unit.og,
                      b.select(direct, plane_out, a["Q"]), b.sub(q1, q0), a["chunk"],
                      a["relu"], b.select(fused, a["Wq"], a["OW"]), a["OW"], a["ahead"]])
    with b.if_then(b.and_(stage(COMPACT), b.not_(direct))):
        b.call(compact, [_gep(b, wide, b.add(b.mul(unit.o0, a["Q"]), q0)),
                         _gep(b, dst, b.add(b.mul(unit.o0, plane_out), b.mul(row0, a["OW"]))),
                         b.sub(unit.o1, unit.o0), b.sub(row1, row0), a["Wq"], a["OW"], a["Q"],
                         plane_out])
    b.ret_void()


class _Units:
    """The conv arguments of output units [u0, u1): groups when G > 1 (each with all its
    blocks), else blocks of R channels of the one group; ``o0``, ``o1``: their channels."""

    def __init__(self, b, a, lanes, u0, u1):
        r_n = const64(tile_shape(lanes)[0])
        grouped = b.icmp_signed(">", a["G"], const64(1))
        count = b.sub(u1, u0)
        block_w = b.mul(a["S"], r_n)  # weights of one block: [S, R]
        self.groups = b.select(grouped, count, const64(1))
        self.blocks = b.select(grouped, a["OB"], count)
        self.x_off = b.select(grouped, b.mul(u0, a["ld_group"]), const64(0))
        self.w_off = b.mul(b.select(grouped, b.mul(u0, a["OB"]), u0), block_w)
        self.bias_off = b.mul(b.select(grouped, b.mul(u0, a["OB"]), u0), r_n)
        first = b.mul(u0, r_n)  # og: the valid channels from the part's first block on
        self.og = b.select(grouped, a["og"], b.sub(a["og"], first))
        self.o0 = b.select(grouped, b.mul(u0, a["og"]), first)
        self.o1 = b.select(grouped, b.mul(u1, a["og"]), imin(b, b.mul(u1, r_n), a["og"]))


@cache
def _driver(lanes: int):
    def build():
        module = ir.Module(name=_symbol(lanes))
        _build_driver(module, lanes)
        return module

    library = get_jit().compile_generated(
        build, [_symbol(lanes)],
        (__name__, "msc.backend.kernels.direct_conv_prep", "msc.backend.kernels.layout",
         "msc.backend.llvm.loops"), (lanes,))
    return library.cfunc(_symbol(lanes), None, *(ctypes.c_void_p,) * 8)


def residual_fits(weight_shape: tuple, attrs: dict) -> bool:
    """Whether the conv's output rows are its wide rows (the tile stores write them as is),
    so a residual can be added in the store: 1x1 windows without padding, any stride."""
    return tuple(weight_shape[2:]) == (1, 1) and not any(attrs["padding"])


def direct_conv_fits(weight_shape: tuple, groups: int, attrs: dict) -> bool:
    """Whether DirectConv2d takes the conv: NCHW in and out, any window, stride, dilation
    and padding (strides above 1 read the input's phase planes)."""
    _, _, kh, kw = weight_shape
    return (attrs.get("data_layout", "NCHW") == attrs.get("out_layout", "NCHW") == "NCHW"
            and len(attrs["strides"]) == 2 and min(attrs["strides"]) >= 1
            and min(attrs["dilation"]) >= 1 and min(attrs["padding"]) >= 0 and kh >= 1
            and kw >= 1 and groups >= 1)


class DirectConv2d(Kernel):
    """out = relu?(conv2d(x, w) + bias), NCHW float32 (see the module doc). ``attrs``:
    strides, padding (top, left, bottom, right), dilation; ``lanes`` overrides the host's
    vector width (tests build the 8- and 4-lane variants on any host). ``residual``: the
    call's arg index of a tensor added before the relu (``kernel(x, res, out)``), for convs
    whose output rows are their wide rows (1x1 without padding, residual_fits)."""

    inputs = (0,)

    def __init__(self, op: str, weight_oihw: np.ndarray, bias, relu: bool, groups: int,
                 attrs: dict, lanes: int | None = None, residual: int | None = None):
        if not direct_conv_fits(weight_oihw.shape, groups, attrs) or \
                weight_oihw.shape[0] % groups:
            raise ShapeError(f"direct conv cannot take weight {weight_oihw.shape}, groups "
                             f"{groups}, {attrs}", op=op, param="weight")
        o, cg, self.kh, self.kw = weight_oihw.shape
        self.op, self.o, self.groups, self.c = op, o, groups, cg * groups
        self.padding, self.dilation = tuple(attrs["padding"]), tuple(attrs["dilation"])
        self.strides = tuple(attrs["strides"])
        self.relu = RELU6 if relu == RELU6 else int(bool(relu))  # relu: False/True/RELU6
        if residual is not None:
            if not residual_fits(weight_oihw.shape, attrs):
                raise ShapeError("a fused residual needs a 1x1 conv without padding", op=op,
                                 param="residual")
            self.inputs = (0, residual)
        self.lanes = lanes or vector_lanes()  # tests build the narrower variants too
        r_n, _ = tile_shape(self.lanes)
        og = o // groups
        self.blocks = -(-og // r_n)
        w = np.zeros((groups, self.blocks * r_n, cg, self.kh * self.kw), np.float32)
        w[:, :og] = weight_oihw.reshape(groups, og, cg, -1)
        # [G, OB, C, taps, R]: the R weights of one (channel, tap) are one contiguous run
        self.w = np.ascontiguousarray(
            w.reshape(groups, self.blocks, r_n, cg, -1).transpose(0, 1, 3, 4, 2))
        b = np.zeros((groups, self.blocks * r_n), np.float32)
        column = np.zeros(o) if bias is None else np.broadcast_to(bias, (o,))
        b[:, :og] = column.reshape(groups, og)
        self.bias = b
        self.run = _driver(self.lanes)
        self.address = native_address(self.run)
        self.w_ptr, self.bias_ptr = self.w.ctypes.data, self.bias.ctypes.data
        self._plans: dict = {}
        self._chains: dict = {}  # input shape -> (ChainEntry, scratch bytes)
        self.addr = (Address(), Address())

    def out_dims(self, h: int, w: int) -> tuple:
        top, left, bottom, right = self.padding
        (dh, dw), (sh, sw) = self.dilation, self.strides
        return ((h + top + bottom - dh * (self.kh - 1) - 1) // sh + 1,
                (w + left + right - dw * (self.kw - 1) - 1) // sw + 1)

    def __call__(self, x, *rest):
        out, res = rest[-1], (rest[0] if len(rest) == 2 else None)
        x, plan = checked_plan(self, x, out)
        if len(self.inputs) != 1 + (res is not None):
            raise ShapeError(f"expects {len(self.inputs)} input arrays and the output",
                             op=self.op, param="residual")
        if res is not None:
            res = f32_address(res, plan.out_shape, self.op, "residual")
        if out.size:
            padded, wide = scratch_addresses(*plan.scratch) if plan.scratch else (0, 0)
            pointers = (self.addr[0](x), padded, wide, res or 0, self.addr[1](out),
                        plan.offsets_ptr, plan.args_ptr)
            threads = task_threads() if plan.macs >= _PARALLEL_MACS else 1
            if threads == 1:
                for part in plan.whole:
                    self.run(*pointers, part)
            else:  # per image: pad / split input channel ranges, then output parts
                for stage in plan.split(threads, self.address):
                    if stage is not None:  # one native task list (threads.NativeTasks)
                        stage.launch(1, pointers, threads)
        return out

    def native_signature(self, buffers: list) -> tuple | None:
        """(entry, dims, scratch bytes, splits) for the VM's native chains (runtime/
        native_run.KernelStep): float32 buffers of a shape this conv takes; one driver call
        per image, the padded input and the wide output in the register file's scratch.
        ``splits``: big enough to split across threads (the chain calls it on one thread
        only). None where ``__call__`` decides (and reports)."""
        found = chain_plan(self, buffers)
        if found is None:
            return None
        shape, plan = found
        if shape not in self._chains:
            (padded, wide), nbytes = scratch_offsets(*(plan.scratch or (0, 0)))
            # no scratch (a 1x1 conv reading its input as is): no scratch buffer either
            parts = (At(len(buffers), padded), At(len(buffers), wide)) if nbytes else (0, 0)
            res = Buffer(1) if len(self.inputs) == 2 else 0
            pointers = (Buffer(0), *parts, res, Buffer(len(buffers) - 1), plan.offsets_ptr,
                        plan.args_ptr)
            entry = ChainEntry.sequence((self.run, (*pointers, part)) for part in plan.whole)
            # one image: the task lists of __call__'s split, from inside the chain
            form = plan.split_form(self.address, pointers, nbytes,
                                   conv_seconds(plan.macs, DirectConv2d))
            self._chains[shape] = (entry, nbytes, form)
        entry, nbytes, form = self._chains[shape]
        return (*entry.signature, nbytes, plan.macs >= _PARALLEL_MACS) + (
            (form,) if form else ())

    def native_parts(self, buffers: list) -> Parts | None:
        """The images of a batch as independent units for a chain's parallel step
        (runtime/chain_split.py): a part makes the one-thread step's calls for its images,
        with its own padded input and wide output in the scratch."""
        found = chain_plan(self, buffers)
        if found is None:
            return None
        _, plan = found
        _, nbytes = scratch_offsets(*(plan.scratch or (0, 0)))
        res = Buffer(1) if len(self.inputs) == 2 else 0
        out = Buffer(len(buffers) - 1)

        def calls(lo: int, hi: int, scratch: int, at: int) -> list:
            (padded, wide), _ = scratch_offsets(*(plan.scratch or (0, 0)))
            parts = (At(scratch, at + padded), At(scratch, at + wide)) if nbytes else (0, 0)
            return [(self.run, (Buffer(0), *parts, res, out, plan.offsets_ptr, plan.args_ptr,
                                plan.whole[i])) for i in range(lo, hi)]

        n = plan.out_shape[0]
        return Parts(n, calls, nbytes, conv_seconds(plan.macs / n, DirectConv2d))

    def _plan(self, shape: tuple) -> ConvPlan:
        """The checked geometry of one input shape, as the driver's int64 plan (cached)."""
        if len(shape) != 4 or shape[1] != self.c:
            raise ShapeError(f"expects NCHW data with {self.c} channels, got {shape}",
                             op=self.op, param="data")
        n, _, h, w = shape
        oh, ow = (max(d, 0) for d in self.out_dims(h, w))
        top, left = self.padding[:2]
        (dh, dw), stride = self.dilation, self.strides
        # tap (kh, kw) of output (oh, ow) reads padded row oh*sh + kh*dh: row oh + kh*dh // sh
        # of phase plane kh*dh % sh (one plane when the stride is 1)
        rows = [divmod(kh * dh, stride[0]) for kh in range(self.kh)]
        cols = [divmod(kw * dw, stride[1]) for kw in range(self.kw)]
        phases = sorted({(a, b) for _, a in rows for _, b in cols})
        hq, wq = oh + rows[-1][0], ow + cols[-1][0]
        if stride == (1, 1) and self.kw == 1 and not any(self.padding):
            mode, ld, wq = PLAIN, h * w, w      # wide rows are the input's rows
        elif stride == (1, 1):                   # the pad also writes (top + H) * Wq + left
            if ow == w:  # one run of zeros between rows is both their right and left padding
                wq = w + max(left, self.padding[3])
            mode, ld = PADDED, max(hq * wq + cols[-1][0], (h + top) * wq + left)
        else:
            mode, ld = SPLIT, len(phases) * hq * wq
        slot = {phase: k * hq * wq for k, phase in enumerate(phases)}
        cg, og = self.c // self.groups, self.o // self.groups
        offsets = [c * ld + slot[(a, b)] + i * wq + j for c in range(cg)
                   for i, a in rows for j, b in cols]
        fuse = self._fuse_compact(oh, ow, wq)
        args = (n, self.groups, cg * self.kh * self.kw, cg * ld, self.blocks, og, oh * wq,
                self._chunk(cg), self.relu, mode, h, w, wq, hq, top, left, *stride,
                ld, len(phases), self.c, self.o, oh, ow, fuse, self._ahead(mode, cg, h * w),
                self.w_ptr, self.bias_ptr,
                *(v for ab in phases for v in ab))
        # reads past a channel's last plane reach cols[-1][0] floats (wide garbage columns)
        sizes = () if mode == PLAIN else (self.c * ld + cols[-1][0] + self.lanes,
                                          0 if wq == ow or fuse else self.o * oh * wq)
        macs = n * self.o * oh * ow * cg * self.kh * self.kw
        units, grouped = (self.groups, True) if self.groups > 1 else (self.blocks, False)
        # per image, the bytes a thread reads of weights and of input when all threads split
        # output units (each reads the whole input) instead of rows (each reads all weights)
        traffic = (self.w.size, self.c * h * w)
        plan = self._plans[shape] = ConvPlan((n, self.o, oh, ow), np.array(args, np.int64),
                                          np.array(offsets, np.int64), sizes, macs,
                                          (units, self.c, mode != PLAIN, traffic, grouped))
        return plan

    def _fuse_compact(self, oh: int, ow: int, wq: int) -> int:
        """1 when the tile stores drop the wide columns (two masked stores a vector where a
        row ends) instead of a compaction pass: when the wide output outgrows L2, so the pass
        would stream it from memory (stems, VGG's 224x224 convs: 3-5% of the conv); below
        that the pass is cheaper than the extra stores. Rows of at least a vector keep each
        vector within two rows."""
        return int(wq != ow and wq >= self.lanes and 4 * self.o * oh * wq > 2 * _L2_BYTES)

    def _ahead(self, mode: int, cg: int, plane: int) -> int:
        """Sources ahead whose line a tile prefetches (0: none). A 1x1 conv reading its input
        in place walks one plane per source: with many channels on large planes a tile's
        sources lie on more pages than the first-level data TLB holds (64 entries on the
        measured Xeon), and a prefetch a few sources early starts each one's translation and
        line before its loads need them (see _PREFETCH)."""
        ahead, fewest_pages, fewest_pixels = _PREFETCH
        pages = cg * min(4 * plane, 4096) // 4096  # distinct pages of one tile's sources
        return ahead if mode == PLAIN and plane >= fewest_pixels and pages >= fewest_pages \
            else 0

    def _chunk(self, cg: int) -> int:
        """Wide positions per chunk: the chunk's input, over the group's channels, fits in
        about half of L2 (the halo rows of the taps come on top)."""
        step = self.lanes * tile_shape(self.lanes)[1]
        fit = _L2_BYTES // (4 * cg)
        return max(step, fit // step * step)
