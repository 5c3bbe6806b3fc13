"""Loop primitives on a PrimFunc: split, fuse, reorder, and the loop kinds (parallel,
vectorize, unroll). Each takes the function and loop vars (identity: the For's ``var``
object) and returns the new function (plus the new loops' vars); ScheduleError when the
primitive does not apply, the function unchanged."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

from ...errors import ScheduleError
from ...tir import expr as E
from ...tir.function import For, PrimFunc, SBlock, SeqStmt, seq
from .arith import fold
from .refusals import check_compact_dataflow, check_reorder_bindings
from .tree import blocks_in, find_path, kids, replace_at, subst_stmt, var_names

__all__ = ["add_unit_loop", "find_loop", "fresh_name", "fuse", "merge", "reorder", "set_kind",
           "split"]


def find_loop(func: PrimFunc, var: E.Var, what: str = "loop") -> list:
    path = find_path(func.body, lambda s: isinstance(s, For) and s.var is var)
    if path is None:
        raise ScheduleError(f"{what}: loop {var.name!r} is not in function {func.name!r} "
                            "(any more)", key=var.name,
                            hint="split/fuse/reorder replace loops: use the loops they return")
    return path


def fresh_name(func: PrimFunc, base: str, taken: set | None = None) -> str:
    taken = taken if taken is not None else var_names(func.body)
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def _const(e) -> int | None:
    return e.value if isinstance(e, E.IntImm) else None


def split(func: PrimFunc, var: E.Var, factors: list,
          predicate: bool = True) -> tuple[PrimFunc, list]:
    """``for v in range(n)`` -> ``for v_0 .. for v_k`` with ``v = v_0 * f1*..*fk + ..``; one
    factor may be None (inferred); when the factors overshoot ``n`` the blocks get a
    ``T.where`` guard."""
    path = find_loop(func, var, "split")
    loop = path[-1]
    check_plain_loop(loop, "split")
    factors = _factors(loop, factors)
    taken = var_names(func.body)
    new_vars = [E.Var(fresh_name(func, f"{var.name}_{k}", taken), var.dtype)
                for k in range(len(factors))]
    fused = raw = E.IntImm(0, var.dtype)
    for v, f in zip(new_vars, factors):
        fused = E.add(E.mul(fused, f), v)
        raw = fold("Add", fold("Mul", raw, f), v)  # as TVM builds it, for the guard
    fused = E.add(fused, loop.min)
    body = subst_stmt(loop.body, {var.name: fused})
    total = E.IntImm(1, var.dtype)
    for f in factors:
        total = E.mul(total, f)
    if predicate and E.sub(total, loop.extent) != E.IntImm(0, var.dtype):
        # TVM guards with the substitute as built, ``(i0 * 2 + i1) * 3 + i2 < n``, unsimplified
        guard = E.BinaryOp("LT", fold("Add", raw, loop.min), fold("Add", loop.min, loop.extent))
        body = _guard(body, guard)
    for v, f in reversed(list(zip(new_vars, factors))):
        body = For(v, E.IntImm(0, var.dtype), f, "serial", body)
    return replace(func, body=replace_at(path, body)), new_vars


def _factors(loop: For, factors: list) -> list:
    if not factors or sum(f is None for f in factors) > 1:
        raise ScheduleError(f"split of loop {loop.var.name!r} needs factors with at most one "
                            f"None, got {factors}", key=loop.var.name)
    dtype = loop.var.dtype
    known = E.IntImm(1, dtype)
    for f in factors:
        if f is not None:
            if int(f) < 1:
                raise ScheduleError(f"split factors must be positive, got {factors}",
                                    key=loop.var.name)
            known = E.mul(known, int(f))
    return [E.ceildiv(loop.extent, known) if f is None else E.IntImm(int(f), dtype)
            for f in factors]


def _guard(body, cond):
    """Add ``cond`` to the predicate of each outermost block in ``body``."""
    blocks = blocks_in(body, nested=False)
    if not blocks:
        raise ScheduleError("a split that does not divide the loop needs a block below it to "
                            "guard", hint="pick factors that divide the extent")
    for block in blocks:
        pred = cond if block.predicate is None else E.binary("And", block.predicate, cond)
        path = find_path(body, lambda s, b=block: s is b)
        body = replace_at(path, replace(block, predicate=pred))
    return body


def check_plain_loop(loop: For, what: str) -> None:
    """TVM splits and fuses loops without annotations or thread bindings."""
    if loop.annotations or loop.thread is not None or loop.kind == "thread_binding":
        kind = "annotations" if loop.annotations else "a thread binding"
        raise ScheduleError(f"{what}: loop {loop.var.name!r} has {kind}", key=loop.var.name,
                            hint=f"{what} the loop before annotating or binding it")


def _chain_from(loop: For, count: int) -> list:
    """``loop`` and the loops perfectly nested in it, ``count`` deep at most."""
    chain = [loop]
    while len(chain) < count and isinstance(chain[-1].body, For):
        chain.append(chain[-1].body)
    return chain


def fuse(func: PrimFunc, variables: list) -> tuple[PrimFunc, E.Var]:
    """Perfectly nested loops (outer to inner, each the only child of the previous) -> one
    loop over the product of their extents."""
    if len(variables) < 2:
        raise ScheduleError("fuse needs at least two loops")
    path = find_loop(func, variables[0], "fuse")
    chain = _chain_from(path[-1], len(variables))
    if [lp.var for lp in chain] != list(variables) or \
            any(v2 is not lp.var for v2, lp in zip(variables, chain)):
        raise ScheduleError("fuse needs perfectly nested loops given outer to inner",
                            key=",".join(v.name for v in variables))
    if any(_const(lp.min) != 0 for lp in chain):
        raise ScheduleError("fuse needs loops starting at 0")
    for lp in chain:
        check_plain_loop(lp, "fuse")
    names = {lp.var.name for lp in chain}
    for lp in chain:
        used = {v.name for v in E.free_vars(lp.min) + E.free_vars(lp.extent)}
        if used & names:
            raise ScheduleError(f"fuse: the range of loop {lp.var.name!r} depends on loop(s) "
                                f"{sorted(used & names)} being fused", key=lp.var.name)
    dtype = chain[0].var.dtype
    fused = E.Var(fresh_name(func, "_".join(v.name for v in variables) + "_fused"), dtype)
    mapping, stride = {}, E.IntImm(1, dtype)
    for k, lp in reversed(list(enumerate(chain))):
        # TVM's simplified form: fused % (stride * extent) // stride (no % outermost)
        value = fused if k == 0 else E.floormod(fused, E.mul(stride, lp.extent))
        mapping[lp.var.name] = E.floordiv(value, stride) if _const(stride) != 1 else value
        stride = E.mul(stride, lp.extent)
    body = subst_stmt(chain[-1].body, mapping)
    extent = E.IntImm(1, dtype)
    for lp in chain:  # TVM multiplies the extents outer to inner
        extent = E.mul(extent, lp.extent)
    new = For(fused, E.IntImm(0, dtype), extent, "serial", body)
    return replace(func, body=replace_at(path, new)), fused


def reorder(func: PrimFunc, variables: list) -> PrimFunc:
    """Put the given loops of one perfect nest in the given order (others stay in place)."""
    if len({id(v) for v in variables}) != len(variables):
        raise ScheduleError("reorder got the same loop twice")
    paths = [find_loop(func, v, "reorder") for v in variables]
    top = min(paths, key=len)
    depth = max(len(p) for p in paths) - len(top) + 1
    chain = _chain_from(top[-1], depth)
    position = {id(lp.var): k for k, lp in enumerate(chain)}
    if any(id(v) not in position for v in variables):
        raise ScheduleError("reorder needs loops of one perfect nest (no statement between them)",
                            key=",".join(v.name for v in variables))
    slots = sorted(position[id(v)] for v in variables)
    order = list(chain)
    for slot, v in zip(slots, variables):
        order[slot] = chain[position[id(v)]]
    _check_ranges(order)
    check_reorder_bindings(top, chain[-1])
    body = chain[-1].body
    for lp in reversed(order):
        body = replace(lp, body=body)
    return replace(func, body=replace_at(top, body))


def _check_ranges(order: list) -> None:
    outer: set = set()
    for lp in order:
        used = {v.name for v in E.free_vars(lp.min) + E.free_vars(lp.extent)}
        inner = {o.var.name for o in order} - outer - {lp.var.name}
        if used & inner:
            raise ScheduleError(f"loop {lp.var.name!r} has a range that depends on loops "
                                f"{sorted(used & inner)} that would be inside it")
        outer.add(lp.var.name)


_KINDS = {"parallel": "parallel", "vectorize": "vectorized", "unroll": "unroll"}


def set_kind(func: PrimFunc, var: E.Var, what: str) -> PrimFunc:
    """Mark a loop parallel / vectorized / unrolled. Parallel and vectorized loops may not
    feed a reduce axis (iterations would race on one accumulator)."""
    path = find_loop(func, var, what)
    loop = path[-1]
    if what in ("parallel", "vectorize"):
        check_compact_dataflow(func, path, what)
        for block in blocks_in(loop.body):
            for iv in block.iter_vars:
                if iv.kind != "spatial" and var.name in {v.name for v in
                                                         E.free_vars(iv.binding)}:
                    raise ScheduleError(f"cannot {what} loop {var.name!r}: it is bound to the "
                                        f"{iv.kind} axis {iv.var.name!r} of block "
                                        f"{block.name!r}", key=var.name,
                                        hint="only loops of spatial axes can run in "
                                             "parallel or as vector lanes")
    if what == "vectorize" and not isinstance(loop.extent, E.IntImm):
        raise ScheduleError(f"cannot vectorize loop {var.name!r}: its extent "
                            f"{E.to_str(loop.extent)} is not a constant", key=var.name,
                            hint="split it by a constant factor and vectorize the inner loop")
    if what == "vectorize" and _has_inner_loop(loop.body):
        raise ScheduleError(f"cannot vectorize loop {var.name!r}: it has loops inside",
                            key=var.name, hint="vectorize the innermost loop")
    return replace(func, body=replace_at(path, replace(loop, kind=_KINDS[what])))


def _has_inner_loop(s) -> bool:
    if isinstance(s, For):
        return True
    if isinstance(s, (SeqStmt, SBlock)):
        return any(_has_inner_loop(k) for k in kids(s))
    return False


def merge(func: PrimFunc, variables: list) -> tuple[PrimFunc, E.Var]:
    """TVM's ``merge``: loop nests of equal extents, each a chain of single-child loops from
    a common ancestor down to the given loop, become one nest whose innermost loop runs the
    given loops' bodies in turn; the merged nest takes the last nest's place. Returns (func,
    the innermost merged loop var)."""
    paths = [find_loop(func, v, "merge") for v in variables]
    common = 0
    while all(len(p) > common + 1 and p[common] is paths[0][common] for p in paths):
        common += 1
    scopes = {id(next(n for n in reversed(p[:-1]) if isinstance(n, SBlock))) for p in paths}
    if len(scopes) != 1:
        raise ScheduleError("merge: expected the loops to be under the same block scope")
    nests = [_merge_chain(p, common) for p in paths]
    if len({len(n) for n in nests}) != 1:
        raise ScheduleError("merge: the loops must be at the same nesting depth below their "
                            "common ancestor", hint=f"depths {[len(n) for n in nests]}")
    for nest in nests[1:]:
        for a, b in zip(nests[0], nest):
            if E.sub(a.extent, b.extent) != E.IntImm(0, a.extent.dtype):
                raise ScheduleError(f"merge: loops {a.var.name!r} and {b.var.name!r} have "
                                    f"different extents ({E.to_str(a.extent)} vs "
                                    f"{E.to_str(b.extent)})", key=b.var.name)
    taken = var_names(func.body)
    new_vars = [E.Var(fresh_name(func, f"{lp.var.name}_m", taken), lp.var.dtype)
                for lp in nests[0]]
    bodies = [subst_stmt(nest[-1].body, {lp.var.name: v for lp, v in zip(nest, new_vars)})
              for nest in nests]
    stmt = seq(bodies)
    for v, lp in reversed(list(zip(new_vars, nests[0]))):
        stmt = For(v, E.IntImm(0, v.dtype), lp.extent, "serial", stmt)
    body = replace_at(find_path(func.body, lambda s: s is nests[-1][0]), stmt)
    for nest in nests[:-1]:
        body = replace_at(find_path(body, lambda s, lp=nest[0]: s is lp), None)
    return replace(func, body=body), new_vars[-1]


def _merge_chain(path: list, common: int) -> list:
    """The loops of ``path`` below its first ``common`` nodes, outermost first: each must
    start at 0, carry no annotation or binding, and hold only the next."""
    below = path[common:]
    if any(not isinstance(n, For) for n in below):
        raise ScheduleError(f"merge: loop {path[-1].var.name!r} is not in a chain of loops "
                            "directly below the loops' common ancestor",
                            key=path[-1].var.name, hint="merge loops of sibling loop nests")
    for outer, inner in pairwise(below):
        if outer.body is not inner:
            raise ScheduleError(f"merge: loop {inner.var.name!r} is not the only child of "
                                f"loop {outer.var.name!r}", key=inner.var.name)
    for lp in below:
        check_plain_loop(lp, "merge")
        if E.as_int(lp.min) != 0:
            raise ScheduleError(f"merge: loop {lp.var.name!r} does not start at 0",
                                key=lp.var.name)
    return below


def add_unit_loop(func: PrimFunc, path: list) -> tuple[PrimFunc, E.Var]:
    """TVM's ``add_unit_loop``: a loop ``for u in range(1)`` right above the block or loop
    at the end of ``path``. Returns (func, the new loop var)."""
    var = E.Var(fresh_name(func, "u"), "int32")
    loop = For(var, E.IntImm(0, "int32"), E.IntImm(1, "int32"), "serial", path[-1])
    return replace(func, body=replace_at(path, loop)), var
