"""Epilogues: elementwise ops that a kernel with a per-channel epilogue can absorb.

Entries: ``("bias", b[C])`` adds, ``("scale", s[C])`` multiplies (weights and bias so far),
``("relu",)``, ``("clip6",)`` or ``("clip", hi)`` after a relu (``clip(x, 0, 6)``, relu6, or
another bound: only kernels that list them; the direct and pixel convs take relu6, the
depthwise windows any bound), ``("residual", value id)`` adds a run-time tensor of the output's shape (a
ResNet block's shortcut; only kernels that list it, and only a relu may follow it). The build's fusion step asks :func:`epilogue_entries` whether a consumer call
folds into the kernel of its producer (conv / matmul + bias + relu is one call).
"""

from __future__ import annotations

import numpy as np

from ...relax.expr import Attrs
from ...relax.struct_info import TensorStructInfo
from .base import Site, kernel_fact

__all__ = ["EPILOGUE_OPS", "epilogue_entries", "upper_bound"]


def _channel_const(values: list, producer_out: int, axis: int, rank: int) -> np.ndarray | None:
    """The constant operand of a binary op as a per-channel vector [C] (or [1]), or None."""
    other = [v for v in values if v.id != producer_out]
    if len(other) != 1 or not isinstance(other[0].const, np.ndarray):
        return None
    c = other[0].const
    if c.ndim > rank or c.dtype != np.float32:
        return None
    full = (1,) * (rank - c.ndim) + c.shape
    if any(d != 1 for k, d in enumerate(full) if k != axis):
        return None
    return np.ascontiguousarray(c.reshape(-1), np.float32)


def _add_rule(values, attrs, producer_out, axis, rank):
    c = _channel_const(values, producer_out, axis, rank)
    return None if c is None else [("bias", c)]


def _subtract_rule(values, attrs, producer_out, axis, rank):
    c = _channel_const(values, producer_out, axis, rank)
    return None if c is None or values[0].id != producer_out else [("bias", -c)]


def _multiply_rule(values, attrs, producer_out, axis, rank):
    c = _channel_const(values, producer_out, axis, rank)
    return None if c is None else [("scale", c)]


def _divide_rule(values, attrs, producer_out, axis, rank):
    c = _channel_const(values, producer_out, axis, rank)
    if c is None or values[0].id != producer_out or not np.all(c):
        return None
    return [("scale", (1.0 / c.astype(np.float64)).astype(np.float32))]


def _bias_add_rule(values, attrs, producer_out, axis, rank):
    """nn.bias_add: a 1-D bias along ``attrs.axis`` (not numpy broadcasting)."""
    c = values[1].const
    ok = (values[0].id == producer_out and int(attrs.get("axis", 1)) % rank == axis
          and isinstance(c, np.ndarray) and c.ndim == 1 and c.dtype == np.float32)
    return [("bias", np.ascontiguousarray(c))] if ok else None


def _batch_norm_rule(values, attrs, producer_out, axis, rank):
    """Inference batch_norm with constant statistics: y * s + t per channel."""
    stats = [v.const for v in values[1:5]]
    if (values[0].id != producer_out or attrs.get("training", True)
            or int(attrs.get("axis", 1)) % rank != axis
            or not all(isinstance(a, np.ndarray) and a.ndim == 1 for a in stats)):
        return None
    gamma, beta, mean, var = (a.astype(np.float64) for a in stats)
    s = 1.0 / np.sqrt(var + float(attrs.get("epsilon", 1e-5)))
    if attrs.get("scale", True):
        s = s * gamma
    t = -mean * s + (beta if attrs.get("center", True) else 0.0)
    return [("scale", s.astype(np.float32)), ("bias", t.astype(np.float32))]


def _relu_rule(values, attrs, producer_out, axis, rank):
    return [("relu",)]


def _clip_rule(values, attrs, producer_out, axis, rank):
    """clip(x, 0, hi) with constant bounds, hi > 0 (relu6): relu, then the upper clamp."""
    if len(values) != 3 or values[0].id != producer_out:
        return None
    lo, hi = values[1].const, values[2].const
    if not all(isinstance(v, float) for v in (lo, hi)) or lo != 0.0 or not 0.0 < hi < np.inf:
        return None
    return [("relu",), ("clip6",) if hi == 6.0 else ("clip", hi)]


def upper_bound(epilogue: tuple) -> float:
    """The smallest clip bound of an epilogue (inf when it has none)."""
    return min((6.0 if e[0] == "clip6" else e[1] for e in epilogue
                if e[0] in ("clip", "clip6")), default=float("inf"))


# op -> fn(arg values, attrs, producer value id, channel axis, rank) -> entries or None.
# This backend's fusion rules (what its kernels can fold in), not facts of the ops.
EPILOGUE_OPS = {
    "add": _add_rule,
    "subtract": _subtract_rule,
    "multiply": _multiply_rule,
    "divide": _divide_rule,
    "nn.bias_add": _bias_add_rule,
    "nn.batch_norm": _batch_norm_rule,
    "nn.relu": _relu_rule,
    "clip": _clip_rule,
}


def epilogue_entries(site: Site, op: str, values: list, attrs, producer_out: int):
    """What a consumer call adds to ``site``'s epilogue, or None when it cannot be fused."""
    fact = kernel_fact(site.op)
    rule = EPILOGUE_OPS.get(op)
    if fact is None or rule is None or not isinstance(site.out, TensorStructInfo):
        return None
    axis = fact.channel_axis(site)
    if axis is None or site.out.ndim <= 0:
        return None
    entries = rule(values, attrs if attrs is not None else Attrs(), producer_out, axis,
                   site.out.ndim)
    if entries is None and op == "add":
        entries = _residual(site, values, producer_out)
    if not entries or any(e[0] not in fact.epilogues_for(site) for e in entries):
        return None
    if any(e[0] in ("relu", "clip", "clip6") for e in site.epilogue):
        return None  # nothing runs after the relu (and its clip) in a kernel epilogue
    if any(e[0] == "residual" for e in site.epilogue) and any(e[0] != "relu" for e in entries):
        return None  # the kernel adds the residual after its bias and scale, before the relu
    return tuple(entries)


def _residual(site: Site, values: list, producer_out: int):
    """[("residual", id)] when the add's other operand is a run-time tensor of the output's
    dtype and static shape."""
    other = [v for v in values if v.id != producer_out]
    if len(values) != 2 or len(other) != 1 or isinstance(other[0].const, np.ndarray):
        return None
    mine, theirs = site.out, other[0].sinfo
    if not (isinstance(theirs, TensorStructInfo) and getattr(mine, "is_static", False)
            and theirs.dtype == mine.dtype and theirs.values == mine.values):
        return None
    return [("residual", other[0].id)]

