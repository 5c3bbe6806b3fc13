"""Symbolic dims as source: a tensor's prims (conventions 1.3) written as expressions of the
inputs' shapes, in the Relax or the torch script's spelling."""

from __future__ import annotations

from collections.abc import Callable

from msc.errors import UnsupportedOpError, ValidationError
from msc.graph import MSCGraph, MSCTensor

__all__ = ["PrimRenderer"]

# Prim optype -> (relax template, torch template); binary ops not listed use Python operators.
_PRIM_OPS = {
    "Add": ("({0} + {1})",) * 2, "Sub": ("({0} - {1})",) * 2, "Mul": ("({0} * {1})",) * 2,
    "FloorDiv": ("({0} // {1})",) * 2, "FloorMod": ("({0} % {1})",) * 2,
    "Div": ("tir.truncdiv({0}, {1})", "int({0} / {1})"),
    "Mod": ("tir.truncmod({0}, {1})", "int(math.fmod({0}, {1}))"),
    "Min": ("tir.min({0}, {1})", "min({0}, {1})"), "Max": ("tir.max({0}, {1})", "max({0}, {1})"),
    "if_then_else": ("tir.if_then_else({0}, {1}, {2})", "({1} if {0} else {2})"),
    "Not": ("tir.Not({0})", "(not {0})"),
}
_COMPARE = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">=",
            "And": "and", "Or": "or"}
for _key, _op in _COMPARE.items():
    _PRIM_OPS[_key] = (f'tir.binary("{_key}", {{0}}, {{1}})', f"({{0}} {_op} {{1}})")


class PrimRenderer:
    """Prims as source expressions of the inputs' shapes (conventions 1.3).

    ``shape_ref(input_node_name, out_idx, dim)`` gives the source of one input dim, e.g.
    ``"inp_0.shape[0]"``; ``style`` is ``"relax"`` or ``"torch"``."""

    def __init__(self, graph: MSCGraph, shape_ref: Callable[[str, int, int], str], style: str):
        self.graph, self.shape_ref = graph, shape_ref
        self.column = 0 if style == "relax" else 1

    def prim(self, name: str) -> str:
        prim = self.graph.find_prim(name)
        attrs = prim.attrs
        if prim.optype == "shape":
            return self.shape_ref(attrs["producer"], int(attrs.get("out_idx", "0")),
                                  int(attrs["dim"]))
        if prim.optype == "Int":
            return str(int(attrs["value"]))
        if prim.optype not in _PRIM_OPS:
            raise UnsupportedOpError(f"shape prim {name!r} of optype {prim.optype!r} cannot "
                                     "be written as source", hint="supported: shape, Int, "
                                     + ", ".join(_PRIM_OPS))
        args = [self.prim(p.name) for p in prim.parents]
        return _PRIM_OPS[prim.optype][self.column].format(*args)

    def dim(self, tensor: MSCTensor, i: int):
        """One dim: an int, or the source of its prim expression."""
        prims = tensor.prims
        if prims and not prims[i].lstrip("-").isdigit():
            return self.prim(prims[i])
        value = int(prims[i]) if prims else tensor.shape[i]
        if value < 0:
            raise ValidationError(f"dim {i} is dynamic but has no prim", tensor=tensor.name,
                                  hint="give the tensor prims (conventions 1.9)")
        return value

    def dims(self, tensor: MSCTensor) -> list:
        return [self.dim(tensor, i) for i in range(tensor.ndim)]

    @staticmethod
    def source(dims: list) -> str:
        """``[1, inp_0.shape[0]]`` as source (prim expressions are already source)."""
        return "[" + ", ".join(str(d) for d in dims) + "]"
