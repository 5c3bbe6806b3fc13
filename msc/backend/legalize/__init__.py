"""Legalization rules: Relax op calls -> TIR PrimFuncs (TVM's ``LegalizeOps`` rules).

Each family module attaches ``fn(call) -> PrimFunc`` to its ops as the op fact
``"legalize"``; the PrimFunc's params are the call's tensor arguments (tuples flattened), then
its outputs. Rules are written with the small builder in :mod:`.te`::

    from msc.backend.legalize import legalize_call
    func = legalize_call(call)          # None when the op has no rule / the shapes are unknown
"""

from __future__ import annotations

from ...errors import MSCError
from ...relax.op.registry import Op
from . import (  # noqa: F401 - importing attaches the rules
    create,
    elementwise,
    extra,
    image,
    index,
    linalg,
    manipulate,
    norm,
    pool,
    reduce,
    scatter,
    sort,
)
from .common import RULES

__all__ = ["RULES", "legalize_call", "legalized_ops"]


def legalize_call(call, rules: dict | None = None):
    """The PrimFunc of ``call`` (a normalized Relax Call to an op), or None when the op has
    no rule or this call cannot be legalized (unknown shapes, unsupported attrs)."""
    if not isinstance(call.op, Op):
        return None
    name = call.op.name.removeprefix("relax.")
    fn = (rules or {}).get(name) or call.op.op_def.facts.get("legalize")
    if fn is None:
        return None
    try:
        return fn(call)
    except MSCError:  # unsupported attrs / layouts / shapes: the op stays as it is
        return None


def legalized_ops() -> list[str]:
    """Names of the ops that have a legalization rule."""
    return sorted(RULES)
