"""Axes given as graph inputs (Reduce*, Squeeze, Unsqueeze, Slice, Pad): values known only
at run time, with a static count.

Their values become symbolic dims bound when the graph runs (``Context.runtime_ints``: an
``R.match_cast`` of ``R.tensor_to_shape``), and every dim that depends on them is a PrimExpr
selecting among the input's dims (``T.if_then_else``). The ops themselves keep static axes:

* a reduction over axes ``a`` is a free reshape of ``x`` to interleaved (kept, reduced)
  pairs ``[k0, r0, k1, r1, ...]`` (``k = 1, r = n`` on a reduced dim, ``k = n, r = 1``
  elsewhere: the same element order) and the reduction over the odd axes;
* Squeeze / Unsqueeze are reshapes whose target dims are selected per position;
* Slice and Pad get their per-axis amounts per dim of ``x``, selected by the axes.

The VM sizes these outputs once the dims are bound (plan.py's run-time buffers).
"""

from __future__ import annotations

from functools import reduce as fold

from msc.tir import expr as tir

from .common import call
from .context import Context, OnnxNode

__all__ = ["ReductionView", "axes_at_runtime", "listed", "pick_per_dim", "squeeze_dims",
           "unsqueeze_dims", "wrap"]


def axes_at_runtime(g: Context, node: OnnxNode, axes, rank: int | None) -> list:
    """The axes input's values as symbolic ints, negatives wrapped into ``[0, rank)`` (left
    as they are when ``rank`` is None)."""
    values = g.runtime_ints(axes, "axis")
    if values is None:
        raise node.unsupported("axes must have a static length")
    return values if rank is None else wrap(values, rank)


def wrap(axes: list, rank: int) -> list:
    """Negative axes counted from the end of a rank-``rank`` tensor."""
    return [tir.if_then_else(tir.binary("LT", a, 0), tir.add(a, rank), a) for a in axes]


def listed(axes: list, d: int):
    """Whether dim ``d`` is one of ``axes`` (a bool PrimExpr)."""
    hits = [tir.binary("EQ", a, d) for a in axes]
    return fold(lambda acc, h: tir.binary("Or", acc, h), hits[1:], hits[0])


def _choose(pairs: list, default):
    """``T.if_then_else`` chain: the value of the first true condition, else ``default``."""
    out = tir.convert(default)
    for cond, value in reversed(pairs):
        out = tir.if_then_else(cond, value, out)
    return out


class ReductionView:
    """``x`` viewed for a reduction over axes known at run time: ``view.x`` is reduced over
    the static ``view.axes`` (keepdims=False), then ``view.finish(y, keepdims)``."""

    def __init__(self, g: Context, x, axes: list):
        self.g, dims = g, list(g.shape(x))
        self.hit = [listed(axes, d) for d in range(len(dims))]
        pairs = [(tir.if_then_else(h, 1, n), tir.if_then_else(h, n, 1))
                 for n, h in zip(dims, self.hit)]
        self.dims = dims
        self.x = g.emit(call("reshape", x, [d for pair in pairs for d in pair]))
        self.axes = list(range(1, 2 * len(dims), 2))
        self.rank = len(dims) - len(axes)

    def finish(self, y, keepdims: bool):
        if keepdims:
            return y
        return self.g.emit(call("reshape", y, squeeze_dims(self.dims, self.hit, self.rank)))


def squeeze_dims(dims: list, hit: list, rank: int) -> list:
    """The dims of ``dims`` whose ``hit`` is false, in order (``rank`` of them)."""
    before = [fold(tir.add, [tir.if_then_else(h, 0, 1) for h in hit[:d]], tir.convert(0))
              for d in range(len(dims))]
    return [_choose([(tir.binary("And", _not(h), tir.binary("EQ", b, j)), n)
                     for n, h, b in zip(dims, hit, before)], 1) for j in range(rank)]


def _not(cond):
    return tir.convert(not cond.value) if cond.is_const else tir.Not(cond)


def unsqueeze_dims(dims: list, axes: list) -> list:
    """The dims of ``x`` with 1s inserted at ``axes`` (positions in the output)."""
    rank = len(dims) + len(axes)
    out = []
    for j in range(rank):
        inserted = fold(tir.add, [tir.if_then_else(tir.binary("LT", a, j), 1, 0)
                                  for a in axes], tir.convert(0))
        source = tir.sub(j, inserted)  # the input dim at output position j
        pick = _choose([(tir.binary("EQ", source, k), n) for k, n in enumerate(dims)], 1)
        out.append(tir.if_then_else(listed(axes, j), 1, pick))
    return out


def pick_per_dim(axes: list, values: list, rank: int, default) -> list:
    """Per dim of a rank-``rank`` tensor: the value given for its axis, else ``default``."""
    return [_choose([(tir.binary("EQ", a, d), v) for a, v in zip(axes, values)], default)
            for d in range(rank)]
