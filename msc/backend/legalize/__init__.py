"""Legalization rules: Relax op calls -> TIR PrimFuncs (TVM's ``LegalizeOps`` rules).

Each family module attaches ``fn(call) -> PrimFunc`` to its ops as the op fact
``"legalize"``; the PrimFunc's params are the call's tensor arguments (tuples flattened), then
its outputs. Rules are written with the small builder in :mod:`.te`::

    from msc.backend.legalize import legalize_call
    func = legalize_call(call)          # None when the op has no rule / the shapes are unknown
"""

from __future__ import annotations

from ...errors import MSCError
from ...relax.expr import Call, Var
from ...relax.op.registry import OPS, Op
from ...relax.struct_info import TensorStructInfo, TupleStructInfo
from . import (  # noqa: F401 - importing attaches the rules
    attention,
    create,
    elementwise,
    image,
    index,
    linalg,
    loss,
    manipulate,
    norm,
    pool,
    reduce,
    sort,
)
from .common import RULES

__all__ = ["RULES", "legalize_call", "legalized_ops", "tir_kernel"]


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


def tir_kernel(op: str, attrs, arg_sinfos, out_sinfo, *, jit=None):
    """The compiled legalization of a call to ``op`` with these argument / output struct infos
    (non-tensor args carry their values in their struct info), or None when the op has no rule
    or this call cannot be legalized::

        k = tir_kernel("nn.softmax", Attrs({"axis": -1}), [x_sinfo], out_sinfo)
        k(x, out)
    """
    from ..lowering.compile import TIRKernel, compile_prim_func  # loads llvmlite: on first use

    if op.removeprefix("relax.") not in OPS:
        return None
    args = [Var(f"arg{i}", s) for i, s in enumerate(arg_sinfos)]
    call = Call(Op.get(op), args, attrs)
    call._set_struct_info(out_sinfo)
    func = legalize_call(call)
    if func is None:
        return None
    inputs = tuple(i for i, s in enumerate(arg_sinfos)
                   if isinstance(s, (TensorStructInfo, TupleStructInfo)))
    outs = out_sinfo.fields if isinstance(out_sinfo, TupleStructInfo) else (out_sinfo,)
    return TIRKernel(compile_prim_func(func, jit=jit), inputs, tuple(outs))
