"""The graph's output kinds from a Relax function's ``output_kinds`` attr.

Relax has tuples, no lists: a function whose result fields are ONNX sequences or optionals
says so in ``attrs["output_kinds"]`` (one ``"kind[:element dtype]"`` per result field, set by
from_onnx and from_torch). Each field takes as many of the graph's flat outputs as it has
tensors (msc/graph/outputs.py)::

    func.with_attr("output_kinds", ["tensor", "sequence:float32"])
"""

from __future__ import annotations

from msc.graph import OutputKind
from msc.relax.expr import Function
from msc.relax.struct_info import TupleStructInfo

__all__ = ["output_kinds"]


def _leaves(sinfo) -> int:
    if isinstance(sinfo, TupleStructInfo):
        return sum(_leaves(f) for f in sinfo.fields)
    return 1


def output_kinds(func: Function, n_outputs: int) -> list[OutputKind] | None:
    """The kinds the function declares, None when it declares none or when they do not
    cover the ``n_outputs`` graph outputs (then every output is a tensor)."""
    declared = list(func.attrs.get("output_kinds") or ())
    if not declared:
        return None
    ret = func.ret_struct_info
    if len(declared) == 1:
        fields = [ret]
    elif isinstance(ret, TupleStructInfo) and len(ret.fields) == len(declared):
        fields = list(ret.fields)
    else:
        return None
    kinds = []
    for text, sinfo in zip(declared, fields):
        kind, _, dtype = str(text).partition(":")
        count = _leaves(sinfo) if kind.endswith("sequence") else 1
        kinds.append(OutputKind(kind, count, dtype if kind != "tensor" else ""))
    return kinds if sum(k.count for k in kinds) == n_outputs else None
