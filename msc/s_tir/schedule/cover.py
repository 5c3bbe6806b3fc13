"""Which instances of a block ``compute_at`` / ``reverse_compute_at`` must run: the domain of
each block var that covers the region the other blocks under the target loop need.

TVM's ``CalculateBlockVarDomain``: per buffer, the region one instance of the moved block
provides (its writes for compute_at, its reads for reverse_compute_at, in block vars) is
matched with the union of the regions required under the loop (relaxed over the loops inside
it). A provided index that is a block var (``vi``), a var times a factor (``vi * 4``), a
``//`` of one, or a var plus an offset when every block var is used once, gives the var's
domain; where the required region may leave the buffer, a ``bound`` is kept, which becomes a
``T.where`` of the new block::

    doms = block_var_domains(block.iter_vars, provided, required, ranges)
    # [VarDomain(dom=(i * 8, i * 8 + 9), bound=(0, 127)), ...]

``ranges`` maps every bound loop var to (min, max) and is what the proofs use.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from ...errors import ScheduleError
from ...tir import expr as E
from .region import bounds

__all__ = ["VarDomain", "block_var_domains", "prove_eq", "prove_ge", "smax", "smin"]


@dataclass
class VarDomain:
    """``dom``: (min, max) of the block var's values to run, or None (not constrained);
    ``bound``: (min, max) the values must stay within, or None."""

    dom: tuple | None = None
    bound: tuple | None = None

    def union(self, other: VarDomain, ranges: dict) -> None:
        """TVM's relaxed union: (d0 ^ b0) v (d1 ^ b1) -> (d0 v d1) ^ (b0 v b1)."""
        self.dom = _hull(self.dom, other.dom, ranges)
        self.bound = _hull(self.bound, other.bound, ranges)


# ----------------------------------------------------------------------------- proofs

def _lower(e, ranges: dict):
    try:
        return E.as_int(bounds(e, ranges)[0])
    except ScheduleError:
        return None


def prove_ge(a, b, ranges: dict) -> bool:
    """``a >= b`` for every value of the vars in ``ranges``."""
    low = _lower(E.sub(a, b), ranges)
    return low is not None and low >= 0


def prove_eq(a, b, ranges: dict) -> bool:
    diff = E.sub(a, b)
    if E.as_int(diff) == 0:
        return True
    try:
        lo, hi = bounds(diff, ranges)
    except ScheduleError:
        return False
    return E.as_int(lo) == 0 and E.as_int(hi) == 0


def smin(a, b, ranges: dict):
    if prove_ge(b, a, ranges):
        return a
    return b if prove_ge(a, b, ranges) else E.min(a, b)


def smax(a, b, ranges: dict):
    if prove_ge(a, b, ranges):
        return a
    return b if prove_ge(b, a, ranges) else E.max(a, b)


def _hull(a, b, ranges: dict):
    if a is None or b is None:
        return a if b is None else b
    return smin(a[0], b[0], ranges), smax(a[1], b[1], ranges)


def region_union(regions: list, ranges: dict) -> list:
    """Per dim the hull of several regions (lists of (min, max))."""
    out = list(regions[0])
    for region in regions[1:]:
        out = [_hull(x, y, ranges) for x, y in zip(out, region)]
    return out


# ----------------------------------------------------------------------------- solving

def block_var_domains(iter_vars, provided: dict, required: dict, ranges: dict) -> list:
    """One :class:`VarDomain` per iter var (in order), with ``dom`` always set.

    ``provided`` / ``required``: buffer name -> (Buffer, [region, ...]), a region being a list
    of (min, max) per dim; ``provided`` in the block's vars, ``required`` in loop vars."""
    doms = {iv.var.name: VarDomain() for iv in iter_vars}
    for name, (buf, many) in provided.items():
        needed = required.get(name, (buf, []))[1]
        if not needed:
            continue
        need = region_union(needed, ranges)
        have = region_union(many, ranges)
        if not _solve_affine(buf, iter_vars, have, need, ranges, doms):
            _solve_dimwise(buf, have, need, ranges, doms)
    out = []
    for iv in iter_vars:
        info = doms[iv.var.name]
        full = (iv.min, E.sub(E.add(iv.min, iv.extent), 1))
        info.bound = full if info.bound is None else (smax(info.bound[0], full[0], ranges),
                                                      smin(info.bound[1], full[1], ranges))
        _simplify(info, ranges)
        out.append(info)
    return out


def _simplify(info: VarDomain, ranges: dict) -> None:
    """TVM's ``BlockVarDomainInfo::Simplify``: drop a bound the domain lies within; take the
    bound when it lies within the domain; merge a bound that makes the range constant."""
    if info.dom is None:
        info.dom, info.bound = tuple(tidy(x, ranges) for x in info.bound), None
        return
    info.dom = tuple(tidy(x, ranges) for x in info.dom)
    (dlo, dhi), (blo, bhi) = info.dom, info.bound
    lo, hi = smax(dlo, blo, ranges), smin(dhi, bhi, ranges)
    if prove_eq(dlo, lo, ranges) and prove_eq(dhi, hi, ranges):
        info.bound = None
    elif prove_eq(blo, lo, ranges) and prove_eq(bhi, hi, ranges):
        info.dom, info.bound = info.bound, None
    elif E.as_int(lo) is not None and E.as_int(hi) is not None:
        info.dom, info.bound = (lo, hi), None


def _dim_max(buf, k: int):
    return E.max(E.sub(buf.shape[k], 1), 0)


def _solve_affine(buf, iter_vars, have, need, ranges, doms) -> bool:
    """Single-point provided indices of the form ``c +- v``, every block var used exactly
    once (TVM's bijective iter map in its simplest shape): ``v`` covers ``+-(need - c)``."""
    if any(not prove_eq(lo, hi, ranges) for lo, hi in have):
        return False
    names = {iv.var.name for iv in iter_vars}
    found = {}
    fused = _fused_pairs(have, iter_vars)
    for k, (lo, _) in enumerate(have):
        if k in fused:
            continue
        got = _signed_var(lo)
        if got is None:
            if E.free_vars(lo):
                return False
            continue
        if got[0] not in names or got[0] in found:
            return False
        found[got[0]] = (k, *got[1:])
    in_fused = {v for group in fused.values() for v in group[2]}
    if set(found) | in_fused != names or set(found) & in_fused:
        return False
    _solve_fused(buf, fused, need, ranges, doms)
    for var, (k, sign, c) in found.items():
        zero = E.IntImm(0, getattr(buf.shape[k], "dtype", "int32"))
        dom = _inverse_interval(need[k], sign, c)
        bound = _inverse_interval((zero, _dim_max(buf, k)), sign, c)
        doms[var].union(VarDomain(dom, bound), ranges)
    return True


def _fused_pairs(have, iter_vars) -> dict:
    """Dims indexed ``F // c`` and ``F % c`` of one mixed-radix sum ``F`` of block vars
    (``(v1 * 8 + v4) // 16``, ``(v1 * 8 + v4) % 16``): {div dim: (mod dim, c, {var: (stride,
    extent)})}, each pair listed once under its ``//`` dim (its ``%`` dim maps to None)."""
    from .inline import affine_terms

    extents = {iv.var.name: E.as_int(iv.extent) for iv in iter_vars}
    divs, mods = {}, {}
    for k, (lo, _) in enumerate(have):
        if isinstance(lo, E.BinaryOp) and lo.op in ("FloorDiv", "FloorMod") and \
                E.as_int(lo.b) is not None:
            (divs if lo.op == "FloorDiv" else mods)[k] = lo
    out = {}
    for k, d in divs.items():
        m = next((j for j, e in mods.items() if e.a == d.a and E.as_int(e.b) == E.as_int(d.b)),
                 None)
        terms = affine_terms(d.a)
        if m is None or terms is None or terms[1] != 0 or len(terms[0]) < 2:
            continue
        radix = sorted(terms[0].items(), key=lambda t: t[1])
        stride, ok = 1, True
        for name, coeff in radix:
            ok = ok and coeff == stride and extents.get(name) is not None
            stride *= extents.get(name) or 1
        if ok:
            out[k] = (m, E.as_int(d.b), {n: (c, extents[n]) for n, c in radix})
            out[m] = None
    return {k: v for k, v in out.items() if v is not None} | \
        {k: (None, 0, {}) for k, v in out.items() if v is None}


def _solve_fused(buf, fused: dict, need, ranges, doms) -> None:
    """Each var of ``F`` from the required ``F`` range, read back as ``F // stride % extent``
    at the region's first and last point (TVM's inverse of a bijective iter map)."""
    for k, (m, c, parts) in fused.items():
        if m is None:
            continue
        cc = E.IntImm(c, getattr(buf.shape[k], "dtype", "int32"))
        f_lo = E.add(E.mul(need[k][0], cc), need[m][0])
        f_hi = E.add(E.mul(need[k][1], cc), need[m][1])
        b_hi = E.add(E.mul(_dim_max(buf, k), cc), _dim_max(buf, m))
        outer = max(parts, key=lambda n: parts[n][0])
        for name, (stride, extent) in parts.items():
            keep = None if name == outer else extent
            lo, hi = (_digit(f, stride, keep, ranges) for f in (f_lo, f_hi))
            blo, bhi = (_digit(f, stride, keep, ranges) for f in (E.IntImm(0, cc.dtype), b_hi))
            doms[name].union(VarDomain((smin(lo, hi, ranges), smax(lo, hi, ranges)),
                                       (smin(blo, bhi, ranges), smax(blo, bhi, ranges))),
                             ranges)


def _digit(f, stride: int, extent, ranges: dict):
    """``f // stride % extent`` (no ``%`` for the outermost digit), simplified."""
    e = E.floordiv(f, E.IntImm(stride, f.dtype))
    return tidy(e if extent is None else E.floormod(e, E.IntImm(extent, f.dtype)), ranges)


def _inverse_interval(interval: tuple, sign: int, c: int) -> tuple:
    """The values of ``v`` for ``c + sign * v`` in ``interval``."""
    lo, hi = interval
    c = E.IntImm(c, getattr(lo, "dtype", "int32"))
    if sign > 0:
        return E.sub(lo, c), E.sub(hi, c)
    return E.sub(c, hi), E.sub(c, lo)


def _signed_var(e):
    """(var name, +-1, constant) of ``c + v`` / ``c - v`` forms, else None."""
    from .inline import affine_terms

    got = affine_terms(e)
    if got is None or len(got[0]) != 1:
        return None
    (name, coeff), = got[0].items()
    return (name, coeff, got[1]) if coeff in (1, -1) else None


def _solve_dimwise(buf, have, need, ranges, doms) -> None:
    for k, (plo, phi) in enumerate(have):
        rlo, rhi = need[k]
        if prove_eq(plo, phi, ranges) and E.as_int(plo) is not None:
            continue
        var, info = _solve_dim(plo, phi, rlo, rhi, _dim_max(buf, k), ranges)
        if var in doms and info is not None:
            doms[var].union(info, ranges)


def _solve_dim(plo, phi, rlo, rhi, dim_max, ranges):
    """TVM's ``SolveBlockVarDomain`` on one dim: (var name, VarDomain or None)."""
    scaled = _var_times(plo)
    if scaled is not None:
        var, e = scaled
        return var, VarDomain((E.floordiv(rlo, e), E.floordiv(rhi, e)),
                              (E.IntImm(0, e.dtype), E.floordiv(dim_max, e)))
    if prove_eq(plo, phi, ranges):
        if isinstance(plo, E.Var):
            return plo.name, VarDomain((rlo, rhi), (E.IntImm(0, plo.dtype), dim_max))
        if isinstance(plo, E.BinaryOp) and plo.op == "FloorDiv" and prove_ge(plo.b, 1, ranges):
            fac = plo.b
            lo, hi = E.mul(rlo, fac), E.sub(E.add(E.mul(rhi, fac), fac), 1)
            if isinstance(plo.a, E.Var):
                return plo.a.name, VarDomain((lo, hi), (E.IntImm(0, fac.dtype), E.sub(
                    E.add(E.mul(dim_max, fac), fac), 1)))
            return _solve_dim(plo.a, plo.a, lo, hi, dim_max, ranges)
        if isinstance(plo, E.BinaryOp) and plo.op == "FloorMod" and isinstance(plo.a, E.Var):
            return plo.a.name, None
    raise ScheduleError(f"BufferRegion pattern match failed: {E.to_str(plo)}",
                        hint="compute_at covers regions indexed by a block var, a var times "
                             "a factor or a // of one")


def _var_times(e):
    if isinstance(e, E.BinaryOp) and e.op == "Mul":
        if isinstance(e.a, E.Var) and not isinstance(e.b, E.Var):
            return e.a.name, e.b
        if isinstance(e.b, E.Var) and not isinstance(e.a, E.Var):
            return e.b.name, e.a
    return None


# ----------------------------------------------------------------------------- simplifying

def tidy(e, ranges: dict):
    """``e`` simplified as TVM's analyzer leaves a bound: ``(c * x + r) // (c * m)`` is
    ``x // m`` for ``0 <= r < c``, and an expression of one loop var with a few values that
    are constant or step evenly is that constant or ``v * step + first``."""
    e = tvm_order(_fold_scaled_div(pin_unit(e, ranges)))
    free = E.free_vars(e)
    if len(free) != 1 or free[0].name not in ranges or not _is_int(e) or not _has_div(e):
        return e
    var = free[0]
    lo, hi = (E.as_int(x) for x in ranges[var.name])
    if lo is None or hi is None or not 0 < hi - lo < 64:
        return e
    try:
        values = [E.as_int(E.substitute(e, {var.name: E.IntImm(v, var.dtype)}))
                  for v in range(lo, hi + 1)]
    except Exception:  # noqa: BLE001 - an expression the folder cannot evaluate stays as is
        return e
    if None in values:
        return e
    step = values[1] - values[0]
    if any(b - a != step for a, b in pairwise(values)):
        return e
    first = values[0] - step * lo
    if step == 0:
        return E.IntImm(first, e.dtype)
    from .arith import fold

    return fold("Add", fold("Mul", var, E.IntImm(step, var.dtype)), E.IntImm(first, e.dtype))


def tvm_order(e):
    """A sum with its terms by falling factor, the constant last, as TVM's canonical
    simplifier writes it (``by * 64 + vy * 32 + ty * 4 + i``); msc's own canonical form
    sorts by name."""
    terms, const = signed_terms(e, 1)
    if len(terms) < 2:
        return e
    from .arith import fold

    ordered = sorted(terms, key=lambda t: -t[0])
    out = None
    for scale, term in ordered:
        if out is None:
            out = term if scale > 0 else fold("Mul", term, E.IntImm(-1, term.dtype))
        else:
            out = E.BinaryOp("Add" if scale > 0 else "Sub", out, term)
    if const:
        out = E.BinaryOp("Add" if const > 0 else "Sub", out, E.IntImm(abs(const), e.dtype))
    return out


def signed_terms(e, sign: int) -> tuple[list, int]:
    """[(signed factor, term as written without a negative factor)], constant."""
    if E.as_int(e) is not None:
        return [], sign * E.as_int(e)
    if isinstance(e, E.BinaryOp) and e.op in ("Add", "Sub"):
        a, ka = signed_terms(e.a, sign)
        b, kb = signed_terms(e.b, sign if e.op == "Add" else -sign)
        return a + b, ka + kb
    if isinstance(e, E.BinaryOp) and e.op == "Mul" and E.as_int(e.b) is not None:
        c = E.as_int(e.b)
        if c < 0:
            return [(sign * c, E.BinaryOp("Mul", e.a, E.IntImm(-c, e.dtype)))], 0
        return [(sign * c, e)], 0
    return [(sign, e)], 0


def pin_unit(e, ranges: dict):
    """``e`` with the vars whose range is one value replaced by it (a loop of extent 1)."""
    from .arith import raw_subst

    points = {}
    for v in E.free_vars(e):
        lo, hi = ranges.get(v.name, (None, None))
        if lo is not None and E.as_int(lo) is not None and E.as_int(lo) == E.as_int(hi):
            points[v.name] = E.IntImm(E.as_int(lo), v.dtype)
    return raw_subst(e, points) if points else e


def _has_div(e) -> bool:
    if isinstance(e, E.BinaryOp):
        return e.op in ("FloorDiv", "FloorMod") or _has_div(e.a) or _has_div(e.b)
    return False


def _is_int(e) -> bool:
    return getattr(e, "dtype", "").startswith(("int", "uint"))


def _fold_scaled_div(e):
    if not isinstance(e, E.BinaryOp):
        return e
    a, b = _fold_scaled_div(e.a), _fold_scaled_div(e.b)
    if e.op == "FloorDiv" and E.as_int(b) is not None and E.as_int(b) > 0:
        got = _scaled(a, E.as_int(b))
        if got is not None:
            return got
    return e if (a is e.a and b is e.b) else E.binary(e.op, a, b)


def _scaled(a, d: int):
    """``a // d`` as ``x // (d / c)`` when ``a`` is ``x * c (+ r)``, ``c | d``, ``0 <= r < c``."""
    rest = 0
    if isinstance(a, E.BinaryOp) and a.op == "Add" and E.as_int(a.b) is not None:
        a, rest = a.a, E.as_int(a.b)
    if not (isinstance(a, E.BinaryOp) and a.op == "Mul" and E.as_int(a.b) is not None):
        return None
    c = E.as_int(a.b)
    if c <= 0 or d % c or not 0 <= rest < c:
        return None
    return a.a if d == c else E.floordiv(a.a, E.IntImm(d // c, a.dtype))
