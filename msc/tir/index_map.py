"""TVM's ``tirx.IndexMap``: new indices as expressions of the old ones, an optional inverse,
and equivalence by canonical arithmetic (what ``suggest_index_map`` returns)::

    m = IndexMap.from_func(lambda i, j: (i // 16, j, i % 16))
    m.map_indices([x, y])                    # [x // 16, y, x % 16]
    m.is_equivalent_to(IndexMap.from_func(lambda a, b: (a // 16, b, a % 16)))   # True
"""

from __future__ import annotations

import inspect

from ..errors import ValidationError
from . import expr as E

__all__ = ["IndexMap"]


class IndexMap:
    """``final_indices`` in terms of ``initial_indices`` (Vars); ``inverse_index_map`` when the
    maker knows it."""

    def __init__(self, initial_indices, final_indices, inverse_index_map=None):
        self.initial_indices = list(initial_indices)
        self.final_indices = [E.convert(e) for e in final_indices]
        self.inverse_index_map = inverse_index_map

    @staticmethod
    def from_func(func, ndim: int | None = None, index_dtype: str = "int32",
                  inverse_index_map=None) -> IndexMap:
        """The map of a Python function of the indices (``ndim`` for a ``*args`` one)."""
        names = list(inspect.signature(func).parameters)
        if ndim is not None and len(names) != ndim:
            names = [f"i{k}" for k in range(ndim)]
        variables = [E.Var(n, index_dtype) for n in names]
        out = func(*variables)
        out = list(out) if isinstance(out, (list, tuple)) else [out]
        return IndexMap(variables, out, inverse_index_map)

    def map_indices(self, indices) -> list:
        """The final indices at ``indices`` (one expression per initial index)."""
        if len(indices) != len(self.initial_indices):
            raise ValidationError(f"the index map takes {len(self.initial_indices)} indices, "
                                  f"got {len(indices)}")
        mapping = {v.name: E.convert(i) for v, i in zip(self.initial_indices, indices)}
        return [E.substitute(e, mapping) for e in self.final_indices]

    def is_equivalent_to(self, other: IndexMap) -> bool:
        """Same arity and each final index provably equal (their canonical difference is 0)."""
        if len(self.initial_indices) != len(other.initial_indices) or \
                len(self.final_indices) != len(other.final_indices):
            return False
        theirs = other.map_indices(self.initial_indices)
        return all(E.sub(a, b) == E.IntImm(0) for a, b in zip(self.final_indices, theirs))

    def inverse(self, shape) -> IndexMap:
        """The inverse over a buffer of ``shape`` (known when the map was made with one)."""
        if self.inverse_index_map is None:
            raise ValidationError("this index map has no known inverse",
                                  hint="msc inverts the maps suggest_index_map makes")
        return self.inverse_index_map

    def __repr__(self) -> str:
        params = ", ".join(v.name for v in self.initial_indices)
        return f"IndexMap(lambda {params}: ({', '.join(map(E.to_str, self.final_indices))}))"
