"""``loop_partition`` (TVM's): a loop becomes consecutive loops over sub-ranges, each with
its own copy of the body, inside an opaque block per partition under one common block.

    for i in range(128): B[...]        -- loop_partition(i, [2, 1, 64]) -->
    with T.sblock("B_i_common"):
        with T.sblock("B_i0_partition"): for i0 in range(2): ...
        with T.sblock("B_i1_partition"): for i1 in range(2, 3): ...
        with T.sblock("B_i2_partition"): for i2 in range(3, 67): ...
        with T.sblock("B_i3_partition"): for i3 in range(67, 128): ...

The factors are sizes; one may be None (the rest of the extent), and when none is, a last
partition takes what the factors leave (they must leave something, as TVM requires). An
iter var bound to the loop itself gets the partition's range as its domain, so each copy
states exactly what it covers. Refused as TVM refuses: a loop with annotations or a thread
binding, a symbolic min or extent, a factor that is not positive, two None factors, factors
that reach the extent.
"""

from __future__ import annotations

from dataclasses import replace

from ...errors import ScheduleError
from ...tir import expr as E
from ...tir.function import For, PrimFunc, SBlock, seq
from .loops import check_plain_loop, find_loop, fresh_name
from .tree import kids, rebuild, replace_at, subst_stmt, var_names

__all__ = ["loop_partition", "partition_bounds"]


def partition_bounds(loop: For, factors: list) -> list:
    """The end of each partition (cumulative), TVM's factor rules applied."""
    name = loop.var.name
    if E.as_int(loop.min) is None or E.as_int(loop.extent) is None:
        raise ScheduleError(f"loop_partition: the min and extent of loop {name!r} must be "
                            "known at compile time (dynamic shape detected)", key=name)
    extent = E.as_int(loop.extent)
    if sum(f is None for f in factors) > 1:
        raise ScheduleError("loop_partition: at most one factor may be None (inferred)",
                            key=name)
    for k, f in enumerate(factors):
        if f is not None and f <= 0:
            raise ScheduleError(f"loop_partition: factor {k} is {f}, not positive", key=name)
    total = sum(f for f in factors if f is not None)
    if total >= extent:
        raise ScheduleError(f"loop_partition: the factors {factors} reach the extent "
                            f"{extent} of loop {name!r}", key=name,
                            hint="leave room for the last partition, or put None in one")
    sizes = [extent - total if f is None else f for f in factors]
    ends, acc = [], 0
    for size in sizes:
        acc += size
        ends.append(acc)
    if None not in factors:
        ends.append(extent)
    return ends


def loop_partition(func: PrimFunc, var: E.Var, factors: list) -> tuple[PrimFunc, list]:
    """Returns (func, the partition loops' vars)."""
    path = find_loop(func, var, "loop_partition")
    loop = path[-1]
    check_plain_loop(loop, "loop_partition")
    ends = partition_bounds(loop, factors)
    dtype = f"int{_bits(loop.var.dtype)}"
    base = f"{_first_block_name(loop.body)}_{loop.var.name}"
    taken = var_names(func.body)
    names = set(_block_names(func.body))
    parts, new_vars, lo = [], [], E.as_int(loop.min)
    for k, end in enumerate(ends):
        v = E.Var(fresh_name(func, f"{loop.var.name}{k}", taken), dtype)
        body = _copy(subst_stmt(loop.body, {loop.var.name: v}), v, lo, end, names)
        start = E.IntImm(lo, dtype)
        part = For(v, start, E.IntImm(end - lo, dtype), "serial", body)
        parts.append(SBlock(_unique(f"{base}{k}_partition", names), part))
        new_vars.append(v)
        lo = end
    common = SBlock(_unique(f"{base}_common", names), seq(parts))
    return replace(func, body=replace_at(path, common)), new_vars


def _bits(dtype: str) -> int:
    return int(dtype[3:]) if dtype.startswith("int") and dtype[3:].isdigit() else 32


def _first_block_name(s) -> str:
    while not isinstance(s, SBlock):
        inner = kids(s)
        if not inner:
            return "block"
        s = inner[0]
    return s.name


def _block_names(s) -> list:
    out = [s.name] if isinstance(s, SBlock) else []
    for c in kids(s):
        out += _block_names(c)
    return out


def _unique(name: str, names: set) -> str:
    base, k = name, 0
    while name in names:
        k += 1
        name = f"{base}_{k}"
    names.add(name)
    return name


def _copy(s, v: E.Var, lo: int, end: int, names: set):
    """A copy of a partition's body: fresh loop vars (same names), blocks renamed with the
    partition's var, iter vars bound to ``v`` given the domain [lo, end)."""
    if isinstance(s, For):
        fresh = E.Var(s.var.name, s.var.dtype)
        body = subst_stmt(s.body, {s.var.name: fresh})
        return replace(s, var=fresh, body=_copy(body, v, lo, end, names))
    if isinstance(s, SBlock):
        ivs = tuple(replace(iv, min=E.IntImm(lo, iv.var.dtype),
                            extent=E.IntImm(end - lo, iv.var.dtype))
                    if isinstance(iv.binding, E.Var) and iv.binding.name == v.name else iv
                    for iv in s.iter_vars)
        new = replace(s, iter_vars=ivs, name=_unique(f"{s.name}_{v.name}", names),
                      reads=None, writes=None)
        return rebuild(new, [_copy(c, v, lo, end, names) for c in kids(new)])
    if kids(s):
        return rebuild(s, [_copy(c, v, lo, end, names) for c in kids(s)])
    return s
