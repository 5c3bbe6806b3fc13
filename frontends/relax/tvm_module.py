"""A ``tvm.IRModule`` as an msc IRModule, through its printed TVMScript.

TVM prints tensor constants as ``metadata["<key>"][i]`` and cannot print the metadata itself
(``show_meta=True`` crashes TVM 0.27), so the constants come from the TVM objects: the printer
numbers each distinct non-scalar constant in the order it prints them (functions in printed
order, bindings in order, arguments left to right); scalars are printed inline. The constants
are collected in that order and handed to the parser as the metadata, and the order is then
verified: walking the parsed module the same way must meet them in the same order, so a
misnumbered constant cannot go unnoticed::

    mod = from_tvm_module(tvm_mod)       # tvm is only imported by the caller
"""

from __future__ import annotations

import re

from msc.errors import ValidationError
from msc.relax import IRModule, from_script

__all__ = ["from_tvm_module"]

_FUNC_DEF = re.compile(r"^    def (\w+)\(", re.MULTILINE)
_META_KEY = re.compile(r"""metadata\[["']([\w.]+)["']\]""")
_TENSOR_KEY = "ffi.Tensor"

# Node type name -> the fields the printer prints, in order (both for TVM and msc objects).
_FIELDS = {
    "Call": ("args",),
    "Tuple": ("fields",),
    "TupleGetItem": ("tuple_value",),
    "If": ("cond", "true_branch", "false_branch"),
    "SeqExpr": ("blocks", "body"),
    "Function": ("body",),
    "VarBinding": ("value",),
    "MatchCast": ("value",),
    "BindingBlock": ("bindings",),
    "DataflowBlock": ("bindings",),
}


def _is_constant(obj) -> bool:
    return type(obj).__name__ in ("Constant", "GenericConst")


def _payload(const):
    """The tensor behind a constant: msc's numpy ``data``, TVM 0.27's ``value``."""
    data = getattr(const, "data", None)
    return const.value if data is None else data


def _ndim(const) -> int:
    return len(tuple(_payload(const).shape))


def _to_numpy(const):
    data = _payload(const)
    return data.numpy() if hasattr(data, "numpy") else data


class _Seen:
    """A set of objects by identity; TVM wrappers of one object hash alike and are
    ``same_as`` each other."""

    def __init__(self):
        self._by_hash: dict = {}

    def add(self, obj) -> bool:
        """Add ``obj``; False when it was already there."""
        bucket = self._by_hash.setdefault(hash(obj), [])
        same = getattr(obj, "same_as", None)
        if any(o is obj or (same is not None and same(o)) for o in bucket):
            return False
        bucket.append(obj)
        return True


def _walk_constants(expr, found: list, seen: _Seen) -> None:
    """Distinct non-scalar constants of ``expr`` in printing order."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, (list, tuple)) or type(node).__name__ == "Array":
            stack.extend(reversed(list(node)))
            continue
        if _is_constant(node):
            if _ndim(node) > 0 and seen.add(node):
                found.append(node)
            continue
        for name in reversed(_FIELDS.get(type(node).__name__, ())):
            stack.append(getattr(node, name))


def _printed_functions(text: str, names) -> list[str]:
    order = [n for n in _FUNC_DEF.findall(text) if n in names]
    return order + [n for n in names if n not in order]


def _constants(functions: dict, order: list[str]) -> list:
    found: list = []
    seen = _Seen()
    for name in order:
        if type(functions[name]).__name__ == "Function":
            _walk_constants(functions[name], found, seen)
    return found


def from_tvm_module(tvm_mod) -> IRModule:
    """Convert a ``tvm.IRModule`` (Relax functions; TIR functions as the parser allows)."""
    text = tvm_mod.script()
    tvm_funcs = {gv.name_hint: f for gv, f in tvm_mod.functions.items()}
    order = _printed_functions(text, list(tvm_funcs))
    arrays = [_to_numpy(c) for c in _constants(tvm_funcs, order)]
    keys = set(_META_KEY.findall(text)) - {_TENSOR_KEY}
    if len(keys) > 1:
        raise ValidationError(f"the printed module references metadata {sorted(keys)}; only "
                              "constants can be recovered from a tvm.IRModule")
    metadata = {keys.pop(): arrays} if keys else None
    tensors = _attr_tensors(tvm_funcs, order)
    mod = from_script(text, metadata={**(metadata or {}), **tensors} or None)
    if not isinstance(mod, IRModule):
        mod = IRModule({"main": mod})
    _verify(mod, order, metadata)
    return mod


def _attr_tensors(functions: dict, order: list[str]) -> dict:
    """Tensors in function attributes (``"params"``), printed as ``metadata["ffi.Tensor"][i]``
    in function order."""
    found = [t.numpy() for name in order
             for t in (getattr(functions[name], "attrs", None) or {}).get("params", [])]
    return {_TENSOR_KEY: found} if found else {}


def _verify(mod: IRModule, order: list[str], metadata: dict | None) -> None:
    """The parsed module meets the recovered constants in exactly the order given."""
    given = next(iter(metadata.values())) if metadata else []
    funcs = {gv.name_hint: f for gv, f in mod.functions.items()}
    met = _constants(funcs, [n for n in order if n in funcs])
    met_data = [c.data for c in met]
    if len(met_data) != len(given) or any(
            a is not b and not (a.shape == b.shape and a.dtype == b.dtype and
                                (a == b).all()) for a, b in zip(met_data, given)):
        raise ValidationError(
            "could not match the constants of the tvm.IRModule to its printed metadata "
            f"indices ({len(given)} recovered, {len(met_data)} referenced)",
            hint="bind the constants as params instead (relax.frontend.detach_params) and "
                 "pass them to from_relax(mod, params)")
