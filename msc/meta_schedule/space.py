"""The design space of a prim func, generated from its block structure.

One sketch per block kind, written as schedule calls whose choices are sampling
instructions, so a candidate *is* its trace and a new candidate is new decisions:

- a reduction block (spatial and reduce axes, ``T.init``): multi-level tiling "SSRSRS" --
  each spatial loop split in 4 (S0 S1 S2 S3), each reduce loop in 2 (R0 R1), ordered
  S0 S1 R0 S2 R1 S3; the innermost spatial tile vectorized; a sampled choice unrolls the S2
  tiles (register rows) or not; then the init split off before R0
  (``decompose_reduction``, its loops keep their kinds);
- a spatial block (elementwise, copies): its loops fused and split in 2, the inner part
  vectorized.

Parallel loops follow the thread count (``threads``). With more than one thread the
outermost spatial loops are always fused into one parallel loop, as MetaSchedule's
ParallelizeVectorizeUnroll rule and its postprocessor do: loops are taken from the outside
in (S0, then S1) until their product exceeds ``threads * _JOBS_PER_THREAD`` (chunks enough
to balance the threads), so a tile choice can never leave the kernel serial. With one thread
a sampled choice still marks the fused S0 loops (or a spatial block's outer loop) parallel,
which keeps the one-thread space as it was and its records valid.

Blocks whose loops have symbolic extents keep their loops (``sample_perfect_tile`` needs a
constant), as do blocks nested in other blocks.
"""

from __future__ import annotations

from ..s_tir.schedule import Schedule
from ..s_tir.schedule.tree import blocks_in
from ..tir import expr as E

__all__ = ["apply_sketch", "tunable_blocks"]

# The innermost spatial tile is the vector: LLVM gives 16 float lanes on AVX-512, and tiles
# up to 64 (4 vectors) keep several independent accumulators in flight.
_MAX_VECTOR = 64
_MAX_INNER = 16
_UNROLL_MAX = 16  # S2 tiles up to this size may be unrolled (register rows)
# An inner reduce tile is a contiguous loop LLVM vectorizes (reassociating): it may be long.
_MAX_REDUCE = 1024
# TVM's max_jobs_per_core: the parallel loop gets at least this many iterations per thread
# when the tiles allow, so uneven chunks cost little.
_JOBS_PER_THREAD = 16


def tunable_blocks(func) -> list:
    """(name, kind) of every root-level block with constant loop extents, kind "reduce" or
    "spatial", consumers first (as MetaSchedule visits them)."""
    root = func.body
    found = []
    for block in blocks_in(root.body, nested=False) if hasattr(root, "iter_vars") else []:
        if not block.iter_vars:
            continue
        kind = "reduce" if any(iv.kind == "reduce" for iv in block.iter_vars) else "spatial"
        if kind == "spatial" or block.init is not None:
            found.append((block.name, kind))
    return list(reversed(found))


ANALYTIC = ("vector", "reduce")


def apply_sketch(sch: Schedule, func_name: str | None = None, analytic: str | None = None,
                 threads: int = 1) -> None:
    """Apply the sketch of every tunable block of ``sch``'s function, sampling each choice.
    ``analytic`` takes a starting point analysis suggests instead of sampling: "vector" (a
    register tile of up to 4 unrolled rows by a 64-wide vector of the last spatial loop,
    whole reduce loops: a matmul's i-k-j micro-kernel) or "reduce" (4 unrolled rows of the
    last spatial loop, each a whole contiguous reduction: a matrix-vector product)."""
    func = sch.mod[func_name or sch.func_working_on or "main"]
    for name, kind in tunable_blocks(func):
        block = sch.get_block(name, func_name)
        if not _constant_loops(sch, block):
            continue
        if kind == "reduce":
            _tile_reduction(sch, block, analytic, threads)
        else:
            _tile_spatial(sch, block, analytic, threads)


def _constant_loops(sch: Schedule, block) -> bool:
    loops = sch.get_loops(block)
    return bool(loops) and all(E.as_int(sch.get(lp).extent) is not None for lp in loops)


def _reduce_loop_names(block) -> set:
    return {v.name for iv in block.iter_vars if iv.kind != "spatial"
            for v in E.free_vars(iv.binding)}


def _largest_divisor(n: int, limit: int, multiple: int = 1) -> int:
    fits = [d for d in range(1, min(n, limit) + 1) if n % d == 0]
    aligned = [d for d in fits if d % multiple == 0]
    return max(aligned or fits)


def _analytic_tile(extent: int, n: int, role: str) -> list:
    inner = {"vector": _largest_divisor(extent, _MAX_VECTOR, 16),
             "rows": _largest_divisor(extent, 4), "outer": 1,
             "reduce": _largest_divisor(extent, _MAX_REDUCE)}[role]
    if n == 2:
        return [extent // inner, inner]
    position = 3 if role == "vector" else 2
    tile = [extent // inner, 1, 1, 1]
    tile[position] = inner
    return tile


def _roles(sch: Schedule, spatial: list, analytic: str | None) -> dict:
    """loop key -> tiling role of each spatial loop in the analytic starting points."""
    if analytic == "reduce":
        last = next((lp for lp in reversed(spatial) if sch.get(lp).extent.value > 1), None)
        return {lp.key: "rows" if lp is last else "outer" for lp in spatial}
    rows = next((lp for lp in reversed(spatial[:-1]) if sch.get(lp).extent.value > 1), None)
    return {lp.key: "vector" if lp is spatial[-1] else "rows" if lp is rows else "outer"
            for lp in spatial}


def _tile_reduction(sch: Schedule, block, analytic: str | None = None, threads: int = 1
                    ) -> None:
    loops = sch.get_loops(block)
    reduce_names = _reduce_loop_names(sch.get(block))
    spatial = [lp for lp in loops if sch.get(lp).var.name not in reduce_names]
    reduce = [lp for lp in loops if sch.get(lp).var.name in reduce_names]
    if not spatial or not reduce:
        return
    levels: list = [[], [], [], []]
    roles = _roles(sch, spatial, analytic)
    for k, lp in enumerate(spatial):
        inner = _MAX_VECTOR if k == len(spatial) - 1 else _MAX_INNER
        guess = _analytic_tile(sch.get(lp).extent.value, 4, roles[lp.key]) if analytic else None
        tiles = sch.sample_perfect_tile(lp, n=4, max_innermost_factor=inner, decision=guess)
        for level, part in zip(levels, sch.split(lp, tiles)):
            level.append(part)
    r0, r1 = [], []
    for lp in reduce:
        extent = sch.get(lp).extent.value
        guess = None if not analytic else [extent, 1] if analytic == "vector" or \
            lp is not reduce[-1] else _analytic_tile(extent, 2, "reduce")
        tiles = sch.sample_perfect_tile(lp, n=2, max_innermost_factor=_MAX_REDUCE,
                                        decision=guess)
        outer, inner = sch.split(lp, tiles)
        r0.append(outer)
        r1.append(inner)
    s0, s1, s2, s3 = levels
    sch.reorder(*s0, *s1, *r0, *s2, *r1, *s3)
    _annotate(sch, s0, s2, s3[-1], analytic)
    _parallelize(sch, s0, s0 + s1, analytic, threads)
    # Last, as TVM's RewriteReductionBlock postprocessor: TVM vectorizes a loop over a
    # reduction block only while the block keeps its init, so the trace replays in TVM.
    sch.decompose_reduction(block, r0[0])


def _annotate(sch: Schedule, outer: list, rows: list, vector, analytic: bool) -> None:
    if sch.get(vector).extent.value > 1:
        sch.vectorize(vector)
    unroll = sch.sample_categorical([0, 1], [0.5, 0.5], decision=1 if analytic else None)
    if sch.get(unroll):
        for lp in rows:
            if 1 < sch.get(lp).extent.value <= _UNROLL_MAX:
                sch.unroll(lp)


def _parallelize(sch: Schedule, sampled: list, spatial: list, analytic, threads: int) -> None:
    """Make a parallel loop of the outermost spatial loops: for ``threads`` > 1 always, of
    the leading ``spatial`` loops whose product first exceeds ``threads * _JOBS_PER_THREAD``
    (all of them if it never does); for one thread when a sampled choice says so, of the
    ``sampled`` loops."""
    if threads > 1:
        loops = _parallel_prefix(sch, spatial, threads * _JOBS_PER_THREAD)
    elif sch.get(sch.sample_categorical([0, 1], [0.5, 0.5],
                                        decision=0 if analytic else None)):
        loops = sampled
    else:
        return
    if loops:
        sch.parallel(sch.fuse(*loops) if len(loops) > 1 else loops[0])


def _parallel_prefix(sch: Schedule, loops: list, enough: int) -> list:
    """The leading ``loops`` up to the first whose running extent product exceeds
    ``enough``; empty when their product is 1 (nothing to split among threads)."""
    taken, product = [], 1
    for lp in loops:
        taken.append(lp)
        product *= sch.get(lp).extent.value
        if product > enough:
            break
    return taken if product > 1 else []


def _tile_spatial(sch: Schedule, block, analytic: str | None = None, threads: int = 1
                  ) -> None:
    loops = sch.get_loops(block)
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    extent = sch.get(fused).extent.value
    if extent < 2:
        return
    guess = _analytic_tile(extent, 2, "vector") if analytic else None
    tiles = sch.sample_perfect_tile(fused, n=2, max_innermost_factor=_MAX_VECTOR,
                                    decision=guess)
    outer, inner = sch.split(fused, tiles)
    if sch.get(inner).extent.value > 1:
        sch.vectorize(inner)
    _parallelize(sch, [outer], [outer], analytic, threads)
