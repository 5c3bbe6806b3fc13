"""Linear algebra: matmul (numpy semantics, batched broadcasting), einsum, outer, det."""

from __future__ import annotations

from .infer import (
    broadcast_dims,
    common_dtype,
    dims_str,
    provably_differ,
    result_dtype,
    tensor,
    unknown,
)
from .registry import Arg, AttrDef, register


def matmul_infer(ctx):
    a, b = ctx.tensor(0), ctx.tensor(1)
    dtype = result_dtype(ctx, [a, b], ctx.attrs.out_dtype)
    for i, s in enumerate((a, b)):
        if s.ndim == 0:
            raise ctx.error("operands must not be scalars (rank 0)", i,
                            hint="use R.multiply to scale by a scalar")
    if a.ndim < 0 or b.ndim < 0:
        return unknown(dtype)
    if a.values is None or b.values is None:
        batch = max(a.ndim - 2, b.ndim - 2, 0)
        return unknown(dtype, batch + (a.ndim > 1) + (b.ndim > 1))
    # numpy: a 1-D lhs is a row (1, k), a 1-D rhs a column (k, 1); those dims are dropped.
    lhs = a.values if a.ndim > 1 else (1, *a.values)
    rhs = b.values if b.ndim > 1 else (*b.values, 1)
    if provably_differ(lhs[-1], rhs[-2]):
        raise ctx.error(f"inner dims differ: {dims_str(a.values)} @ {dims_str(b.values)} "
                        f"reduces {lhs[-1]} against {rhs[-2]}", 1,
                        hint="the last dim of x1 must equal the second-to-last dim of x2")
    batch = broadcast_dims(ctx, lhs[:-2], rhs[:-2])
    rows = [lhs[-2]] if a.ndim > 1 else []
    cols = [rhs[-1]] if b.ndim > 1 else []
    return tensor(batch + rows + cols, dtype)


def outer_infer(ctx):
    a, b = ctx.tensor(0), ctx.tensor(1)
    dtype = common_dtype(ctx, [a, b])
    for i, s in enumerate((a, b)):
        if s.ndim not in (-1, 1):
            raise ctx.error(f"needs a 1-D tensor, got rank {s.ndim}", i)
    if a.values is None or b.values is None:
        return unknown(dtype, 2)
    return tensor([a.values[0], b.values[0]], dtype)


# --------------------------------------------------------------------------------------------
# einsum

_ELLIPSIS = "."  # "..." is tokenized to this one character


def einsum_infer(ctx):
    operands = ctx.tensors(0)
    dtype = common_dtype(ctx, operands)
    terms, output = parse_subscripts(ctx, ctx.attrs.subscripts, len(operands))
    if any(o.values is None for o in operands):
        return unknown(dtype, -1 if _ELLIPSIS in output else len(output))
    letters, ellipsis = {}, []
    for k, (term, operand) in enumerate(zip(terms, operands)):
        for label, dim in _term_dims(ctx, term, operand.values, k):
            if label == _ELLIPSIS:
                ellipsis = broadcast_dims(ctx, ellipsis, dim)
            else:
                letters[label] = _merge_label(ctx, label, letters.get(label), dim)
    out = []
    for label in output:
        out.extend(ellipsis if label == _ELLIPSIS else [letters[label]])
    return tensor(out, dtype)


def parse_subscripts(ctx, subscripts: str, count: int) -> tuple[list[str], str]:
    """"ij,jk->ik" -> (["ij", "jk"], "ik"); "..." becomes one "." ; implicit outputs are the
    ellipsis then the letters used once, sorted (numpy's rule)."""
    text = subscripts.replace(" ", "").replace("...", _ELLIPSIS)
    lhs, arrow, rhs = text.partition("->")
    terms = lhs.split(",")
    if len(terms) != count:
        raise ctx.error(f"subscripts {subscripts!r} name {len(terms)} operands, but {count} "
                        "were given", 0)
    for term in [*terms, rhs]:
        if term.count(_ELLIPSIS) > 1 or not all(c.isalpha() or c == _ELLIPSIS for c in term):
            raise ctx.error(f"bad subscripts {subscripts!r}", 0, hint="use letters, ',', '->' "
                            "and at most one '...' per operand, e.g. 'bij,bjk->bik'")
    if not arrow:
        once = sorted(c for c in set(lhs) if c.isalpha() and lhs.count(c) == 1)
        rhs = (_ELLIPSIS if _ELLIPSIS in lhs else "") + "".join(once)
    missing = set(rhs) - set(lhs)
    if missing:
        raise ctx.error(f"output labels {sorted(missing)} of {subscripts!r} are not in any "
                        "input", 0)
    return terms, rhs


def _term_dims(ctx, term: str, values: tuple, k: int) -> list:
    """(label, dim) pairs of one operand; the ellipsis label pairs with the dims it covers."""
    n_letters = len(term) - term.count(_ELLIPSIS)
    if len(values) < n_letters or (_ELLIPSIS not in term and len(values) != n_letters):
        raise ctx.error(f"operand {k} has rank {len(values)} but subscripts {term!r} need "
                        f"{n_letters}", 0)
    cut = term.find(_ELLIPSIS)
    if cut < 0:
        return list(zip(term, values))
    tail = len(values) - (len(term) - cut - 1)
    return [*zip(term[:cut], values[:cut]), (_ELLIPSIS, list(values[cut:tail])),
            *zip(term[cut + 1:], values[tail:])]


def _merge_label(ctx, label: str, seen, dim):
    if seen is None or seen == 1:
        return dim
    if dim != 1 and provably_differ(seen, dim):
        raise ctx.error(f"label {label!r} has dims {seen} and {dim}", 0,
                        hint="every use of one subscript letter needs the same length")
    return seen


register("matmul", [Arg("x1"), Arg("x2")], [AttrDef("out_dtype", "dtype", None)],
         infer=matmul_infer, family="linalg")
def det_infer(ctx):
    """Determinants of the trailing square matrices: [..., M, M] -> [...]."""
    x = ctx.tensor(0)
    if x.ndim != -1 and x.ndim < 2:
        raise ctx.error(f"needs [..., M, M], got rank {x.ndim}", 0, hint="pass square matrices")
    if x.values is None:
        return unknown(x.dtype, -1 if x.ndim == -1 else x.ndim - 2)
    if provably_differ(x.values[-1], x.values[-2]):
        raise ctx.error(f"needs square matrices, got {dims_str(x.values)}", 0)
    return tensor(x.values[:-2], x.dtype)


register("det", [Arg("x")], infer=det_infer, family="linalg", float_only=True)
register("outer", [Arg("x1"), Arg("x2")], infer=outer_infer, family="linalg")
register("einsum", [Arg("operands", "tensors")], [AttrDef("subscripts", "str")],
         infer=einsum_infer, family="linalg")
