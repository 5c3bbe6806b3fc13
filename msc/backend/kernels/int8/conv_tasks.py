"""QConv2d's work as native task lists: unfold + pack + GEMM fused per block of pixels.

A conv used to unfold a whole image into patch rows on one thread, then pack and multiply in
two separate splits, each a Python callback per task. Here one native entry,
``msc_qconv_block(x, arena, out, row)``, does all three for a block of output pixels
[q0, q1) and output channels [r0, r0 + rows): it unfolds ``qb`` pixels at a time into its
own patch rows, packs them into its own VNNI panels (both stay in L2) and calls the GEMM
driver (by address) on them, writing NCHW columns q.. of its rows. Blocks never share a
buffer, so the tasks of one conv run on any thread in any order with one handoff
(threads.NativeTasks) and no barrier: each block first copies the input rows its pixels read
into its own padded window (the zero point around them; neighbouring blocks share only a
few halo rows, copied twice). Every output element is the same integer sum and the same
epilogue however the pixels are blocked, so results are bitwise equal on any thread count.

``row`` points to an int64 parameter row (FIELDS); ``x``, ``arena``, ``out`` are the bases
a launch passes (the record holds byte offsets: the image / group, the block's buffers).
"""

from __future__ import annotations

import ctypes
from functools import cache

import numpy as np
from llvmlite import ir

from ...llvm.jit import get_jit
from ...llvm.loops import I32, I64, const64, for_range, imin
from ...runtime.threads import NativeTasks, cache_bytes, native_address, split_range
from .gemm import DRIVER_TYPES, I8, I8_PTR, LANES, NR, OUTS

__all__ = ["FIELDS", "block_fn", "build_pack", "conv_plan"]

FIELDS = ("flags", "c", "h", "w", "kh", "kw", "sh", "sw", "pt", "pl", "dh", "dw", "oh", "ow",
          "k4", "fill", "y0", "wh", "wp", "xp", "cols", "packed", "q0", "q1", "qb", "rows",
          "flip", "p", "size", "driver", "w_ptr", "comp", "scale", "bias", "oscale", "ozp", "relu",
          "pscale", "pbias", "s2", "z2", "relu2")
DIRECT = 1  # flag: pack the input as it is (1x1 stride-1 convs: no window, no unfold)
_SYMBOL = "msc_qconv_block"
_L2_BLOCK = cache_bytes(2)  # patch rows + panels a block unfolds at a time: one L2 (less
# ran slower on one thread: more, shorter copies and GEMM calls)
PARALLEL_MACS = 1e6  # ~10 us at VNNI speed: a handoff (~5 us) pays off from here

SLACK = 128  # bytes after the padded planes and the patch rows: whole-vector copies
PACK = "msc_qpack_vnni_u8"


def build_pack(module: ir.Module) -> None:
    """void (src, lds, dst, groups, n, flip): rows [4*groups, n] (row stride lds) as VNNI
    panels; columns past n are 0; every byte is xored with ``flip``."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I8_PTR, I64, I8_PTR, I64, I64, I8]),
                     name=PACK)
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



def pad_planes(b, a) -> None:
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


def _unfold_cols(b, v, xp, cols, q, nq) -> None:
    """cols[k, t] = xp[c, ih - y0, iw] for the pixels q..q+nq (k = (c*KH + i)*KW + j), whole
    rows of ``fill`` from C*KH*KW to K4; rows are written in address order (see _copy64)."""
    taps = b.mul(v["kh"], v["kw"])
    k, q_end = b.mul(v["c"], taps), b.add(q, nq)
    zero = const64(0)
    whole = b.and_(b.icmp_signed("==", b.srem(q, v["ow"]), zero),
                   b.icmp_signed("==", b.srem(nq, v["ow"]), zero))
    unit = b.and_(whole, b.and_(b.icmp_signed("==", v["sw"], const64(1)),
                                b.icmp_signed("<=", v["ow"], const64(64))))
    two = b.and_(whole, b.and_(b.icmp_signed("==", v["sw"], const64(2)),
                               b.icmp_signed("<=", v["ow"], const64(32))))
    with b.if_else(unit) as (rows, other):
        with rows:
            _unfold_rows(b, v, xp, cols, q, nq, k, taps, 1)
        with other, b.if_else(two) as (rows2, general):
            with rows2:
                _unfold_rows(b, v, xp, cols, q, nq, k, taps, 2)
            with general:
                _unfold_runs(b, v, xp, cols, q, nq, q_end, k, taps)
    _fill(b, cols, b.mul(k, nq), b.mul(v["k4"], nq), b.trunc(v["fill"], I8))


def _unfold_rows(b, v, xp, cols, q, nq, k, taps, stride: int) -> None:
    """The unfold of whole output rows of at most 64 / ``stride`` pixels at column stride 1
    or 2 (every conv of a small plane whose block holds whole rows): per patch row, one
    64-byte load per output row (its even bytes at stride 2) and one store, no bounds to work
    out (a row's tail is overwritten by the next, in address order)."""
    v64 = ir.VectorType(I8, 64).as_pointer()
    width = 64 // stride
    out_ty = ir.VectorType(I8, width).as_pointer()
    picks = ir.Constant(ir.VectorType(I32, width), [stride * t for t in range(width)])
    padded, oh0, count = b.mul(v["wh"], v["wp"]), b.sdiv(q, v["ow"]), b.sdiv(nq, v["ow"])
    with for_range(b, k, name="k") as kk:
        c, tap = b.sdiv(kk, taps), b.srem(kk, taps)
        i, j = b.sdiv(tap, v["kw"]), b.srem(tap, v["kw"])
        src = b.gep(xp, [b.add(b.mul(c, padded), b.mul(j, v["dw"]))])
        row = b.gep(cols, [b.mul(kk, nq)])
        with for_range(b, count, name="r") as r:
            ih = b.sub(b.add(b.mul(b.add(oh0, r), v["sh"]), b.mul(i, v["dh"])), v["y0"])
            value = b.load(b.bitcast(b.gep(src, [b.mul(ih, v["wp"])]), v64), align=1)
            if stride > 1:
                value = b.shuffle_vector(value, ir.Constant(value.type, ir.Undefined), picks)
            b.store(value, b.bitcast(b.gep(row, [b.mul(r, v["ow"])]), out_ty), align=1)


def _unfold_runs(b, v, xp, cols, q, nq, q_end, k, taps) -> None:
    """The unfold of any block: per patch row and output row, the run of its pixels."""
    padded = b.mul(v["wh"], v["wp"])
    oh0 = b.sdiv(q, v["ow"])
    oh1 = b.add(b.sdiv(b.sub(q_end, const64(1)), v["ow"]), const64(1))
    unit = b.icmp_signed("==", v["sw"], const64(1))
    with for_range(b, k, name="k") as kk:
        c, tap = b.sdiv(kk, taps), b.srem(kk, taps)
        i, j = b.sdiv(tap, v["kw"]), b.srem(tap, v["kw"])
        src = b.gep(xp, [b.add(b.mul(c, padded), b.mul(j, v["dw"]))])
        row = b.gep(cols, [b.sub(b.mul(kk, nq), q)])  # indexed by pixel
        with for_range(b, oh1, start=oh0, name="oh") as oh:
            base = b.mul(oh, v["ow"])
            lo = b.select(b.icmp_signed(">", q, base), q, base)
            hi = imin(b, q_end, b.add(base, v["ow"]))
            ih = b.sub(b.add(b.mul(oh, v["sh"]), b.mul(i, v["dh"])), v["y0"])  # window row
            line = b.gep(src, [b.add(b.mul(ih, v["wp"]), b.mul(b.sub(lo, base), v["sw"]))])
            out, count = b.gep(row, [lo]), b.sub(hi, lo)
            with b.if_else(unit) as (contiguous, strided):
                with contiguous:
                    _copy64(b, line, out, count)
                with strided:
                    _strided_copy(b, line, out, count, v["sw"])


def _build_block(module: ir.Module, pack: ir.Function) -> None:
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I64] * 4), name=_SYMBOL)
    x_int, arena, out_int, row_int = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    row = b.inttoptr(row_int, I64.as_pointer())
    v = {name: b.load(b.gep(row, [const64(i)]), name=name) for i, name in enumerate(FIELDS)}
    x = b.inttoptr(x_int, I8_PTR)

    def at(base, name):
        return b.inttoptr(b.add(base, v[name]), I8_PTR)
    xp, cols, packed = at(arena, "xp"), at(arena, "cols"), at(arena, "packed")
    flags = v["flags"]
    direct = b.icmp_signed("!=", b.and_(flags, const64(DIRECT)), const64(0))
    with b.if_then(b.not_(direct)):
        _pad_window(b, v, x, xp)
    driver = b.inttoptr(v["driver"], ir.FunctionType(ir.VoidType(), DRIVER_TYPES).as_pointer())
    groups = b.sdiv(v["k4"], const64(4))
    with for_range(b, v["q1"], start=v["q0"], step=v["qb"], name="q") as q:
        nq = imin(b, v["qb"], b.sub(v["q1"], q))
        with b.if_then(b.not_(direct)):
            _unfold_cols(b, v, xp, cols, q, nq)
        src = b.select(direct, b.gep(x, [q]), cols)
        lds = b.select(direct, v["p"], nq)
        b.call(pack, [src, lds, packed, groups, nq, b.trunc(v["flip"], I8)])
        dst = b.inttoptr(b.add(out_int, b.mul(q, v["size"])), I8_PTR)
        b.call(driver, _driver_args(b, v, packed, dst, nq, groups))
    b.ret_void()


def _driver_args(b, v, packed, dst, nq, groups) -> list:
    """The driver's arguments (int8_gemm's _DRIVER_ARGS): f32 fields travel as their bits."""
    def ptr(name, ty):
        return b.inttoptr(v[name], ty)

    def f32(name):
        return b.bitcast(b.trunc(v[name], I32), ir.FloatType())

    def i32(name):
        return b.trunc(v[name], I32)
    t = DRIVER_TYPES
    return [ptr("w_ptr", I8_PTR), packed, dst, v["rows"], nq, groups, v["k4"], v["p"],
            ptr("comp", t[8]), ptr("scale", t[9]), ptr("bias", t[10]), f32("oscale"),
            i32("ozp"), i32("relu"), ptr("pscale", t[14]), ptr("pbias", t[15]), f32("s2"),
            i32("z2"), i32("relu2")]


def _pad_window(b, v, x, xp) -> None:
    """xp[c, r, PL + t] = x[c, y0 + r - PT, t] for the window's rows r < wh, ``fill`` around
    (the padded rows y0..y0+wh that the block's output rows read)."""
    fill = b.trunc(v["fill"], I8)
    _fill(b, xp, const64(0), b.mul(v["c"], b.mul(v["wh"], v["wp"])), fill)
    with for_range(b, b.mul(v["c"], v["wh"]), name="wrow") as cr:
        c, r = b.sdiv(cr, v["wh"]), b.srem(cr, v["wh"])
        y = b.sub(b.add(v["y0"], r), v["pt"])
        inside = b.and_(b.icmp_signed(">=", y, const64(0)), b.icmp_signed("<", y, v["h"]))
        with b.if_then(inside):
            dst = b.gep(xp, [b.add(b.mul(cr, v["wp"]), v["pl"])])
            src = b.gep(x, [b.mul(b.add(b.mul(c, v["h"]), y), v["w"])])
            b.call(_intrinsic(b.function.module, "memcpy"), [
                dst, src, v["w"], ir.Constant(ir.IntType(1), 0)])


@cache
def _library():
    def build():
        module = ir.Module(name="msc_qconv_tasks")
        build_pack(module)
        pack = module.globals[PACK]
        pack.linkage = "internal"  # a private copy: int8_conv's library exports the symbol
        _build_block(module, pack)
        return module
    return get_jit().compile_generated(build, [_SYMBOL], (
        __name__, "msc.backend.kernels.int8.gemm", "msc.backend.llvm.loops"))


@cache
def block_fn():
    """``block(x, arena, out, row)`` (see the module doc)."""
    return _library().cfunc(_SYMBOL, None, *[ctypes.c_int64] * 4)


# ---------------------------------------------------------------------------------------------
# Plans: the task lists of one conv shape, kept by the kernel.


def _round64(n: int) -> int:
    return -(-n // 64) * 64


class ConvPlan:
    """The task list of one (conv, image size, thread count), launched with bases (x, arena,
    out); ``arena`` bytes of scratch (every block's window, patch rows and panels)."""

    __slots__ = ("arena", "blocks", "rows")

    def __init__(self, blocks, arena: int, rows: np.ndarray):
        self.blocks, self.arena, self.rows = blocks, arena, rows

    def run(self, x: int, arena: int, out: int, threads: int) -> None:
        self.blocks.launch(1, (x, arena, out), threads)


def _blocks(p: int, o: int, parts: int) -> list[tuple[int, int, int, int]]:
    """(q0, q1, r0, r1) blocks: pixel panels first; when panels are few (squeezenet's 13 x 13
    planes are three), output channel tiles too, each block unfolding its pixels again, or,
    for few channels on one or two panels (densenet's 7 x 7 growth convs), 16-pixel blocks:
    each the GEMM's one-vector tile, so that split adds no GEMM work (but reads every weight
    once per block)."""
    qs = split_range(p, parts, NR)
    if len(qs) >= parts:
        return [(q0, q1, 0, o) for q0, q1 in qs]
    tiles = -(-parts // len(qs))
    if p <= 2 * NR and o < 24 * tiles:  # under 4 row tiles per block
        return [(q0, q1, 0, o) for q0, q1 in split_range(p, -(-p // LANES), LANES)]
    rs = split_range(o, tiles, 6)
    return [(q0, q1, r0, r1) for q0, q1 in qs for r0, r1 in rs]


def _units(k, n: int, p: int, threads: int) -> list:
    """[(image/group pair, group, q0, q1, r0, r1)]: blocks of one image, or whole pairs."""
    og = k.o // k.groups
    if k.groups == 1 and n == 1:
        blocks = _blocks(p, og, 2 * threads) if threads > 1 else [(0, p, 0, og)]
        return [(0, 0, *blk) for blk in blocks]
    return [(i, i % k.groups, 0, p, 0, og) for i in range(n * k.groups)]


def _window(k, ow: int, q0: int, q1: int) -> tuple[int, int]:
    """(y0, rows): the padded input rows the output pixels q0..q1 read."""
    oh0, oh1 = q0 // ow, (q1 - 1) // ow + 1
    y0 = oh0 * k.strides[0]
    return y0, (oh1 - 1) * k.strides[0] + (k.kh - 1) * k.dilation[0] + 1 - y0


def _fixed(k, dims: tuple) -> dict:
    """The row fields every block of a plan shares."""
    h, w, oh, ow = dims
    pt, pl, _, pr = k.padding
    return {"c": k.c, "h": h, "w": w, "kh": k.kh, "kw": k.kw, "sh": k.strides[0],
            "sw": k.strides[1], "pt": pt, "pl": pl, "dh": k.dilation[0], "dw": k.dilation[1],
            "oh": oh, "ow": ow, "k4": k.k4, "fill": _fill_byte(k), "wp": w + pl + pr,
            "flip": k.flip - 256 if k.flip else 0, "p": oh * ow,
            "size": OUTS[k.cfg.out], "driver": native_address(k.driver),
            "flags": DIRECT if k.direct else 0}


def _fill_byte(k) -> int:
    return (k.zero - 128 if k.flip else k.zero) & 0xFF


def _epilogue(k, ch: int) -> dict:
    """The epilogue fields of a block whose first output channel is ``ch``."""
    comp, scale, bias, oscale, ozp, relu, pscale, pbias, s2, z2, relu2 = k.epi.args
    return {"w_ptr": k.w_ptr + ch * k.k4, "comp": comp + 4 * ch, "scale": scale + 4 * ch,
            "bias": bias + 4 * ch, "oscale": _f32_bits(oscale), "ozp": ozp, "relu": relu,
            "pscale": pscale + 4 * ch, "pbias": pbias + 4 * ch, "s2": _f32_bits(s2), "z2": z2,
            "relu2": relu2}


def conv_plan(k, n: int, dims: tuple, threads: int) -> ConvPlan:
    """The plan of QConv2d ``k`` for ``n`` images of (H, W, OH, OW) on ``threads``."""
    h, w, oh, ow = dims
    p, og = oh * ow, k.o // k.groups
    threads = threads if n * k.o * k.k4 * p >= PARALLEL_MACS else 1
    most = max(NR, _L2_BLOCK // (2 * k.k4) // NR * NR)  # pixels unfolded at a time
    fixed = _fixed(k, dims)
    units = _units(k, n, p, threads)
    rows = np.zeros((len(units), len(FIELDS)), np.int64)
    tasks = NativeTasks(len(units))
    tasks.records[:, 0] = native_address(block_fn())
    at = 0
    for t, (i, g, q0, q1, r0, r1) in enumerate(units):
        y0, wh = _window(k, ow, q0, q1)
        qb = min(most, _round64(q1 - q0))
        cols, packed = (0 if k.direct else _round64(k.k4 * qb + SLACK)), k.k4 * qb
        xp = 0 if k.direct else _round64(k.c * wh * fixed["wp"] + SLACK)
        values = dict(fixed, y0=y0, wh=wh, cols=at, packed=at + cols, xp=at + cols + packed,
                      q0=q0, q1=q1, qb=qb, rows=r1 - r0, **_epilogue(k, g * og + r0))
        rows[t] = [values[name] for name in FIELDS]
        tasks.records[t, 1:5] = (i * k.c * h * w, 0, (i * og + r0) * p * fixed["size"],
                                 rows[t].ctypes.data)
        at += cols + packed + xp
    tasks.keep = rows
    return ConvPlan(tasks, at, rows)


def _f32_bits(value: float) -> int:
    return int(np.float32(value).view(np.uint32))
