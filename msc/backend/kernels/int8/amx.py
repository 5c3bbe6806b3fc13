"""The int8 GEMM driver on AMX tiles (Intel Sapphire Rapids and later): what int8/gemm.py
compiles instead of its VNNI driver when the host has ``amx-tile`` + ``amx-int8``, Linux
granted the tile state, and ``$MSC_CPU_ISA`` does not cap it away ("avx512" / "avx2" drop AMX).

Why: at the corpus's list batch the int8 transformer rows are GEMM-bound. One ``tdpbusd``
multiplies a 16 x 64 uint8 tile by a 64 x 16 int8 tile into 16 x 16 int32 (16k
multiply-adds); a ``vpdpbusd`` does 64. onnxruntime's MLAS takes this path on such hosts too.

Same arguments and the same bytes as the VNNI driver (its ``DRIVER_TYPES``): B is the VNNI
panel int8/gemm.py packs (``[K4/4][64][4]`` per panel), which already *is* the tile layout
AMX wants for its right operand (rows of 16 columns x 4 consecutive k, 256 bytes apart), so
nothing is repacked. A is read in place as tiles of 16 rows x 64 bytes (stride lda). A block
of C is 32 rows x 32 columns: 2 A tiles x 2 B tiles -> 4 int32 tiles (tmm0-3 C, tmm4-5 A,
tmm6-7 B). The int32 block goes to a stack scratch, where the last K % 64 bytes are added with
``vpdpbusd`` (exact, as the VNNI driver) and the VNNI driver's epilogue (comp, scale, bias,
requantize, ``mid`` chain) runs on each row. Both paths sum the same integer products in int32
without saturation, so every output byte is the same.

``channel="row"`` (convs: the int8 weight as A, uint8 patches as B) uses ``tdpbsud``
(signed x unsigned). Shapes too small for tiles (fewer than ``MIN_ROWS`` rows, K under 128,
under ``MIN_MACS`` multiply-adds) call the VNNI driver compiled into the same module.

Linux hands out the tile state only on request (``arch_prctl(ARCH_REQ_XCOMP_PERM,
XFEATURE_XTILEDATA)``); a tile instruction before that dies with SIGILL. The permission is
asked once per process (:func:`tile_permission`) before any AMX driver is chosen; threads
share it and a forked child inherits it.
"""

from __future__ import annotations

import ctypes
import platform
import sys
from collections.abc import Callable
from functools import cache

from llvmlite import ir

from ...llvm.jit import HostTarget, host_target
from ...llvm.loops import I32, I64, const64, entry_alloca, for_range, imin

__all__ = ["BLOCK", "MIN_GROUPS", "MIN_MACS", "MIN_ROWS", "define_amx_driver", "host_amx",
           "tile_permission"]

_SYS_ARCH_PRCTL = 158  # x86-64 syscall number
_ARCH_GET_XCOMP_PERM = 0x1022
_ARCH_REQ_XCOMP_PERM = 0x1023
_XFEATURE_XTILEDATA = 18
_FEATURES = ("amx-tile", "amx-int8", "avx512vnni", "avx512bw")  # the K tail runs vpdpbusd

TILE_ROWS = 16  # rows of an A / C tile
TILE_BYTES = 64  # bytes of a tile row: 64 k of A, 16 int32 of C, 16 x 4 k of B
STEP_GROUPS = TILE_BYTES // 4  # groups of 4 k per tdpbusd
BLOCK = 2 * TILE_ROWS  # rows and columns of C per block (2 x 2 tiles)
# Shapes run on tiles from here on (benchmarks/int8_gemm.py, docs/perf/int8.md): the tiles win
# from 4-8 rows at K 768, and break even at K 64 (one tile step per block). Below MIN_MACS the
# VNNI driver runs: right after a tile call the next vector kernels run ~2 us slower (measured
# here: a 64 x 256 x 256 VNNI GEMM after a 12 x 64 x 32 tile GEMM, 23.5 us vs 21 us), which a
# GEMM of under ~1M multiply-adds does not win back (the corpus's batch-1 rows were 10 %
# slower with tiles from 8 rows and K 64 on).
MIN_ROWS = 8
MIN_GROUPS = 2 * STEP_GROUPS  # K >= 128
MIN_MACS = 1 << 20

I8 = ir.IntType(8)
I16 = ir.IntType(16)
I8_PTR = I8.as_pointer()
VOID = ir.VoidType()


@cache
def tile_permission() -> bool:
    """Ask Linux for the AMX tile data state for this process, once; True when granted.

    Without it the first tile instruction raises SIGILL (the kernel keeps the 8 KiB tile
    state out of every process that did not ask). Not Linux x86-64: False."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    call = libc.syscall
    if call(ctypes.c_long(_SYS_ARCH_PRCTL), ctypes.c_long(_ARCH_REQ_XCOMP_PERM),
            ctypes.c_long(_XFEATURE_XTILEDATA)) != 0:
        return False
    granted = ctypes.c_uint64(0)
    if call(ctypes.c_long(_SYS_ARCH_PRCTL), ctypes.c_long(_ARCH_GET_XCOMP_PERM),
            ctypes.byref(granted)) != 0:
        return False
    return bool(granted.value >> _XFEATURE_XTILEDATA & 1)


def host_amx(target: HostTarget | None = None) -> bool:
    """Whether int8 GEMMs run on AMX tiles here: the (capped) target has AMX-INT8 and
    AVX-512 VNNI, and Linux granted the tile state (asked here, once per process)."""
    target = target or host_target()
    return all(target.has(f) for f in _FEATURES) and tile_permission()


class _Tiles:
    """The tile intrinsics of one module (tile registers are immediates: tmm0-7)."""

    def __init__(self, module: ir.Module, signed_a: bool):
        def declare(name, args):
            return ir.Function(module, ir.FunctionType(VOID, args), name=f"llvm.x86.{name}")

        self.config = declare("ldtilecfg", [I8_PTR])
        self.zero = declare("tilezero", [I8])
        self.load = declare("tileloadd64", [I8, I8_PTR, I64])
        self.dot = declare("tdpbsud" if signed_a else "tdpbusd", [I8, I8, I8])
        self.store = declare("tilestored64", [I8, I8_PTR, I64])
        self.release = declare("tilerelease", [])


def define_amx_driver(module: ir.Module, t, cfg, name: str, fallback: ir.Function,
                      epilogue: Callable, nr: int, budget: int) -> ir.Function:
    """``void name(<the VNNI driver's arguments>)`` on tiles; ``fallback`` (the VNNI driver,
    same arguments) runs shapes under one block; ``epilogue(b, t, args, acc)`` is the VNNI
    driver's (``acc``: rows of int32-vector slots); ``nr``: the panel width of B (64);
    ``budget``: bytes of B panels one pass over the rows keeps in cache (half the L2)."""
    fn = ir.Function(module, fallback.function_type, name=name)
    args = dict(zip(_ARG_NAMES, fn.args))
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    macs = b.mul(b.mul(args["m"], args["n"]), b.mul(args["groups"], const64(4)))
    small = b.or_(b.or_(b.icmp_signed("<", args["m"], const64(MIN_ROWS)),
                        b.icmp_signed("<", args["groups"], const64(MIN_GROUPS))),
                  b.icmp_signed("<", macs, const64(MIN_MACS)))
    with b.if_else(small, likely=False) as (tiny, tiles):
        with tiny:
            b.call(fallback, fn.args)
        with tiles:
            _Driver(module, b, t, cfg, args, epilogue, (nr, budget)).emit()
    b.ret_void()
    return fn


_ARG_NAMES = ("a", "bp", "c", "m", "n", "groups", "lda", "ldc", "comp", "scale", "bias",
              "oscale", "ozp", "relu", "pscale", "pbias", "s2", "z2", "relu2", "rcomp")
_CHANNEL_ARRAYS = ("comp", "scale", "bias", "pscale", "pbias")


class _Driver:
    """The tile loop nest: chunks of panels (64 columns each), blocks of 32 rows, the
    chunk's panels, halves of 32 columns."""

    def __init__(self, module, b: ir.IRBuilder, t, cfg, args: dict, epilogue, sizes: tuple):
        self.b, self.t, self.cfg, self.epilogue = b, t, cfg, epilogue
        self.nr, self.budget = sizes
        self.tiles = _Tiles(module, signed_a=cfg.channel == "row")
        self.size = {"s32": 4, "f32": 4, "u8": 1, "s8": 1}[cfg.out]
        args.setdefault("rcomp", ir.Constant(I32.as_pointer(), None))
        self.args = dict(args, relu=b.icmp_signed("!=", args["relu"], I32(0)),
                         relu2=b.icmp_signed("!=", args["relu2"], I32(0)))
        self.steps = b.sdiv(args["groups"], const64(STEP_GROUPS))
        self.config = entry_alloca(b, ir.ArrayType(I8, 64), "tilecfg")
        self.config.align = 64
        self.configured = entry_alloca(b, I64, "configured")  # rows the config holds
        self.scratch = entry_alloca(b, ir.ArrayType(I32, BLOCK * BLOCK), "cblock")
        self.scratch.align = 64

    def emit(self) -> None:
        """Chunks of panels whose B fits ``budget`` bytes (stays in L2 while every block of
        rows passes), blocks of 32 rows (whose A stays in L1 across the chunk's panels)."""
        b, args, nr = self.b, self.args, self.nr
        b.store(const64(-1), self.configured)
        panels = b.sdiv(b.add(args["n"], const64(nr - 1)), const64(nr))
        blocks = b.sdiv(b.add(args["m"], const64(BLOCK - 1)), const64(BLOCK))
        panel_bytes = b.mul(args["groups"], const64(4 * nr))
        chunk = b.sdiv(const64(self.budget), panel_bytes)
        chunk = b.select(b.icmp_signed("<", chunk, const64(1)), const64(1), chunk)
        with for_range(b, panels, step=chunk, name="jc") as jc:
            last = imin(b, b.add(jc, chunk), panels)
            with for_range(b, blocks, name="ib") as ib:
                i0 = b.mul(ib, const64(BLOCK))
                rows = imin(b, b.sub(args["m"], i0), BLOCK)
                self._configure(rows)
                with for_range(b, last, start=jc, name="jr") as jr:
                    j0 = b.mul(jr, const64(nr))
                    ncols = imin(b, b.sub(args["n"], j0), nr)
                    panel = b.gep(args["bp"], [b.mul(jr, panel_bytes)])
                    halves = b.sdiv(b.add(ncols, const64(BLOCK - 1)), const64(BLOCK))
                    with for_range(b, halves, name="h") as h:
                        c0 = b.mul(h, const64(BLOCK))
                        bh = b.gep(panel, [b.mul(c0, const64(4))])
                        self._block(i0, rows, bh)
                        self._finish(i0, rows, j0, c0, b.sub(ncols, c0), bh)
        b.call(self.tiles.release, [])

    def _configure(self, rows) -> None:
        """Load the tile config for a block of ``rows`` (1-32) unless it holds it already
        (ldtilecfg zeroes the tiles: only at a block's start)."""
        b = self.b
        with b.if_then(b.icmp_signed("!=", b.load(self.configured), rows)):
            b.store(rows, self.configured)
            cfg = b.bitcast(self.config, I8_PTR)
            first = b.trunc(imin(b, rows, TILE_ROWS), I8)
            second = b.trunc(imin(b, b.sub(rows, const64(TILE_ROWS)), TILE_ROWS), I8)
            second = b.select(b.icmp_signed(">", second, I8(0)), second, first)
            for i in range(64):
                b.store(I8(1 if i == 0 else 0), b.gep(cfg, [const64(i)]))
            # tmm0/1 C and tmm4 A of the first 16 rows; tmm2/3 C, tmm5 A of the next; tmm6/7 B
            for tile, count in ((0, first), (1, first), (4, first), (2, second), (3, second),
                                (5, second), (6, I8(TILE_ROWS)), (7, I8(TILE_ROWS))):
                colsb = b.bitcast(b.gep(cfg, [const64(16 + 2 * tile)]), I16.as_pointer())
                b.store(I16(TILE_BYTES), colsb)
                b.store(count, b.gep(cfg, [const64(48 + tile)]))
            b.call(self.tiles.config, [cfg])

    def _block(self, i0, rows, bh) -> None:
        """int32 sums of the first ``steps * 64`` k of rows [i0, i0 + rows) x 32 columns at
        ``bh`` into the scratch block (row stride 128 bytes)."""
        b, tl, args = self.b, self.tiles, self.args
        a0 = b.gep(args["a"], [b.mul(i0, args["lda"])])
        a1 = b.gep(a0, [b.mul(const64(TILE_ROWS), args["lda"])])
        two = b.icmp_signed(">", rows, const64(TILE_ROWS))
        out = b.bitcast(self.scratch, I8_PTR)
        with b.if_else(two) as (both, one):
            for arm, pairs in ((both, 2), (one, 1)):
                with arm:
                    for tile in range(2 * pairs):
                        b.call(tl.zero, [I8(tile)])
                    with for_range(b, self.steps, name="s") as s:
                        k = b.mul(s, const64(TILE_BYTES))
                        b.call(tl.load, [I8(4), b.gep(a0, [k]), args["lda"]])
                        if pairs == 2:
                            b.call(tl.load, [I8(5), b.gep(a1, [k]), args["lda"]])
                        bk = b.gep(bh, [b.mul(s, const64(STEP_GROUPS * 4 * self.nr))])
                        b.call(tl.load, [I8(6), bk, const64(4 * self.nr)])
                        b.call(tl.load, [I8(7), b.gep(bk, [const64(TILE_BYTES)]),
                                         const64(4 * self.nr)])
                        for c_tile, a_tile, b_tile in ((0, 4, 6), (1, 4, 7), (2, 5, 6),
                                                       (3, 5, 7))[:2 * pairs]:
                            b.call(tl.dot, [I8(c_tile), I8(a_tile), I8(b_tile)])
                    for tile in range(2 * pairs):
                        at = (tile // 2) * TILE_ROWS * BLOCK * 4 + (tile % 2) * TILE_BYTES
                        b.call(tl.store, [I8(tile), b.gep(out, [const64(at)]),
                                          const64(BLOCK * 4)])

    def _finish(self, i0, rows, j0, c0, ncols, bh) -> None:
        """Per row of the block: the K tail on vectors, then the VNNI driver's epilogue."""
        b, t, args = self.b, self.t, self.args
        i32v = t.i32v
        slots = b.bitcast(self.scratch, i32v.as_pointer())
        tail = b.mul(self.steps, const64(STEP_GROUPS))
        vectors = self._column_vectors(b.add(j0, c0), ncols)
        with for_range(b, rows, name="r") as r:
            row = b.add(i0, r)
            acc = [[b.gep(slots, [b.add(b.mul(r, const64(2)), const64(v))]) for v in range(2)]]
            a_row = b.gep(args["a"], [b.mul(row, args["lda"])])
            with for_range(b, args["groups"], start=tail, name="g") as g:
                word = b.load(b.bitcast(b.gep(a_row, [b.mul(g, const64(4))]),
                                        I32.as_pointer()), align=1)
                a = _splat(b, word, i32v)
                base = b.gep(bh, [b.mul(g, const64(4 * self.nr))])
                for v, slot in enumerate(acc[0]):
                    vec = b.load(b.bitcast(b.gep(base, [const64(v * TILE_BYTES)]),
                                           i32v.as_pointer()), align=64)
                    pair = (a, vec) if self.cfg.channel == "col" else (vec, a)
                    b.store(t.dot(b, b.load(slot), *pair), slot)
            self.epilogue(b, t, self._row_args(row, b.add(j0, c0), ncols), acc, vectors)

    def _column_vectors(self, first, ncols):
        """"col": the per-column vectors of the block's 32 columns, loaded once for all its
        rows (the epilogue's ``vectors``); "row": None (one scalar per row, loaded there)."""
        if self.cfg.channel != "col":
            return None
        b, t, args = self.b, self.t, self.args
        limit = _splat(b, b.trunc(ncols, I32), t.i32v)
        loaded = {}
        for v in range(2):
            lanes = ir.Constant(t.i32v, list(range(v * t.i32v.count, (v + 1) * t.i32v.count)))
            mask = b.icmp_signed("<", lanes, limit)
            for name in _CHANNEL_ARRAYS:
                ty = t.i32v if name == "comp" else t.f32v
                ptr = b.gep(args[name], [b.add(first, const64(v * t.i32v.count))])
                loaded[v, name] = t.load(b, ty, ptr, mask)

        def vectors(b, t, args, r, v, mask, names):
            return [loaded[v, name] for name in names]
        return vectors

    def _row_args(self, row, first, ncols) -> dict:
        """The epilogue's arguments for one row of C from column ``first`` on: channel
        arrays at that column ("col") or at that row ("row")."""
        b, args = self.b, self.args
        c = b.gep(args["c"], [b.mul(b.add(b.mul(row, args["ldc"]), first),
                                    const64(self.size))])
        out = dict(args, c=c, ncols=ncols, rcomp=b.gep(args["rcomp"], [row]))
        at = first if self.cfg.channel == "col" else row
        out.update({k: b.gep(args[k], [at]) for k in _CHANNEL_ARRAYS})
        return out


def _splat(b: ir.IRBuilder, scalar: ir.Value, ty: ir.VectorType) -> ir.Value:
    first = b.insert_element(ir.Constant(ty, ir.Undefined), scalar, I32(0))
    return b.shuffle_vector(first, ir.Constant(ty, ir.Undefined),
                            ir.Constant(ir.VectorType(I32, ty.count), None))
