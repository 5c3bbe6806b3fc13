"""int8 GEMM ``C = A[M,K] @ B[K,N]`` with int32 accumulation and a dequantize / requantize
epilogue: the kernel behind the folded QDQ convs and matmuls (fuse/qdq/fold.py).

One side is uint8 (the activation, with its zero point), the other int8 (the weight,
symmetric). B is packed in the VNNI layout: panels of NR = 64 columns, each ``[K4/4][NR][4]``
bytes (four consecutive k of one column are one 32-bit lane), zero-padded to K4 = ceil(K/4)*4
and to whole panels. A is read in place, four bytes of a row at a time, broadcast to all lanes.
With AVX-512 VNNI each (row, vector) step is one ``vpdpbusd`` (u8 x s8 products summed in
groups of four into int32, without saturation: |sum| <= 4 * 255 * 128 per step); without it
the same sums are built from sign/zero extensions, multiplies and adds (exact, slower).
On a host with AMX-INT8 (and Linux's permission, and no ``$MSC_CPU_ISA`` cap) the compiled
entry is int8/amx.py's tile driver instead: the same arguments, the same packed B, the same
epilogue and the same bytes, 2-3x the VNNI driver's speed from 8 rows and K 64 on.

Two orientations, ``channel``:
- ``"col"`` (matmul / dense): A is the uint8 activation [M, K] (rows of tokens), B the packed
  int8 weight; the per-channel epilogue runs along N.
- ``"row"`` (conv): A is the int8 weight [O, K4] (zero-padded rows), B the packed uint8
  activation patches [K, pixels]; the epilogue runs along M, so C comes out NCHW.

The activation's zero point z is taken out by a per-channel int32 term ``comp = z * sum_k w``
subtracted from the accumulator before the epilogue (exact). Epilogue, per ``out``:
``s32``: acc - comp; ``f32``: (acc - comp) * scale + bias, then relu; ``u8`` / ``s8``:
that float, then ``clamp(rint(y / out_scale) + out_zero)`` (ONNX QuantizeLinear). With
``mid`` ("u8" / "s8": a quantize -> dequantize -> per-channel affine -> quantize chain after
the op, e.g. a MatMul's bias Add that onnxruntime quantizes on its own), that quantized value
goes on in registers: ``v = (q - out_zero) * out_scale * pscale + pbias``, relu2, and ``v``
(f32) or its requantization with ``(s2, z2)`` is stored.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import cache

import numpy as np
from llvmlite import ir

from ....errors import BuildError
from ...llvm.jit import get_jit, host_target
from ...llvm.loops import F32, I1, I32, I64, const64, entry_alloca, for_range, imin, switch_cases
from ...runtime.task_wrap import wrapped_tasks
from ...runtime.threads import cache_bytes, task_threads
from .amx import BLOCK as AMX_BLOCK_ROWS
from .amx import define_amx_driver, host_amx

__all__ = ["LANES", "NR", "QGemmConfig", "gemm_blocks", "host_amx", "host_vnni", "pack_vnni",
           "qgemm_driver", "run_qgemm"]

LANES = 16  # int32 lanes per vector (one zmm)
VECS = 4  # vectors per tile row: NR = 64 columns
NR = LANES * VECS
MR = 6  # rows per tile: 6 x 4 = 24 int32 accumulators, as the fp32 GEMM
I8 = ir.IntType(8)
I8_PTR = I8.as_pointer()
I32_PTR = I32.as_pointer()
F32_PTR = F32.as_pointer()
OUTS = {"s32": 4, "f32": 4, "u8": 1, "s8": 1}  # output dtype -> bytes per element
_RANGES = {"u8": (0, 255), "s8": (-128, 127)}
_ALIGN = 64


def host_vnni() -> bool:
    """Whether the host runs 512-bit ``vpdpbusd`` (AVX-512 VNNI)."""
    t = host_target()
    return t.has("avx512vnni") and t.has("avx512bw")


@dataclass(frozen=True)
class QGemmConfig:
    """What the kernel is compiled for; M, N, K and the epilogue values are run-time."""

    channel: str = "col"
    out: str = "f32"
    vnni: bool = True
    mid: str = ""  # "u8" / "s8": the quantized value a chain goes on from (see module doc)
    rowterm: bool = False  # "col" only: a per-row int32 term too (``rcomp``, the driver's last
    # argument): the other operand's zero point times the row sums of A, for a product of two
    # activations (int8/bmm.py)
    amx: bool | None = None  # AMX tiles (int8/amx.py) for shapes big enough; None: where the
    # host has them (host_amx: features, Linux's permission, $MSC_CPU_ISA); only with vnni

    def __post_init__(self):
        if self.channel not in ("col", "row") or self.out not in OUTS or (
                self.mid not in ("", "u8", "s8")) or (self.rowterm and self.channel != "col"):
            raise BuildError(f"unsupported int8 GEMM configuration {self}", op="int8_gemm",
                             hint=f"channel col|row, out one of {sorted(OUTS)}")
        wanted = True if self.amx is None else bool(self.amx)
        object.__setattr__(self, "amx", wanted and bool(self.vnni) and host_amx())

    @property
    def symbol(self) -> str:
        mid = f"_via_{self.mid}" if self.mid else ""
        mid += "_rt" if self.rowterm else ""
        isa = "amx" if self.amx else "vnni" if self.vnni else "ext"
        return f"msc_qgemm_{self.channel}_{self.out}{mid}_{isa}_{MR}x{NR}"


def pack_vnni(b: np.ndarray) -> np.ndarray:
    """A [K, N] int8 or uint8 matrix as VNNI panels ``[ceil(N/NR), K4/4, NR, 4]``, flat,
    zero-padded, 64-byte aligned (what the kernel's B side reads)."""
    k, n = b.shape
    k4, panels = -(-k // 4) * 4, -(-n // NR)
    padded = np.zeros((k4, panels * NR), b.dtype)
    padded[:k, :n] = b
    packed = padded.reshape(k4 // 4, 4, panels, NR).transpose(2, 0, 3, 1)
    out = aligned_bytes(packed.size, b.dtype)
    out[...] = packed.reshape(-1)
    return out


def aligned_bytes(size: int, dtype=np.uint8) -> np.ndarray:
    raw = np.empty(size + _ALIGN, dtype)
    start = -raw.ctypes.data % _ALIGN
    return raw[start: start + size]


# ---------------------------------------------------------------------------------------------
# IR


def splat(b: ir.IRBuilder, scalar: ir.Value) -> ir.Value:
    ty = ir.VectorType(scalar.type, LANES)
    first = b.insert_element(ir.Constant(ty, ir.Undefined), scalar, I32(0))
    return b.shuffle_vector(first, ir.Constant(ty, ir.Undefined),
                            ir.Constant(ir.VectorType(I32, LANES), None))


class IRTypes:
    """Types and intrinsics of one module."""

    def __init__(self, module: ir.Module, cfg: QGemmConfig):
        self.cfg = cfg
        self.i32v = ir.VectorType(I32, LANES)
        self.f32v = ir.VectorType(F32, LANES)
        self.i8v = ir.VectorType(I8, LANES)
        self.mask = ir.VectorType(I1, LANES)

        def declare(name, ret, args):
            return ir.Function(module, ir.FunctionType(ret, args), name=name)

        self.dpbusd = declare("llvm.x86.avx512.vpdpbusd.512", self.i32v, [self.i32v] * 3) \
            if cfg.vnni else None
        self.rint = declare("llvm.rint.v16f32", self.f32v, [self.f32v])
        self.fabs = declare("llvm.fabs.v16f32", self.f32v, [self.f32v])
        self.loads = {ty: declare(f"llvm.masked.load.v16{n}.p0", ty,
                                  [ty.as_pointer(), I32, self.mask, ty])
                      for ty, n in ((self.i32v, "i32"), (self.f32v, "f32"))}
        self.stores = {ty: declare(f"llvm.masked.store.v16{n}.p0", ir.VoidType(),
                                   [ty, ty.as_pointer(), I32, self.mask])
                       for ty, n in ((self.i32v, "i32"), (self.f32v, "f32"), (self.i8v, "i8"))}

    def dot(self, b: ir.IRBuilder, acc, unsigned, signed):
        """acc + per-lane sums of four u8 x s8 products (vpdpbusd semantics, no saturation)."""
        if self.dpbusd is not None:
            return b.call(self.dpbusd, [acc, unsigned, signed])
        bytes_ty = ir.VectorType(I8, 4 * LANES)
        wide = ir.VectorType(I32, 4 * LANES)
        u = b.zext(b.bitcast(unsigned, bytes_ty), wide)
        s = b.sext(b.bitcast(signed, bytes_ty), wide)
        prod = b.mul(u, s)
        for j in range(4):
            idx = ir.Constant(ir.VectorType(I32, LANES), [4 * i + j for i in range(LANES)])
            acc = b.add(acc, b.shuffle_vector(prod, ir.Constant(wide, ir.Undefined), idx))
        return acc

    def load(self, b, ty, ptr, mask):
        return b.call(self.loads[ty], [b.bitcast(ptr, ty.as_pointer()), I32(4), mask,
                                       ir.Constant(ty, None)])

    def store(self, b, value, ptr, mask):
        ty = value.type
        b.call(self.stores[ty], [value, b.bitcast(ptr, ty.as_pointer()), I32(1), mask])


_TILE_ARGS = ("a", "lda", "bp", "groups", "c", "ldc", "ncols", "comp", "scale", "bias",
              "oscale", "ozp", "relu", "pscale", "pbias", "s2", "z2", "relu2", "rcomp")
_TILE_TYPES = (I8_PTR, I64, I8_PTR, I64, I8_PTR, I64, I64, I32_PTR, F32_PTR, F32_PTR, F32, I32,
               I1, F32_PTR, F32_PTR, F32, I32, I1, I32_PTR)
_CHANNEL_ARRAYS = ("comp", "scale", "bias", "pscale", "pbias")


def _build_tile(module, t: IRTypes, rows: int, vecs: int = VECS) -> ir.Function:
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), _TILE_TYPES),
                     name=f"qtile{rows}x{vecs}")
    fn.linkage = "internal"
    args = dict(zip(_TILE_ARGS, fn.args))
    for name in ("a", "bp", "c"):
        args[name].add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    acc = [[entry_alloca(b, t.i32v, f"acc{r}_{v}") for v in range(vecs)] for r in range(rows)]
    for row in acc:
        for slot in row:
            b.store(ir.Constant(t.i32v, None), slot)
    a_rows = [b.gep(args["a"], [b.mul(args["lda"], const64(r))]) for r in range(rows)]
    with for_range(b, args["groups"], name="g") as g:
        base = b.gep(args["bp"], [b.mul(g, const64(4 * NR))])
        panel = [b.load(b.bitcast(b.gep(base, [const64(v * 4 * LANES)]), t.i32v.as_pointer()),
                        align=64) for v in range(vecs)]
        for a_row, row in zip(a_rows, acc):
            word = b.load(b.bitcast(b.gep(a_row, [b.mul(g, const64(4))]), I32.as_pointer()),
                          align=1)
            a = splat(b, word)
            for vec, slot in zip(panel, row):
                pair = (a, vec) if t.cfg.channel == "col" else (vec, a)  # (u8 side, s8 side)
                b.store(t.dot(b, b.load(slot), *pair), slot)
    emit_epilogue(b, t, args, acc)
    b.ret_void()
    return fn


def _masks(b, ncols, vecs: int):
    limit = splat(b, b.trunc(ncols, I32))
    lane = ir.VectorType(I32, LANES)
    return [b.icmp_signed("<", ir.Constant(lane, list(range(v * LANES, (v + 1) * LANES))),
                          limit) for v in range(vecs)]


def _channel_vectors(b, t: IRTypes, args, r: int, v: int, mask, names=("comp", "scale", "bias")):
    """The named per-channel vectors of row r, vector v: per column or one value per row."""
    if t.cfg.channel == "row":
        def one(name):
            return splat(b, b.load(b.gep(args[name], [const64(r)])))
        return [one(name) for name in names]

    def column(name):
        ty = t.i32v if name == "comp" else t.f32v
        return t.load(b, ty, b.gep(args[name], [const64(v * LANES)]), mask)
    return [column(name) for name in names]


def emit_epilogue(b, t: IRTypes, args, acc, vectors=None) -> None:
    """C = the epilogue of ``acc`` (rows of int32-vector slots) at ``args["c"]``.
    ``vectors(b, t, args, r, v, mask, names)`` gives the per-channel vectors (default: loaded
    here; int8/amx.py passes ones it loaded once for all rows of a block)."""
    vectors = vectors or _channel_vectors
    out, size = t.cfg.out, OUTS[t.cfg.out]
    masks = _masks(b, args["ncols"], len(acc[0]))
    zero = ir.Constant(t.f32v, None)
    relu = splat(b, args["relu"])
    for r, row in enumerate(acc):
        c_row = b.gep(args["c"], [b.mul(args["ldc"], const64(r * size))])
        for v, (slot, mask) in enumerate(zip(row, masks)):
            comp, scale, bias = vectors(b, t, args, r, v, mask, ("comp", "scale", "bias"))
            x = b.sub(b.load(slot), comp)
            if t.cfg.rowterm:
                x = b.sub(x, splat(b, b.load(b.gep(args["rcomp"], [const64(r)]))))
            ptr = b.gep(c_row, [const64(v * LANES * size)])
            if out == "s32":
                t.store(b, x, ptr, mask)
                continue
            y = b.fadd(b.fmul(b.sitofp(x, t.f32v), scale), bias)
            y = b.select(b.and_(b.fcmp_ordered("<", y, zero), relu), zero, y)
            if t.cfg.mid:
                y = _chain(b, t, args, y, (r, v, mask), vectors)
            if out != "f32":
                scale2, zero2 = ("s2", "z2") if t.cfg.mid else ("oscale", "ozp")
                y = b.trunc(b.fptosi(_quantized(b, t, args[scale2], args[zero2], y, out),
                                     t.i32v), t.i8v)
            t.store(b, y, ptr, mask)


def _chain(b, t: IRTypes, args, y, at: tuple, vectors):
    """quantize (mid) -> dequantize -> * pscale + pbias -> relu2, in float registers."""
    q = _quantized(b, t, args["oscale"], args["ozp"], y, t.cfg.mid)
    zp = b.sitofp(splat(b, args["ozp"]), t.f32v)
    y = b.fmul(b.fsub(q, zp), splat(b, args["oscale"]))
    pscale, pbias = vectors(b, t, args, *at, ("pscale", "pbias"))
    y = b.fadd(b.fmul(y, pscale), pbias)
    zero = ir.Constant(t.f32v, None)
    return b.select(b.and_(b.fcmp_ordered("<", y, zero), splat(b, args["relu2"])), zero, y)


# |y * (1 / s) - fl(y / s)| < 2^-12 while |y / s| < 1024 (two roundings of 2^-24 each, and
# the division's own); from 1024 on the clamp decides, whatever the rounding
_NEAR_HALF = 2.0 ** -11


def _quotient(b, t: IRTypes, y, scale):
    """Lanes whose rint is rint(y / scale), QuantizeLinear's division: the product
    y * (1 / scale), unless a lane lies within _NEAR_HALF of a half-integer (where the two
    could round apart) or 1 / scale is not finite; then the division itself. The branch is
    almost never taken: a 16-lane division costs as much as the dot products of a small-K
    tile (a 1x1 conv of 16 channels), the multiply a cycle."""
    inv = b.fdiv(ir.Constant(F32, 1.0), scale)
    fast = b.fmul(y, splat(b, inv))
    frac = b.call(t.fabs, [b.fsub(fast, b.call(t.rint, [fast]))])
    near = b.fcmp_ordered("<", b.fsub(splat(b, ir.Constant(F32, 0.5)), frac),
                          splat(b, ir.Constant(F32, _NEAR_HALF)))
    finite = b.fcmp_ordered("==", b.fsub(inv, inv), ir.Constant(F32, 0.0))
    tie = b.icmp_unsigned("!=", b.bitcast(near, ir.IntType(LANES)),
                          ir.Constant(ir.IntType(LANES), 0))
    slot = entry_alloca(b, t.f32v, "quotient")
    b.store(fast, slot)
    with b.if_then(b.or_(tie, b.not_(finite)), likely=False):
        b.store(b.fdiv(y, splat(b, scale)), slot)
    return b.load(slot)


def _quantized(b, t: IRTypes, scale, zero_point, y, kind: str):
    """clamp(rint(y / scale) + zero_point) as float lanes (exact small integers)."""
    lo, hi = _RANGES[kind]
    q = b.fadd(b.call(t.rint, [_quotient(b, t, y, scale)]),
               b.sitofp(splat(b, zero_point), t.f32v))
    low, high = (splat(b, ir.Constant(F32, float(x))) for x in (lo, hi))
    q = b.select(b.fcmp_ordered("<", q, low), low, q)
    q = b.select(b.fcmp_ordered(">", q, high), high, q)
    return b.select(b.fcmp_unordered("uno", q, q), low, q)  # NaN: any value, but a defined one


_DRIVER_ARGS = ("a", "bp", "c", "m", "n", "groups", "lda", "ldc", "comp", "scale", "bias",
                "oscale", "ozp", "relu", "pscale", "pbias", "s2", "z2", "relu2")
DRIVER_TYPES = (I8_PTR, I8_PTR, I8_PTR, I64, I64, I64, I64, I64, I32_PTR, F32_PTR, F32_PTR,
                 F32, I32, I32, F32_PTR, F32_PTR, F32, I32, I32)
DRIVER_CTYPES = (ctypes.c_void_p,) * 3 + (ctypes.c_int64,) * 5 + (ctypes.c_void_p,) * 3 + (
    ctypes.c_float, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
    ctypes.c_float, ctypes.c_int32, ctypes.c_int32)


def build_qgemm_module(cfg: QGemmConfig) -> ir.Module:
    """``void cfg.symbol(a, bp, c, m, n, groups, lda, ldc, comp, scale, bias, oscale, ozp,
    relu)``: lda in bytes, ldc in elements; channel arrays start at this call's first row
    (``row``) or column (``col``). With ``cfg.amx`` the entry is int8/amx.py's tile driver
    and the VNNI driver its internal fallback for small shapes."""
    module = ir.Module(name=cfg.symbol)
    t = IRTypes(module, cfg)
    if not cfg.amx:
        define_vnni_driver(module, t, cfg, cfg.symbol)
        return module
    fallback = define_vnni_driver(module, t, cfg, f"{cfg.symbol}_vnni")
    fallback.linkage = "internal"
    define_amx_driver(module, t, cfg, cfg.symbol, fallback, emit_epilogue, NR, _b_budget())
    return module


def define_vnni_driver(module: ir.Module, t: IRTypes, cfg: QGemmConfig, name: str):
    """The VNNI (or portable) driver ``name`` of :func:`build_qgemm_module` in ``module``."""
    # a last panel of at most 16 columns (resnet's 196- and 784-pixel planes) runs one vector
    tiles = {(rows, vecs): _build_tile(module, t, rows, vecs) for rows in range(1, MR + 1)
             for vecs in (1, VECS)}
    types = DRIVER_TYPES + ((I32_PTR,) if cfg.rowterm else ())
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), types), name=name)
    args = dict(zip(_DRIVER_ARGS + ("rcomp",), fn.args))
    args.setdefault("rcomp", ir.Constant(I32_PTR, None))
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    relu = b.icmp_signed("!=", args["relu"], I32(0))
    relu2 = b.icmp_signed("!=", args["relu2"], I32(0))
    panels = b.sdiv(b.add(args["n"], const64(NR - 1)), const64(NR))
    size = OUTS[cfg.out]
    with for_range(b, panels, name="jr") as jr:
        j0 = b.mul(jr, const64(NR))
        common = dict(args, relu=relu, relu2=relu2, ncols=imin(b, b.sub(args["n"], j0), NR),
                      bp=b.gep(args["bp"], [b.mul(b.mul(jr, args["groups"]), const64(4 * NR))]))
        if cfg.channel == "col":
            common.update({k: b.gep(args[k], [j0]) for k in _CHANNEL_ARRAYS})

        def call(rows, row0, common=common, j0=j0):
            tile = dict(common, a=b.gep(args["a"], [b.mul(row0, args["lda"])]),
                        c=b.gep(args["c"], [b.mul(b.add(b.mul(row0, args["ldc"]), j0),
                                                  const64(size))]))
            if cfg.channel == "row":
                tile.update({k: b.gep(args[k], [row0]) for k in _CHANNEL_ARRAYS})
            elif cfg.rowterm:
                tile["rcomp"] = b.gep(args["rcomp"], [row0])
            narrow = b.icmp_signed("<=", common["ncols"], const64(LANES))
            with b.if_else(narrow) as (one, full):
                for vecs, arm in ((1, one), (VECS, full)):
                    with arm:
                        b.call(tiles[rows, vecs], [tile[name] for name in _TILE_ARGS])

        full = b.sdiv(args["m"], const64(MR))
        with for_range(b, full, name="ir") as i:
            call(MR, b.mul(i, const64(MR)))
        rest = b.srem(args["m"], const64(MR))
        switch_cases(b, rest, {rows: (lambda rows=rows, call=call, full=full:
                                 call(rows, b.mul(full, const64(MR)))) for rows in range(1, MR)})
    b.ret_void()
    return fn



def _b_budget() -> int:
    """Bytes of packed B the AMX driver keeps in L2 while all rows pass (half the host's
    L2: A's rows and C's blocks share the rest)."""
    return cache_bytes(2) // 2


@cache
def qgemm_driver(cfg: QGemmConfig):
    """The compiled driver of ``cfg`` (from the kernel cache after the first build)."""
    library = get_jit().compile_generated(
        lambda: build_qgemm_module(cfg), [cfg.symbol],
        (__name__, "msc.backend.llvm.loops", "msc.backend.kernels.int8.amx"),
        (repr(cfg), _b_budget() if cfg.amx else 0))
    return library.cfunc(cfg.symbol, None, *DRIVER_CTYPES,
                         *((ctypes.c_void_p,) if cfg.rowterm else ()))


# ---------------------------------------------------------------------------------------------
# Threads: blocks of C, one driver call each; every element is computed as on one thread.

PARALLEL_MACS = 1e6  # multiply-adds, ~5-10 us at VNNI speed: a native task list's handoff (~5 us)
# pays off from here (classifier heads: 2048 x 1000 at batch 1)


def run_qgemm(driver, cfg: QGemmConfig, a: int, bp: int, c: int, m: int, n: int, groups: int,
              lda: int, ldc: int, epi: tuple) -> None:
    """``driver`` on checked pointers (bytes), split over panels or row tiles: the blocks
    run as one native task list (task_wrap.wrapped_tasks: the driver takes floats and 19
    arguments), kept per shape. ``epi = (comp, scale, bias, out_scale, out_zero, relu,
    pscale, pbias, s2, z2, relu2)`` (the five arrays as pointers)."""
    threads = task_threads() if m * n * groups * 4 >= PARALLEL_MACS else 1
    tasks = _split(driver, cfg, m, n, groups, lda, ldc, epi, threads) if threads > 1 else None
    if tasks is None:
        driver(a, bp, c, m, n, groups, lda, ldc, *epi)
    else:
        tasks.launch(1, (a, bp, c), threads)


_SPLITS: dict = {}  # (driver, shape, epilogue, threads) -> task list (byte offsets of a, bp, c)


def qgemm_tasks(driver, cfg, m, n, groups, lda, ldc, epi, threads):
    """The blocks of ``run_qgemm`` on ``threads`` as its task list (bases a, bp, c: what a
    chain's parallel step launches, runtime/chain_split.py), or None: one block."""
    return _split(driver, cfg, m, n, groups, lda, ldc, epi, threads)


def _split(driver, cfg, m, n, groups, lda, ldc, epi, threads):
    key = (id(driver), cfg, m, n, groups, lda, ldc, epi, threads)
    found = _SPLITS.get(key, False)
    if found is False:
        parts = gemm_blocks(m, n, threads, AMX_BLOCK_ROWS if cfg.amx else MR)
        found = None if len(parts) < 2 else wrapped_tasks(driver, _rows(cfg, parts, groups,
                                                                         lda, ldc, epi))
        if len(_SPLITS) > 4096:  # shapes of many models in one process: start over
            _SPLITS.clear()
        _SPLITS[key] = found
    return found


def _rows(cfg, parts, groups, lda, ldc, epi) -> list[tuple]:
    size = OUTS[cfg.out]
    comp, scale, bias, oscale, ozp, relu, pscale, pbias, *rest = epi
    rows = []
    for r0, r1, j0, j1 in parts:
        ch = 4 * (r0 if cfg.channel == "row" else j0)
        rows.append((r0 * lda, j0 * groups * 4, (r0 * ldc + j0) * size, r1 - r0, j1 - j0,
                     groups, lda, ldc, comp + ch, scale + ch, bias + ch, oscale, ozp, relu,
                     pscale + ch, pbias + ch, *rest))
    return rows


def gemm_blocks(m: int, n: int, threads: int, tile_rows: int = MR
                ) -> list[tuple[int, int, int, int]]:
    """(r0, r1, j0, j1) blocks of an M x N GEMM on ``threads``: column panels, else row
    tiles of ``tile_rows`` (the VNNI driver's 6, the AMX driver's 32: a block of rows cut
    short wastes tile rows); one block when neither splits."""
    panels, tiles = -(-n // NR), -(-m // tile_rows)
    if threads > 1 and panels >= tiles and panels > 1:
        parts = min(2 * threads, panels)
        return [(0, m, panels * i // parts * NR, min(n, panels * (i + 1) // parts * NR))
                for i in range(parts)]
    if threads > 1 and tiles > 1:
        parts = min(2 * threads, tiles)
        return [(tiles * i // parts * tile_rows, min(m, tiles * (i + 1) // parts * tile_rows),
                 0, n) for i in range(parts)]
    return [(0, m, 0, n)]


# ---------------------------------------------------------------------------------------------
# Checked entry (tests, one-off calls): the folded QDQ kernels check their own arrays.


def qmatmul(a: np.ndarray, b: np.ndarray, zero: int = 0, *, channel: str = "col",
            out: str = "s32", scale=None, bias=None, out_scale: float = 1.0,
            out_zero: int = 0, relu: bool = False, vnni: bool | None = None,
            amx: bool | None = None) -> np.ndarray:
    """``(a @ b)`` with the activation's zero point taken out, then the epilogue of ``out``.

    ``channel="col"``: a uint8 [M, K] (zero point ``zero``), b int8 [K, N]; ``"row"``: a int8
    [M, K], b uint8 [K, N] (zero point ``zero``). ``vnni=False`` forces the portable path,
    ``amx=False`` the VNNI one on an AMX host.
    """
    from ....errors import ShapeError

    act, wgt = (a, b) if channel == "col" else (b, a)
    for arr, name, dtype in ((act, "activation", np.uint8), (wgt, "weight", np.int8)):
        if not isinstance(arr, np.ndarray) or arr.dtype != dtype or arr.ndim != 2:
            raise ShapeError(f"expected a 2-D {np.dtype(dtype)} array, got "
                             f"{getattr(arr, 'dtype', type(arr))} {getattr(arr, 'shape', '')}",
                             op="int8_gemm", param=name)
    if a.shape[1] != b.shape[0]:
        raise ShapeError(f"inner sizes differ: {a.shape} @ {b.shape}", op="int8_gemm",
                         param="b")
    (m, k), n = a.shape, b.shape[1]
    k4 = -(-k // 4) * 4
    cfg = QGemmConfig(channel, out, host_vnni() if vnni is None else bool(vnni) and host_vnni(),
                      amx=amx)
    a_rows = np.zeros((m, k4), a.dtype)
    a_rows[:, :k] = a
    sums = wgt.astype(np.int64).sum(axis=0 if channel == "col" else 1)
    chans = n if channel == "col" else m
    comp = np.ascontiguousarray((int(zero) * sums).astype(np.int32))
    scale = np.broadcast_to(np.float32(1) if scale is None else scale, (chans,))
    bias = np.broadcast_to(np.float32(0) if bias is None else bias, (chans,))
    scale, bias = (np.ascontiguousarray(v, np.float32) for v in (scale, bias))
    dtype = {"s32": np.int32, "f32": np.float32, "u8": np.uint8, "s8": np.int8}[out]
    c = np.empty((m, n), dtype)
    if m and n:
        bp = pack_vnni(b)
        run_qgemm(qgemm_driver(cfg), cfg, a_rows.ctypes.data, bp.ctypes.data, c.ctypes.data,
                  m, n, k4 // 4, k4, n, (comp.ctypes.data, scale.ctypes.data, bias.ctypes.data,
                                          float(out_scale), int(out_zero), int(relu),
                                          scale.ctypes.data, bias.ctypes.data, 1.0, 0, 0))
    return c
