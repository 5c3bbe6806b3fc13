"""Layout strings: MSC's LayoutUtils (expand, reduce, permute a layout) and InferReshapeAxes.

A layout is a string of axis letters (``"NCHW"``; ``""`` = unknown)::

    expand_layout("AB", [1, 2])                   # "ACDB"  (sum(x, (2, 1)) backward)
    infer_reshape_axes([1, 2048, 1, 1], [1, 2048], batch_dim=0)   # ([], [1, 2])
"""

from __future__ import annotations

from collections.abc import Iterable

from msc.relax import arith
from msc.tir import expr as tir

__all__ = ["MATMUL_DEFAULTS", "NORM_DEFAULTS", "PREFERRED", "RuleFailed", "as_list",
           "expand_layout", "get_index", "infer_reshape_axes", "initial_layout",
           "permute_layout", "reduce_layout"]


class RuleFailed(Exception):
    """A rule cannot decide for this call (MSC: the rule returns nothing or throws)."""


PREFERRED = "NCHWD"
NORM_DEFAULTS = {4: "NCHW", 3: "NCD"}
MATMUL_DEFAULTS = {4: "NCHW", 3: "NCD", 2: "NC"}


def initial_layout(ndim: int) -> str:
    """Relax's generic layout of a rank: ``"ABCD"`` for 4."""
    return "".join(chr(ord("A") + i) for i in range(max(ndim, 0)))


def expand_layout(layout: str, axes: Iterable[int]) -> str:
    """Insert a new letter at each axis (ascending). A layout that is a prefix of N,C,H,W,D
    grows with the next of these; any other takes the first unused letter from ``A``."""
    if not layout:
        return layout
    letters, used = list(layout), set(layout)
    for axis in sorted(axes):
        if not 0 <= axis <= len(letters):
            raise RuleFailed(f"cannot insert an axis at {axis} into {layout!r}")
        letter = _new_letter(used)
        used.add(letter)
        letters.insert(axis, letter)
    return "".join(letters)


def _new_letter(used: set) -> str:
    count = len(used)
    if count < len(PREFERRED) and used == set(PREFERRED[:count]):
        return PREFERRED[count]
    letter = "A"
    while letter in used:
        letter = chr(ord(letter) + 1)
    return letter


def reduce_layout(layout: str, axes: Iterable[int]) -> str:
    """Drop the letters at ``axes``."""
    drop = set(axes)
    return "".join(c for i, c in enumerate(layout) if i not in drop)


def permute_layout(layout: str, axes: Iterable[int]) -> str:
    try:
        return "".join(layout[a] for a in axes)
    except IndexError:
        raise RuleFailed(f"axes {list(axes)} do not fit layout {layout!r}") from None


def get_index(axis: int, size: int) -> int:
    """MSC's CommonUtils::GetIndex: a negative index counts from ``size``."""
    return axis + size if axis < 0 else axis


def as_list(value) -> list:
    return [value] if isinstance(value, int) else list(value)


# --------------------------------------------------------------------------------------------
# InferReshapeAxes: which axes a reshape inserts (expand) and which it merges away (reduce).
# Dims are msc.tir expressions (plain ints are converted), so symbolic dims take part: runs
# match when their tir products are equal (msc.tir keeps products canonical, ``bz * 16``
# equals ``16 * bz``), and a run grows only while the order of the two products is provable.
# Two integers compare; a symbolic product has no provable order against anything it does not
# equal (a shape var may be 0 or 1), so MSC stops there: TVM's test_graph_build expects no
# layout for dynamic masked_scatter ([2, dim] -> [2 * dim]), stack ([3 * bz, ...] ->
# [3, bz, ...]) and the 2-D embedding ([vocab, 5] -> [vocab * 5]).

def _is_smaller(a: tir.PrimExpr, b: tir.PrimExpr) -> bool | None:
    """Whether the run with product ``a`` must grow before it can equal ``b``; None when
    that is not provable (a symbolic product on either side)."""
    if isinstance(a, tir.IntImm) and isinstance(b, tir.IntImm):
        return a.value < b.value
    return None


def _accumulate_match(src: list, dst: list, s0: int, d0: int):
    """Smallest runs src[s0:s] and dst[d0:d] with equal products, then trailing 1-dims."""
    if s0 >= len(src) or d0 >= len(dst):
        return None
    s, d, s_acc, d_acc = s0, d0, src[s0], dst[d0]
    while s_acc != d_acc:
        smaller = _is_smaller(d_acc, s_acc)
        if smaller is None:
            return None
        if smaller:
            d += 1
            if d >= len(dst):
                return None
            d_acc = tir.mul(d_acc, dst[d])
        else:
            s += 1
            if s >= len(src):
                return None
            s_acc = tir.mul(s_acc, src[s])
    while s < len(src) - 1 and src[s + 1] == 1:
        s += 1
    while d < len(dst) - 1 and dst[d + 1] == 1:
        d += 1
    return s - s0, d - d0


def infer_reshape_axes(in_shape: list, out_shape: list, batch_dim: int = -1):
    """``(expand_axes, reduce_axes)`` of a reshape, matching runs of equal products left to
    right; the leading axes of a merged run are the ones deleted or inserted, and the batch
    axis is protected by shifting to the next axis. ``([], [])`` when nothing matches.
    Dims may be ints or msc.tir expressions (symbolic dims match equal symbolic dims)."""
    # Simplified first: TVM writes reshape targets as T.max(bz, 0), which is bz.
    in_shape = [arith.simplify(tir.convert(d)) for d in in_shape]
    out_shape = [arith.simplify(tir.convert(d)) for d in out_shape]
    expand, reduce, s0 = [], [], 0
    while s0 < len(in_shape):
        d0 = s0 + len(expand) - len(reduce)
        match = _accumulate_match(in_shape, out_shape, s0, d0)
        if match is None:
            return [], []
        s_dist, d_dist = match
        start, target = (d0, expand) if d_dist >= s_dist else (s0, reduce)
        for i in range(abs(d_dist - s_dist)):
            target.append(start + i + 1 if start + i == batch_dim else start + i)
        s0 += s_dist + 1
    if len(in_shape) + len(expand) - len(reduce) != len(out_shape):
        return [], []
    return expand, reduce
