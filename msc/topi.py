"""``tvm.topi`` for msc: operator compute definitions as tensor expressions (``msc.te``).

The reductions msc's TE expresses: ``sum``, ``max`` and ``min`` over axes, with TOPI's
``axis`` / ``keepdims`` arguments; ``te.create_prim_func`` turns them into TensorIR::

    from msc import te, topi
    A = te.placeholder((4, 8), "float32", name="A")
    func = te.create_prim_func([A, topi.sum(A, axis=1)])     # a reduction block, with init

Index-returning reductions (``argmax`` / ``argmin``) need tuple reducers, which msc's TE does
not have: they are not here.
"""

from __future__ import annotations

import builtins

from . import te
from .errors import ValidationError

__all__ = ["max", "min", "sum"]


def _axes(ndim: int, axis, name: str) -> list[int]:
    if axis is None:
        return list(range(ndim))
    items = [axis] if isinstance(axis, int) else list(axis)
    out = []
    for a in items:
        if not -ndim <= a < ndim:
            raise ValidationError(f"topi.{name}: axis {a} is out of range for {ndim} dims",
                                  key=name)
        out.append(a % ndim)
    return sorted(set(out))


def _reduce(data: te.Tensor, axis, keepdims: bool, name: str, reducer):
    ndim = len(data.shape)
    axes = _axes(ndim, axis, name)
    ks = {a: te.reduce_axis((0, data.shape[a]), f"k{a}") for a in axes}
    shape = [1 if a in ks else d for a, d in enumerate(data.shape) if keepdims or a not in ks]

    def body(*idx):
        it = iter(idx)
        index = []
        for a in range(ndim):
            if a in ks:
                if keepdims:
                    next(it)
                index.append(ks[a])
            else:
                index.append(next(it))
        return reducer(data[tuple(index)], axis=list(ks.values()))

    return te.compute(tuple(shape), body, name=f"{data.name}_red")


def sum(data: te.Tensor, axis=None, keepdims: bool = False) -> te.Tensor:
    """The sum over ``axis`` (all axes when None)."""
    return _reduce(data, axis, keepdims, "sum", te.sum)


def max(data: te.Tensor, axis=None, keepdims: bool = False) -> te.Tensor:
    """The maximum over ``axis``."""
    return _reduce(data, axis, keepdims, "max", te.max)


def min(data: te.Tensor, axis=None, keepdims: bool = False) -> te.Tensor:
    """The minimum over ``axis``."""
    return _reduce(data, axis, keepdims, "min", te.min)


_ = builtins  # the reductions shadow the builtins on purpose, as TVM's topi does
