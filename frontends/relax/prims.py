"""Shape prims: the symbolic dims of a graph as MSCPrim trees (msc-conventions 1.3, 1.9).

A symbolic dim of a function param is a ``shape`` prim named after its tir var (attrs
producer / out_idx / dim). A derived dim becomes a tree whose nodes are named
``UPPER(optype)_<index>``; identical (optype, attrs, parents) nodes are created once::

    table = PrimTable()
    table.add_shape(bz, "inp_0", 0, 0)          # prim "bz"
    table.match(bz * 5)                          # INT_1 (value 5), MUL_2 (bz, INT_1)
    table.dims([bz * 5, 16])                     # ([-1, 16], ["MUL_2", "16"])
"""

from __future__ import annotations

from msc.graph import MSCPrim
from msc.tir import expr as tir

__all__ = ["PrimTable"]


def _prim_attrs(e: tir.PrimExpr) -> dict:
    if isinstance(e, tir.IntImm):
        return {"value": str(e.value)}
    if isinstance(e, tir.FloatImm):
        return {"value": f"{e.value:.6f}"}
    if isinstance(e, tir.Cast):
        return {"dtype": e.dtype}
    return {}


class PrimTable:
    """The prims of one graph, created in order and deduplicated."""

    def __init__(self):
        self.prims: list[MSCPrim] = []
        self._by_expr: dict = {}
        self._by_key: dict = {}

    def add_shape(self, var: tir.Var, producer: str, out_idx: int, dim: int,
                  element: bool = False) -> MSCPrim:
        """The ``shape`` prim of a symbolic dim read from a graph tensor (first one wins);
        ``element``: the value read is element ``dim`` of a shape value (``tensor_to_shape``),
        not a dim of the tensor."""
        if var not in self._by_expr:
            attrs = {"producer": producer, "out_idx": str(out_idx), "dim": str(dim)}
            if element:
                attrs["element"] = "1"
            self._by_expr[var] = self._create(var.name, "shape", attrs, ())
        return self._by_expr[var]

    def has(self, e: tir.PrimExpr) -> bool:
        return e in self._by_expr

    def match(self, e: tir.PrimExpr) -> MSCPrim:
        """The prim computing ``e`` (MSC's MatchOrCreatePrim), creating its tree if needed."""
        if e in self._by_expr:
            return self._by_expr[e]
        if isinstance(e, tir.Var):  # a var no graph input provides
            prim = self._create(e.name, "shape", {}, ())
        else:
            parents = tuple(self.match(c) for c in tir.children(e))
            prim = self._dedup(e.kind, _prim_attrs(e), parents)
        self._by_expr[e] = prim
        return prim

    def _dedup(self, optype: str, attrs: dict, parents: tuple) -> MSCPrim:
        key = (optype, tuple(attrs.items()), tuple(p.name for p in parents))
        if key not in self._by_key:
            name = f"{optype.upper()}_{len(self.prims)}"
            self._by_key[key] = self._create(name, optype, attrs, parents)
        return self._by_key[key]

    def _create(self, name: str, optype: str, attrs: dict, parents: tuple) -> MSCPrim:
        prim = MSCPrim(len(self.prims), name, optype, attrs, parents)
        self.prims.append(prim)
        return prim

    def dims(self, values) -> tuple[list[int], list[str]]:
        """Shape (``-1`` for symbolic dims) and prims (empty when every dim is static)."""
        shape, prims = [], []
        for v in values:
            if v.is_const:
                n = int(v)
                shape.append(n)
                prims.append(str(n))
            else:
                shape.append(-1)
                prims.append(self.match(v).name)
        return shape, prims if -1 in shape else []
