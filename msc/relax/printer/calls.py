"""The generic call form ``R.<op>(args, attr=value, out_ty=...)``: where a call's
struct-info arguments go and which args print as keywords, read from the op table.
The parser reads the same facts to take the text back."""

from __future__ import annotations

import inspect

from ..expr import Call
from ..struct_info import TupleStructInfo
from .sinfo import sinfo_to_str

__all__ = ["SINFO_KEYWORDS", "is_dps_call", "keyword_only_args", "sinfo_args_text",
           "sinfo_keyword"]

# Builder parameter names that carry a call's sinfo_args -> TVM 0.27's keyword for them.
SINFO_KEYWORDS = {"out_sinfo": "out_ty", "out_ty": "out_ty", "sinfo_args": "ty_args",
                  "ty_args": "ty_args"}


def sinfo_keyword(op_def) -> tuple[str, int | None]:
    """(keyword, position) for a call's sinfo_args: the op table's ``facts["sinfo_kw"]``
    (``out_ty`` for call_tir & co, else ``ty_args``). For ``out_ty`` the position is where
    the builder takes it: later args print as keywords (``tir_vars=``), as TVM does."""
    keyword = op_def.facts.get("sinfo_kw", "ty_args")
    if keyword != "out_ty" or op_def.builder is None:
        return keyword, None
    try:
        names = list(inspect.signature(op_def.builder).parameters)
    except (TypeError, ValueError):
        return keyword, None
    for i, name in enumerate(names):
        if SINFO_KEYWORDS.get(name) == "out_ty":
            return keyword, i
    return keyword, None


def keyword_only_args(op_def) -> set:
    """Op args the op's builder takes by keyword only (``R.print(x, format=...)``)."""
    if op_def.builder is None:
        return set()
    try:
        params = inspect.signature(op_def.builder).parameters.values()
    except (TypeError, ValueError):
        return set()
    arg_names = {a.name for a in op_def.args}
    return {p.name for p in params if p.kind is p.KEYWORD_ONLY and p.name in arg_names}


def sinfo_args_text(call: Call, keyword: str) -> str:
    if keyword == "out_ty":
        sinfo = call.sinfo_args[0]
        if isinstance(sinfo, TupleStructInfo) and len(call.sinfo_args) == 1:
            return "[" + ", ".join(sinfo_to_str(f) for f in sinfo.fields) + "]"
        return sinfo_to_str(sinfo)
    texts = [sinfo_to_str(s) for s in call.sinfo_args]
    return "(" + ", ".join(texts) + ("," if len(texts) == 1 else "") + ")"


def is_dps_call(call) -> bool:
    """Calls whose result struct info is printed in ``out_ty`` (no binding annotation)."""
    op_def = getattr(call.op, "op_def", None) if isinstance(call, Call) else None
    return op_def is not None and bool(call.sinfo_args) and sinfo_keyword(op_def)[0] == "out_ty"

