"""TVM's cached flags of a block, computed from the current function (``state.py`` serves them).

``region_cover`` compares regions as TVM's state does: for a consumer and the producers whose
lowest common ancestor with it is a given loop (or the scope block), the loops below that
ancestor are relaxed to their ranges: the consumer's read region is bounded from above
(interval arithmetic), each producer's write region from below (its interval when the
accessed indices fill it densely, else nothing), the producers' regions are joined when
they touch, and the join must contain the read region in every dim. Loops bound to GPU
threads above the ancestor are relaxed too when the buffer's storage scope is shared
among those threads (TVM's ``CanRelaxStorageUnderThread``).
"""

from __future__ import annotations

import itertools

from ...errors import MSCError
from ...tir import expr as E
from ...tir.function import For, PrimFunc, SBlock
from .region import accesses, block_reads, block_writes, bounds
from .tree import child_blocks, find_path, rewrite_expr

__all__ = ["cached_flags", "scope_deps"]

_AFFINE_OPS = {"Add", "Sub", "Mul", "FloorDiv", "FloorMod"}
_STORAGE_RANK = {"global": 0, "shared": 1, "warp": 2, "local": 3}
_ENUMERATION_LIMIT = 1 << 14  # combinations tried when checking that a region is dense


def scope_deps(children: list) -> list:
    """(src, dst, "RAW" / "WAW" / "WAR") among ``children`` in program order, as TVM's
    ``SBlockScope`` builds them."""
    readers: dict = {}
    writers: dict = {}
    deps = []
    for block in children:
        reads = [b.name for b in block_reads(block)]
        writes = [b.name for b in block_writes(block)]
        for name in reads:
            readers.setdefault(name, []).append(block)
        for name in writes:
            writers.setdefault(name, []).append(block)
        for kind, names, table in (("RAW", reads, writers), ("WAW", writes, writers),
                                   ("WAR", writes, readers)):
            for name in names:
                deps += [(src, block, kind) for src in table.get(name, []) if src is not block]
    return deps


def cached_flags(func: PrimFunc, name: str) -> tuple:
    """(affine_binding, region_cover, stage_pipeline) of block ``name`` of ``func``."""
    path = find_path(func.body, lambda s: isinstance(s, SBlock) and s.name == name)
    block = path[-1]
    scope_at = max((k for k, s in enumerate(path[:-1]) if isinstance(s, SBlock)), default=None)
    affine = True if scope_at is None else _affine(block, path[scope_at + 1:-1])
    cover = True
    if scope_at is not None:
        cover = _covers(func, path[scope_at], block)
    children = child_blocks(block.body)
    pipeline = all(kind != "WAR" for _, _, kind in scope_deps(children)) and all(
        _covers(func, block, child) for child in children)
    return affine, cover, pipeline


# ------------------------------------------------------------------------ affine bindings

def _affine(block: SBlock, between: list) -> bool:
    loops = {s.var.name for s in between if isinstance(s, For)}
    return all(_quasi_affine(iv.binding, loops) for iv in block.iter_vars)


def _quasi_affine(e, loops: set) -> bool:
    if isinstance(e, (E.IntImm, E.Var)):
        return True
    if not (isinstance(e, E.BinaryOp) and e.op in _AFFINE_OPS):
        return False
    scaled = e.op in ("Mul", "FloorDiv", "FloorMod")
    if scaled and not (_const_in(e.b, loops) or (e.op == "Mul" and _const_in(e.a, loops))):
        return False  # a product of loop vars, or a division by one
    return _quasi_affine(e.a, loops) and _quasi_affine(e.b, loops)


def _const_in(e, loops: set) -> bool:
    """No loop var in ``e`` (a coefficient or divisor of an affine binding)."""
    return not any(v.name in loops for v in E.free_vars(e))


# ------------------------------------------------------------------------ region cover

def _covers(func: PrimFunc, scope: SBlock, consumer: SBlock) -> bool:
    producers = [src for src, dst, kind in scope_deps(child_blocks(scope.body))
                 if dst is consumer and kind == "RAW"]
    if not producers:
        return True
    path_c = find_path(func.body, lambda s: s is consumer)
    groups: dict = {}
    for producer in producers:
        path_p = find_path(func.body, lambda s, p=producer: s is p)
        k = _common(path_c, path_p)
        groups.setdefault(k, []).append(path_p)
    try:
        return all(_group_covers(path_c, k, paths) for k, paths in groups.items())
    except MSCError:  # an index msc cannot bound: not provably covered
        return False


def _common(a: list, b: list) -> int:
    k = 0
    while k + 1 < min(len(a), len(b)) and a[k + 1] is b[k + 1]:
        k += 1
    return k


def _group_covers(path_c: list, k: int, paths: list) -> bool:
    consumer = path_c[-1]
    for buf, read in _regions(consumer, "read"):
        written = []
        for path_p in paths:
            for wbuf, region in _regions(path_p[-1], "write"):
                if wbuf.name == buf.name:
                    written.append(_lower(region, _relaxed(path_p, k, buf.scope)))
        if not written:
            continue
        produced = _union(written)
        consumed = _upper(read, _relaxed(path_c, k, buf.scope))
        if produced is None or not _contains(buf, produced, consumed):
            return False
    return True


def _regions(block: SBlock, kind: str) -> list:
    """(buffer, [(lo, extent) per dim]) in loop vars: the stated regions, else the hull of
    the accesses of each buffer."""
    binds = {iv.var.name: iv.binding for iv in block.iter_vars}
    stated = block.reads if kind == "read" else block.writes
    if stated is not None:
        return [(r.buffer, [_dim(lo, hi, binds) for lo, hi in r.region]) for r in stated]
    names = {b.name for b in (block_reads(block) if kind == "read" else block_writes(block))}
    found: dict = {}
    for k, buf, indices in accesses(block, kind):
        if buf.name in names:
            found.setdefault(buf.name, (buf, []))[1].append(
                [(rewrite_expr(i, binds), E.IntImm(1, "int32")) for i in indices])
    return [(buf, _hull(dims)) for buf, dims in found.values()]


def _dim(lo, hi, binds: dict) -> tuple:
    lo = rewrite_expr(lo, binds)
    if hi is None:
        return lo, E.IntImm(1, "int32")
    return lo, E.canonicalize(E.sub(rewrite_expr(hi, binds), lo))


def _hull(regions: list) -> list:
    if len(regions) == 1:
        return regions[0]
    return [(lo, E.IntImm(1, "int32")) if all(r[d][0] == lo for r in regions) else
            (_Spread([r[d][0] for r in regions]), E.IntImm(1, "int32"))
            for d, (lo, _) in enumerate(regions[0])]


class _Spread:
    """Several point accesses of one dim (their hull is bounded from above)."""

    def __init__(self, points: list):
        self.points = points


def _relaxed(path: list, k: int, scope: str) -> dict:
    """name -> (min, extent) of the loops the region at ancestor ``path[k]`` ranges over."""
    out = {s.var.name: (s.min, s.extent) for s in path[k + 1:-1] if isinstance(s, For)}
    rank = _STORAGE_RANK.get(scope.split(".")[0], 0)
    if rank == 0:
        return out
    for s in path[:k + 1]:
        if isinstance(s, For) and s.kind == "thread_binding" and _relaxes(rank, s.thread):
            out[s.var.name] = (s.min, s.extent)
    return out


def _relaxes(storage_rank: int, thread: str | None) -> bool:
    if not thread or thread.startswith("vthread"):
        return False
    thread_rank = 0 if thread.startswith("blockIdx") else 1
    if storage_rank == _STORAGE_RANK["warp"]:
        return thread == "threadIdx.x"
    return storage_rank <= thread_rank


def _ranges(dom: dict) -> dict:
    return {n: (lo, E.sub(E.add(lo, ext), 1)) for n, (lo, ext) in dom.items()}


def _upper(region: list, dom: dict) -> list:
    out = []
    for lo, ext in region:
        points = lo.points if isinstance(lo, _Spread) else [lo]
        spans = [bounds(p, _ranges(dom)) for p in points]
        out.append((_pick(E.min, [s[0] for s in spans]),
                    E.sub(E.add(_pick(E.max, [s[1] for s in spans]), ext), 1)))
    return out


def _lower(region: list, dom: dict):
    out = []
    for lo, ext in region:
        if isinstance(lo, _Spread) or not _dense(lo, ext, dom):
            return None
        low, high = bounds(lo, _ranges(dom))
        out.append((low, E.sub(E.add(high, ext), 1)))
    return out


def _dense(lo, ext, dom: dict) -> bool:
    """Whether ``lo + [0, ext)`` over the relaxed loops fills an interval (checked by
    enumeration; the other vars are held at 0, as affine indices add them on)."""
    names = [v.name for v in E.free_vars(lo) if v.name in dom]
    if not names:
        return True
    extent = E.as_int(ext)
    sizes = [E.as_int(dom[n][1]) for n in names]
    starts = [E.as_int(dom[n][0]) for n in names]
    if extent is None or None in sizes or None in starts:
        return False
    if _product(sizes) > _ENUMERATION_LIMIT:
        return len(names) == 1
    others = {v.name: 0 for v in E.free_vars(lo) if v.name not in dom}
    values = set()
    for combo in itertools.product(*[range(s, s + n) for s, n in zip(starts, sizes)]):
        base = int(E.evaluate(lo, {**others, **dict(zip(names, combo))}))
        values.update(range(base, base + extent))
    return max(values) - min(values) + 1 == len(values)


def _union(regions: list):
    if any(r is None for r in regions):
        return None
    out = []
    for dims in zip(*regions):
        if all(d == dims[0] for d in dims[1:]) or len(dims) == 1:
            out.append(dims[0])
            continue
        consts = [(E.as_int(lo), E.as_int(hi)) for lo, hi in dims]
        if any(None in c for c in consts):
            return None
        merged = _merge(sorted(consts))
        if merged is None:
            return None
        out.append((E.IntImm(merged[0], "int32"), E.IntImm(merged[1], "int32")))
    return out


def _merge(spans: list):
    lo, hi = spans[0]
    for a, b in spans[1:]:
        if a > hi + 1:
            return None  # a gap: the union is not one interval
        hi = max(hi, b)
    return lo, hi


def _contains(buf, produced: list, consumed: list) -> bool:
    for (plo, phi), (clo, chi), dim in zip(produced, consumed, buf.shape):
        size = E.as_int(dim)
        plo, phi, clo, chi = (_clip(x, size) for x in (plo, phi, clo, chi))
        if not (_at_most(plo, clo) and _at_most(chi, phi)):
            return False
    return True


def _clip(x, size):
    value = E.as_int(x)
    if value is None or size is None:
        return x
    return E.IntImm(min(max(value, 0), size - 1), "int32")


def _at_most(a, b) -> bool:
    diff = E.as_int(E.canonicalize(E.sub(b, a)))
    return diff is not None and diff >= 0


def _pick(f, values: list):
    out = values[0]
    for v in values[1:]:
        diff = E.as_int(E.canonicalize(E.sub(out, v)))
        if diff is None:
            out = f(out, v)
        elif (diff > 0) == (f is E.min):
            out = v
    return out


def _product(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out
