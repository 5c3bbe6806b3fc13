"""fp32 GEMM ``C[M,N] = A[M,K] @ B[K,N] (+ bias[N]) (then relu)`` as one native kernel.

B is a weight: it is packed once (:func:`pack_b`) into column panels NR wide, zero-padded and
64-byte aligned, so the inner loop reads it with aligned vector loads. A is read in place.
The kernel follows the BLIS loop order pc (K blocks of KC) -> ic (M blocks of MC) -> jr (B
panels) -> ir (MR-row register tiles); an MR x NR tile keeps MR * NR / lanes accumulators in
vector registers (6 x 64 = 24 zmm with AVX-512). msc/backend/README.md has the measurements
behind the constants here.

Edges need no scalar code: the M remainder runs a tile specialised for 1..MR-1 rows, which is
also the small-M path (M < MR streams B exactly once, GEMV-like and bandwidth-bound); the N
remainder uses masked loads and stores of C and bias. Bias and relu are fused into the tile:
bias seeds the accumulators of the first K block, relu is applied when the last one is stored.

Threads (runtime/threads.py): :func:`run_gemm` splits a big enough GEMM into row blocks or
panel ranges, one driver call each; every output element is computed exactly as on one thread.

    g = Gemm(w, bias=b, relu=True)     # packs w once, compiles (or loads from cache) once
    y = g(x)                           # x: float32 [M, K], C-contiguous -> float32 [M, N]
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import cache

import numpy as np
from llvmlite import ir

from ...errors import BuildError, ShapeError
from ..llvm.jit import JIT, get_jit, vector_lanes
from ..llvm.loops import (
    F32,
    F32_PTR,
    I1,
    I32,
    I64,
    ceil_div,
    const64,
    entry_alloca,
    for_range,
    imin,
    switch_cases,
)
from ..runtime.threads import NativeTasks, native_address, task_threads

__all__ = ["Gemm", "GemmConfig", "PackedB", "build_gemm_module", "gemm", "gemm_splits", "pack_b",
           "run_gemm"]

MR = 6  # rows per register tile: 6 broadcasts feed NR/lanes FMAs each per k step
KC = 384  # K block: a KC x NR panel of B (96 KiB at NR=64) is re-read from L2 by every tile
MC = 192  # M block, a multiple of MR: the MC x KC block of A stays in L2 across all B panels
# lanes -> vectors per tile row; 4 x 6 = 24 accumulators fit 32 zmm, 2 x 6 = 12 fit 16 ymm/xmm.
_VECTORS_PER_ROW = {16: 4, 8: 2, 4: 2}
_ALIGN = 64  # bytes; packed panels are aligned for the widest vector loads


@dataclass(frozen=True)
class GemmConfig:
    """Compile-time shape of the kernel; M, N and K stay runtime arguments."""

    lanes: int
    mr: int = MR
    kc: int = KC
    mc: int = MC

    def __post_init__(self):
        if self.lanes not in _VECTORS_PER_ROW or self.mc % self.mr:
            raise BuildError(f"unsupported GEMM configuration {self}", op="gemm",
                             hint=f"lanes in {sorted(_VECTORS_PER_ROW)}, mc a multiple of mr")

    @property
    def vectors(self) -> int:
        return _VECTORS_PER_ROW[self.lanes]

    @property
    def nr(self) -> int:
        return self.vectors * self.lanes

    @property
    def symbol(self) -> str:
        return f"msc_gemm_f32_{self.mr}x{self.nr}_kc{self.kc}_mc{self.mc}"


# ---------------------------------------------------------------------------------------------
# Packing (numpy, done once per weight)


@dataclass(frozen=True, eq=False)
class PackedB:
    """B[K, N] as ceil(N/NR) panels of [K, NR] floats, zero-padded, 64-byte aligned."""

    data: np.ndarray
    k: int
    n: int
    lanes: int

    def __post_init__(self):
        nr = GemmConfig(self.lanes).nr
        want = -(-self.n // nr) * self.k * nr
        # numpy does not move the pointer of an empty slice, and nothing reads it anyway.
        aligned = self.data.ctypes.data % _ALIGN == 0 or not want
        ok = (self.data.dtype == np.float32 and self.data.ndim == 1 and self.data.size == want
              and self.data.flags.c_contiguous and aligned)
        if not ok:
            raise ShapeError(f"packed data must be {want} aligned float32 values", op="gemm",
                             param="packed", hint="build it with msc.backend.kernels.pack_b")

    @property
    def nr(self) -> int:
        return GemmConfig(self.lanes).nr


def pack_b(b: np.ndarray, lanes: int | None = None) -> PackedB:
    """Pack a float32 [K, N] matrix for the kernel with ``lanes``-wide vectors (host default)."""
    _check_matrix(b, "b")
    lanes = lanes or vector_lanes()
    k, n = b.shape
    nr = GemmConfig(lanes).nr
    full, rest = divmod(n, nr)
    data = aligned_empty((full + bool(rest)) * k * nr)
    panels = data.reshape(full + bool(rest), k, nr)
    panels[:full] = b[:, : full * nr].reshape(k, full, nr).transpose(1, 0, 2)
    if rest:
        panels[full, :, :rest] = b[:, full * nr:]
        panels[full, :, rest:] = 0.0
    return PackedB(data, k, n, lanes)


def aligned_empty(size: int) -> np.ndarray:
    raw = np.empty(size + _ALIGN // 4, dtype=np.float32)
    start = (-raw.ctypes.data % _ALIGN) // 4
    return raw[start: start + size]


# ---------------------------------------------------------------------------------------------
# IR construction


class _Vectors:
    """Vector type, constants and the three intrinsics the kernel uses, for one lane count."""

    def __init__(self, module: ir.Module, lanes: int):
        self.lanes = lanes
        self.ty = ir.VectorType(F32, lanes)
        self.mask_ty = ir.VectorType(I1, lanes)
        self.zero = ir.Constant(self.ty, None)
        suffix = f"v{lanes}f32"
        ptr = self.ty.as_pointer()
        # Declared by their exact opaque-pointer names: llvmlite.ir still prints typed pointers
        # and would otherwise mangle the names with them.
        self.fmuladd = _declare(module, f"llvm.fmuladd.{suffix}", self.ty, [self.ty] * 3)
        self.masked_load = _declare(module, f"llvm.masked.load.{suffix}.p0", self.ty,
                                    [ptr, I32, self.mask_ty, self.ty])
        self.masked_store = _declare(module, f"llvm.masked.store.{suffix}.p0", ir.VoidType(),
                                     [self.ty, ptr, I32, self.mask_ty])

    def masks(self, builder: ir.IRBuilder, ncols: ir.Value, count: int) -> list[ir.Value]:
        """Lane masks ``v * lanes + lane < ncols`` for the ``count`` vectors of a tile row."""
        limit = _splat(builder, builder.trunc(ncols, I32), self.lanes)
        lane_ty = ir.VectorType(I32, self.lanes)
        firsts = (v * self.lanes for v in range(count))
        return [builder.icmp_signed("<", ir.Constant(lane_ty, list(range(f, f + self.lanes))),
                                    limit) for f in firsts]

    def load(self, builder, ptr, mask):
        return builder.call(self.masked_load, [self.cast(builder, ptr), I32(4), mask, self.zero])

    def store(self, builder, value, ptr, mask):
        builder.call(self.masked_store, [value, self.cast(builder, ptr), I32(4), mask])

    def cast(self, builder: ir.IRBuilder, ptr: ir.Value) -> ir.Value:
        return builder.bitcast(ptr, self.ty.as_pointer())


def _declare(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    return ir.Function(module, ir.FunctionType(ret, args), name=name)


def _splat(builder: ir.IRBuilder, scalar: ir.Value, lanes: int) -> ir.Value:
    """Broadcast a scalar to all lanes (LLVM emits vbroadcastss / vpbroadcastd for this)."""
    ty = ir.VectorType(scalar.type, lanes)
    first = builder.insert_element(ir.Constant(ty, ir.Undefined), scalar, I32(0))
    return builder.shuffle_vector(first, ir.Constant(ty, ir.Undefined),
                                  ir.Constant(ir.VectorType(I32, lanes), None))


def _gep(builder: ir.IRBuilder, ptr: ir.Value, offset: ir.Value) -> ir.Value:
    return builder.gep(ptr, [offset], inbounds=True)


_TILE_ARGS = ("a", "lda", "bp", "kc", "c", "ldc", "bias", "ncols", "first", "relu")
_TILE_TYPES = (F32_PTR, I64, F32_PTR, I64, F32_PTR, I64, F32_PTR, I64, I1, I1)


def _build_tile(module: ir.Module, cfg: GemmConfig, vec: _Vectors, rows: int) -> ir.Function:
    """``rows`` x NR register tile over one K block: C tile (+)= A rows @ B panel block."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), _TILE_TYPES), name=f"tile{rows}")
    fn.linkage = "internal"
    args = dict(zip(_TILE_ARGS, fn.args))
    for name in ("a", "bp", "c", "bias"):
        args[name].add_attribute("noalias")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    masks = vec.masks(builder, args["ncols"], cfg.vectors)
    acc = [[entry_alloca(builder, vec.ty, f"acc{r}_{v}") for v in range(cfg.vectors)]
           for r in range(rows)]
    _seed_accumulators(builder, vec, args, masks, acc)
    _accumulate(builder, cfg, vec, args, acc)
    _store_tile(builder, vec, args, masks, acc)
    builder.ret_void()
    return fn


def _row(builder: ir.IRBuilder, base: ir.Value, stride: ir.Value, r: int) -> ir.Value:
    return _gep(builder, base, builder.mul(stride, const64(r)))


def _seed_accumulators(builder, vec, args, masks, acc) -> None:
    """First K block: start from the bias row. Later blocks: continue from the stored C."""
    with builder.if_else(args["first"]) as (first, later):
        with first:
            for v, mask in enumerate(masks):
                bias = vec.load(builder, _gep(builder, args["bias"], const64(v * vec.lanes)), mask)
                for row in acc:
                    builder.store(bias, row[v])
        with later:
            for r, row in enumerate(acc):
                c_row = _row(builder, args["c"], args["ldc"], r)
                for v, mask in enumerate(masks):
                    part = vec.load(builder, _gep(builder, c_row, const64(v * vec.lanes)), mask)
                    builder.store(part, row[v])


def _accumulate(builder, cfg, vec, args, acc) -> None:
    """The hot loop: per k, NR/lanes aligned B loads, one broadcast per row, rows x vecs FMAs."""
    a_rows = [_row(builder, args["a"], args["lda"], r) for r in range(len(acc))]
    with for_range(builder, args["kc"], name="k") as k:
        b_k = _gep(builder, args["bp"], builder.mul(k, const64(cfg.nr)))
        panel = [builder.load(vec.cast(builder, _gep(builder, b_k, const64(v * vec.lanes))),
                              align=vec.lanes * 4) for v in range(cfg.vectors)]
        for a_row, row in zip(a_rows, acc):
            a = _splat(builder, builder.load(_gep(builder, a_row, k), align=4), vec.lanes)
            for b, slot in zip(panel, row):
                builder.store(builder.call(vec.fmuladd, [a, b, builder.load(slot)]), slot)


def _store_tile(builder, vec, args, masks, acc) -> None:
    # relu(x) = x < 0 ? 0 : x keeps NaN as NaN, like torch and numpy.
    for r, row in enumerate(acc):
        c_row = _row(builder, args["c"], args["ldc"], r)
        for v, (mask, slot) in enumerate(zip(masks, row)):
            value = builder.load(slot)
            negative = builder.fcmp_ordered("<", value, vec.zero)
            clamp = builder.and_(negative, _splat(builder, args["relu"], vec.lanes))
            value = builder.select(clamp, vec.zero, value)
            vec.store(builder, value, _gep(builder, c_row, const64(v * vec.lanes)), mask)


_DRIVER_ARGS = ("a", "bp", "bias", "c", "m", "n", "k", "lda", "ldc", "relu")
_DRIVER_TYPES = (F32_PTR, F32_PTR, F32_PTR, F32_PTR, I64, I64, I64, I64, I64, I32)
DRIVER_CTYPES = (ctypes.c_void_p,) * 4 + (ctypes.c_int64,) * 5 + (ctypes.c_int32,)


def build_gemm_module(cfg: GemmConfig) -> ir.Module:
    """IR module exporting ``void cfg.symbol(A, Bpacked, bias, C, M, N, K, lda, ldc, relu)``."""
    module = ir.Module(name=cfg.symbol)
    vec = _Vectors(module, cfg.lanes)
    tiles = {rows: _build_tile(module, cfg, vec, rows) for rows in range(1, cfg.mr + 1)}
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), _DRIVER_TYPES), name=cfg.symbol)
    args = dict(zip(_DRIVER_ARGS, fn.args))
    for name in ("a", "bp", "bias", "c"):
        args[name].add_attribute("noalias")
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    _drive(builder, cfg, args, tiles)
    builder.ret_void()
    return module


def _drive(builder, cfg, args, tiles) -> None:
    """Loops pc -> ic -> jr -> ir around the tiles (see the module docstring)."""
    relu_on = builder.icmp_signed("!=", args["relu"], I32(0))
    panels = ceil_div(builder, args["n"], cfg.nr)
    # With fewer than MR rows nothing reuses a B block, so don't block K: B is then read once,
    # front to back in memory order, which is what a bandwidth-bound GEMV wants.
    small_m = builder.icmp_signed("<", args["m"], const64(cfg.mr))
    kc_step = builder.select(small_m, args["k"], const64(cfg.kc))
    with for_range(builder, args["k"], step=kc_step, name="pc") as pc:
        kc = imin(builder, builder.sub(args["k"], pc), kc_step)
        first = builder.icmp_signed("==", pc, const64(0))
        last = builder.icmp_signed(">=", builder.add(pc, kc), args["k"])
        block = {"kc": kc, "first": first, "relu": builder.and_(relu_on, last),
                 "a": _gep(builder, args["a"], pc)}
        with for_range(builder, args["m"], step=cfg.mc, name="ic") as ic:
            mc = imin(builder, builder.sub(args["m"], ic), cfg.mc)
            with for_range(builder, panels, name="jr") as jr:
                _panel(builder, cfg, args, tiles, block, ic, mc, jr, pc)


def _panel(builder, cfg, args, tiles, block, ic, mc, jr, pc) -> None:
    """One B panel against the MC rows of an M block: full tiles, then the row remainder."""
    j0 = builder.mul(jr, const64(cfg.nr))
    offset = builder.mul(builder.add(builder.mul(jr, args["k"]), pc), const64(cfg.nr))
    common = dict(block, bp=_gep(builder, args["bp"], offset), lda=args["lda"], ldc=args["ldc"],
                  bias=_gep(builder, args["bias"], j0),
                  ncols=imin(builder, builder.sub(args["n"], j0), cfg.nr))
    full = builder.sdiv(mc, const64(cfg.mr))

    def call(rows: int, row0: ir.Value) -> None:
        row_args = dict(common, a=_gep(builder, common["a"], builder.mul(row0, args["lda"])),
                        c=_gep(builder, _gep(builder, args["c"], builder.mul(row0, args["ldc"])),
                               j0))
        builder.call(tiles[rows], [row_args[name] for name in _TILE_ARGS])

    with for_range(builder, full, name="ir") as t:
        call(cfg.mr, builder.add(ic, builder.mul(t, const64(cfg.mr))))
    rest_row = builder.add(ic, builder.mul(full, const64(cfg.mr)))
    switch_cases(builder, builder.srem(mc, const64(cfg.mr)),
            {rows: (lambda rows=rows: call(rows, rest_row)) for rows in range(1, cfg.mr)})



# ---------------------------------------------------------------------------------------------
# Threads: row blocks or panel ranges of one GEMM, each a driver call of its own. Every output
# element is still one tile's k loop over the same K blocks, so results do not depend on the
# split (K blocking only stores and reloads float32 accumulators, which is exact).

# A native task list on 2 threads costs about 7 us against 1.4 us on one (4 tiny tasks, best
# case; a worker that went to sleep costs ~40 us more), so a split pays off from tens of us of
# work: 5 MFLOP is ~50 us at 100 GFLOP/s (densenet's and inception's 7x7 convs are 4-13 MFLOP).
# Below this everything stays on one thread.
PARALLEL_FLOPS = 5e6
PARALLEL_B = 1 << 17  # floats of B (512 KiB, ~25 us to stream) from which a small-M GEMM splits
SPLITS_PER_THREAD = 2  # more parts than threads, so a thread slowed by other load takes fewer


def blocks(m: int, n: int, nr: int, threads: int) -> list[tuple[int, int, int, int]]:
    """Blocks ``(r0, r1, j0, j1)`` of C, one driver call each: panel ranges when N is the
    larger side (each thread streams its own part of B), else row ranges of whole tiles."""
    panels, tiles = -(-n // nr), -(-m // MR)
    if threads > 1 and n > m and panels > 1:
        parts = min(threads * SPLITS_PER_THREAD, panels)
        columns = [(panels * i // parts * nr, min(n, panels * (i + 1) // parts * nr))
                   for i in range(parts)]
        # Fewer panels than parts, not a multiple of the threads (squeezenet's 13x13 convs:
        # 192 outputs, 3 panels on 2 threads, one thread took two): each panel's rows in
        # halves too, so the threads get even shares.
        rows = 2 if panels < threads * SPLITS_PER_THREAD and panels % threads and tiles > 1 \
            else 1
        return [(tiles * r // rows * MR, min(m, tiles * (r + 1) // rows * MR), j0, j1)
                for j0, j1 in columns for r in range(rows)]
    if threads > 1 and tiles > 1:
        parts = min(threads * SPLITS_PER_THREAD, tiles)
        return [(tiles * i // parts * MR, min(m, tiles * (i + 1) // parts * MR), 0, n)
                for i in range(parts)]
    return [(0, m, 0, n)]


def gemm_splits(m: int, n: int, k: int, nr: int) -> bool:
    """Whether an [m, k] @ [k, n] GEMM is big enough to split across threads."""
    # Cost counts whole panels: a 4-column panel costs the tile as much as a full one. A
    # batch-1 FC is bound by reading B: it splits by its bytes (resnet50's 8 MB in ~0.4 ms).
    return 2.0 * m * -(-n // nr) * nr * k >= PARALLEL_FLOPS or (m < MR and k * n >= PARALLEL_B)


def run_gemm(driver, nr: int, a: int, bp: int, bias: int, c: int, m: int, n: int, k: int,
             lda: int, ldc: int, relu: int) -> None:
    """``driver(a, bp, bias, c, m, n, k, lda, ldc, relu)`` on checked pointers (bytes), split
    across :func:`~msc.backend.threads.task_threads` when there is enough work: the blocks
    run as one native task list (threads.NativeTasks), no Python per block."""
    threads = task_threads() if gemm_splits(m, n, k, nr) else 1
    if threads > 1:
        tasks = _split(driver, nr, m, n, k, lda, ldc, relu, threads)
        if tasks is not None:
            tasks.launch(1, (a, bp, bias, c), threads)
            return
    driver(a, bp, bias, c, m, n, k, lda, ldc, relu)


_SPLITS: dict = {}  # (driver, shape, threads) -> task list (byte offsets of a, bp, bias, c)


def gemm_tasks(driver, nr, m, n, k, lda, ldc, relu, threads):
    """The blocks of :func:`run_gemm` on ``threads`` as its task list (bases a, bp, bias, c:
    what a chain's parallel step launches, runtime/chain_split.py), or None: one block."""
    return _split(driver, nr, m, n, k, lda, ldc, relu, threads)


def _split(driver, nr, m, n, k, lda, ldc, relu, threads):
    key = (id(driver), nr, m, n, k, lda, ldc, relu, threads)
    found = _SPLITS.get(key)
    if found is None:
        parts = blocks(m, n, nr, threads)
        if len(parts) < 2:
            found = None
        else:
            tasks = NativeTasks(len(parts))
            tasks.records[:, 0] = native_address(driver)
            tasks.records[:, 1:11] = [(r0 * lda * 4, j0 * k * 4, j0 * 4, (r0 * ldc + j0) * 4,
                                       r1 - r0, j1 - j0, k, lda, ldc, relu)
                                      for r0, r1, j0, j1 in parts]
            found = tasks
        if len(_SPLITS) > 4096:  # shapes of many models in one process: start over
            _SPLITS.clear()
        _SPLITS[key] = found
    return found


# ---------------------------------------------------------------------------------------------
# Python entry


@cache
def _kernel(cfg: GemmConfig, jit: JIT | None):
    library = (jit or get_jit()).compile_generated(
        lambda: build_gemm_module(cfg), [cfg.symbol], (__name__, "msc.backend.llvm.loops"),
        (repr(cfg),))
    return library.cfunc(cfg.symbol, None, *DRIVER_CTYPES)


class Gemm:
    """``C = A @ B (+ bias) (relu)`` with B (a weight) packed once.

    ``b`` is a float32 [K, N] array or a :class:`PackedB`; ``bias`` a float32 [N] array.
    Calls check every argument before native code runs and raise :class:`ShapeError`.

        >>> g = Gemm(np.ones((3, 2), np.float32), relu=True)
        >>> g(np.ones((1, 3), np.float32))
        array([[3., 3.]], dtype=float32)
    """

    def __init__(self, b: np.ndarray | PackedB, bias: np.ndarray | None = None,
                 relu: bool = False, *, lanes: int | None = None, jit: JIT | None = None):
        self.packed = b if isinstance(b, PackedB) else pack_b(b, lanes)
        self.bias = _check_bias(bias, self.packed.n)
        self.relu = bool(relu)
        self._run = _kernel(GemmConfig(self.packed.lanes), jit)
        self._nr = self.packed.nr
        # Fetched once: each .ctypes.data costs about 1 us, a noticeable part of a small call.
        self._weights = (self.packed.data.ctypes.data, self.bias.ctypes.data)

    @property
    def k(self) -> int:
        return self.packed.k

    @property
    def n(self) -> int:
        return self.packed.n

    def __call__(self, a: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        _check_matrix(a, "a", cols=self.k)
        m = a.shape[0]
        out = _check_out(out, (m, self.n), a)
        if m and self.n and not self.k:
            out[...] = np.maximum(self.bias, 0) if self.relu else self.bias
        elif m and self.n:
            run_gemm(self._run, self._nr, a.ctypes.data, *self._weights, out.ctypes.data, m,
                     self.n, self.k, self.k, self.n, int(self.relu))
        return out


def gemm(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None, relu: bool = False,
         out: np.ndarray | None = None, *, jit: JIT | None = None) -> np.ndarray:
    """One-off ``a @ b (+ bias) (relu)``; packs ``b`` on every call, so prefer :class:`Gemm`."""
    _check_matrix(a, "a")
    _check_matrix(b, "b", rows=a.shape[1])
    return Gemm(b, bias, relu, jit=jit)(a, out)


# ---------------------------------------------------------------------------------------------
# Argument checks: native code must never see an unchecked shape, dtype or layout.


def _check_array(x, name: str, ndim: int) -> None:
    if not isinstance(x, np.ndarray):
        raise ShapeError(f"expected a numpy array, got {type(x).__name__}", op="gemm",
                         param=name, hint="pass np.asarray(x, dtype=np.float32)")
    if x.dtype != np.float32:
        raise ShapeError(f"expected float32, got {x.dtype}", op="gemm", param=name,
                         hint=f"convert with {name}.astype(np.float32)")
    if x.ndim != ndim:
        raise ShapeError(f"expected rank {ndim}, got shape {x.shape}", op="gemm", param=name)
    if not (x.flags.c_contiguous and x.flags.aligned):
        raise ShapeError("array is not C-contiguous and aligned", op="gemm", param=name,
                         hint=f"pass np.ascontiguousarray({name})")


def _check_matrix(x, name: str, rows: int | None = None, cols: int | None = None) -> None:
    _check_array(x, name, 2)
    for axis, want in enumerate((rows, cols)):
        if want is not None and x.shape[axis] != want:
            raise ShapeError(f"axis {axis} has size {x.shape[axis]}, expected {want}",
                             op="gemm", param=name, hint=f"shape {x.shape} does not fit")


def _check_bias(bias, n: int) -> np.ndarray:
    if bias is None:
        return np.zeros(n, np.float32)
    _check_array(bias, "bias", 1)
    if bias.shape[0] != n:
        raise ShapeError(f"has {bias.shape[0]} values, expected N={n}", op="gemm", param="bias")
    return bias.copy()  # like the packed weight, later edits by the caller must not leak in


def _check_out(out, shape: tuple[int, int], a: np.ndarray) -> np.ndarray:
    if out is None:
        return np.empty(shape, np.float32)
    _check_matrix(out, "out", *shape)
    if not out.flags.writeable or np.may_share_memory(out, a):
        raise ShapeError("must be writeable and must not overlap a", op="gemm", param="out")
    return out
