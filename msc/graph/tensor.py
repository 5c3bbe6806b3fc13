"""MSCTensor: a named, typed, laid-out tensor of an MSCGraph (conventions 1.1).

    >>> t = MSCTensor("conv2d:0", "float32", "NCHW", [1, 6, 4, 4], alias="conv2d")
    >>> str(t), t.dim_at("C"), t.get_size()
    ('conv2d:0(conv2d)<1,6,4,4|float32|NCHW>', 6, 96)
    >>> MSCTensor("x:0", "float32", "NC", [-1, 3], prims=["bz", "3"]).get_shape(True)
    ['bz', 3]
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from ..errors import MSCError, ShapeError, ValidationError
from . import schema
from .files import load_json, with_context
from .layout import Layout

__all__ = ["MSCTensor", "normalize_dtype"]

# The element types a graph may hold (TVM's names); a vector type adds lanes: "float32x4".
DTYPES = frozenset(
    ["bool", "handle", "void", "bfloat16", "float16", "float32", "float64",
     "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3",
     "float8_e3m4", "float8_e4m3b11fnuz", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn",
     "float4_e2m1fn"]
    + [f"{sign}int{bits}" for sign in ("", "u") for bits in (1, 2, 4, 8, 16, 32, 64)]
)
_LANES = re.compile(r"(.+?)(?:x[1-9][0-9]{0,3})?")
_KEYS = tuple(row[0] for row in schema.TENSOR)
_DTYPE_ALIASES = {"float": "float32", "double": "float64", "int": "int32", "uint": "uint32",
                  "half": "float16"}


def normalize_dtype(dtype: Any) -> str:
    """The TVM-style dtype name of a string, numpy dtype or numpy/Python type.

    >>> normalize_dtype(np.float32), normalize_dtype("float"), normalize_dtype("bfloat16")
    ('float32', 'float32', 'bfloat16')
    """
    if isinstance(dtype, str):
        name = _DTYPE_ALIASES.get(dtype, dtype)
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = None
    base = _LANES.fullmatch(name) if isinstance(name, str) else None
    if base is None or base.group(1) not in DTYPES:
        raise ValidationError(f"unknown dtype {dtype!r:.60}", key="dtype",
                              hint=f"use one of {', '.join(sorted(DTYPES))}")
    return name


# Graphs repeat a handful of dtypes and layouts; Layout is immutable, so both are shared.
_DTYPE_CACHE: dict[str, str] = {}
_LAYOUT_CACHE: dict[str, Layout] = {}


def _dtype(dtype: Any) -> str:
    if type(dtype) is str and dtype in _DTYPE_CACHE:
        return _DTYPE_CACHE[dtype]
    name = normalize_dtype(dtype)
    if type(dtype) is str:
        _DTYPE_CACHE[dtype] = name
    return name


def _layout(layout: str | Layout) -> Layout:
    if isinstance(layout, Layout):
        return layout
    cached = _LAYOUT_CACHE.get(layout) if type(layout) is str else None
    if cached is None:
        cached = Layout(layout)
        if len(_LAYOUT_CACHE) < 4096:
            _LAYOUT_CACHE[cached.name] = cached
    return cached


_INT64_MAX = 2 ** 63 - 1


def _is_dim(d: Any) -> bool:
    """An int64 dim, or -1 for a dynamic one (bools and floats are not dims)."""
    return (type(d) is int or isinstance(d, np.integer)) and -1 <= d <= _INT64_MAX


def _check_dims(name: str, shape: Any, prims: Any) -> tuple[tuple[int, ...], tuple[str, ...]]:
    if (prims is None or (type(prims) in (list, tuple) and not prims)) and \
            type(shape) in (list, tuple) and all(
            type(d) is int for d in shape) and (not shape or (
            min(shape) >= -1 and max(shape) <= _INT64_MAX)):
        return tuple(shape), ()  # plain int dims, no prims: the usual tensor
    if not isinstance(shape, (list, tuple)) or not all(_is_dim(d) for d in shape):
        raise ValidationError(f"shape must be a list of int64 ints >= -1, got {shape!r:.80}",
                              tensor=name, key="shape", hint="use -1 for a dynamic dim")
    if prims is not None and not isinstance(prims, (list, tuple)):
        raise ValidationError(f"prims must be a list of strings, got {prims!r:.80}",
                              tensor=name, key="prims")
    prims = tuple(prims or ())
    if prims and (len(prims) != len(shape) or not all(type(p) is str for p in prims)):
        raise ValidationError(f"prims must be empty or one string per dim, got {prims!r:.80}",
                              tensor=name, key="prims")
    exact = all(type(d) is int for d in shape)
    return tuple(shape) if exact else tuple(int(d) for d in shape), prims


class MSCTensor:
    """A tensor: ``name``, ``alias`` (the only mutable field), ``dtype``, ``layout``, ``shape``
    (``-1`` for dynamic dims) and ``prims`` (empty, or one prim name or digit string per dim).

    >>> MSCTensor("const", "float32", "OIHW", [6, 3, 7, 7], alias="conv2d.weight").inspect()
    {'name': 'conv2d.weight', 'shape': [6, 3, 7, 7], 'dtype': 'float32', 'layout': 'OIHW'}
    """

    __slots__ = ("_alias", "_dtype", "_layout", "_name", "_prims", "_shape")

    def __init__(self, name: str, dtype: Any, layout: str | Layout, shape: list[int],
                 alias: str | None = None, prims: list[str] | None = None):
        if not isinstance(name, str) or not name:
            raise ValidationError(f"tensor name must be a non-empty string, got {name!r}")
        self._name = name
        self._alias = ""
        self.set_alias(alias or "")
        try:
            self._dtype = _dtype(dtype)
            self._layout = _layout(layout)
        except ValidationError as err:
            raise ValidationError(err.message, tensor=name, key=err.context.get("key"),
                                  hint=err.hint) from None
        self._shape, self._prims = _check_dims(name, shape, prims)

    # ---- fields -------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def alias(self) -> str:
        return self._alias

    @alias.setter
    def alias(self, alias: str) -> None:
        self.set_alias(alias)

    @property
    def dtype(self) -> str:
        return self._dtype

    @property
    def dtype_name(self) -> str:
        return self._dtype

    @property
    def layout(self) -> Layout:
        return self._layout

    @property
    def shape(self) -> list[int]:
        return list(self._shape)

    @property
    def prims(self) -> list[str]:
        return list(self._prims)

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def set_alias(self, alias: str) -> None:
        """Set the alias. Inside a graph, prefer ``graph.set_tensor_alias`` (it updates lookups)."""
        if not isinstance(alias, str):
            raise ValidationError(f"alias must be a string, got {alias!r}", tensor=self._name)
        self._alias = alias

    # ---- queries ------------------------------------------------------------------------
    def get_shape(self, with_prims: bool = False) -> list[int | str]:
        """The dims; with ``with_prims`` symbolic dims are their prim names.

        >>> MSCTensor("x:0", "float32", "", [-1, 3], prims=["bz", "3"]).get_shape(True)
        ['bz', 3]
        """
        if not (with_prims and self._prims):
            return list(self._shape)
        return [int(p) if p.isdigit() else p for p in self._prims]

    def get_size(self) -> int:
        """Number of elements; -1 when a dim is dynamic."""
        return -1 if -1 in self._shape else math.prod(self._shape)

    def layout_of(self, axis: str) -> int:
        """Index of the layout letter ``axis`` (``"C"``), or -1."""
        return self._layout.index_of(axis)

    def dim_at(self, axis: int | str) -> int:
        """The dim at an index (negative allowed) or at a layout letter.

        >>> MSCTensor("x:0", "float32", "NCHW", [1, 3, 8, 8]).dim_at("C")
        3
        """
        index = self._axis_index(axis)
        return self._shape[index]

    def prim_at(self, axis: int | str) -> str:
        """The prim of a dim (``""`` when the tensor has no prims)."""
        index = self._axis_index(axis)
        return self._prims[index] if self._prims else ""

    def _axis_index(self, axis: int | str) -> int:
        index = self._layout.index_of(axis) if isinstance(axis, str) else axis
        if isinstance(axis, str) and index < 0:
            raise ShapeError(f"layout {self._layout.name!r} has no axis {axis!r}",
                             tensor=self._name)
        if not -self.ndim <= index < self.ndim:
            raise ShapeError(f"axis {axis} is out of range for a {self.ndim}-d tensor",
                             tensor=self._name)
        return index % self.ndim

    def equal(self, other: object) -> bool:
        """Same shape (prims included) and dtype; names and layouts are not compared."""
        if not isinstance(other, MSCTensor):
            return False
        return self.get_shape(True) == other.get_shape(True) and self._dtype == other._dtype

    def inspect(self) -> dict:
        """The readable summary; note it reports the *alias* as the name (as MSC does)."""
        return {"name": self._alias, "shape": self.get_shape(True), "dtype": self._dtype,
                "layout": self._layout.name}

    # ---- serialization ------------------------------------------------------------------
    def to_json(self) -> dict:
        """The JSON object (a dict) with keys name, alias, dtype, layout, shape, prims."""
        return {"name": self._name, "alias": self._alias, "dtype": self._dtype,
                "layout": self._layout.name, "shape": list(self._shape),
                "prims": list(self._prims)}

    @classmethod
    def from_json(cls, json_or_path: Any, **overrides: Any) -> MSCTensor:
        """Load from a dict, JSON text or a path; ``overrides`` replace JSON keys.

        >>> MSCTensor.from_json('{"name": "x:0", "dtype": "int32", "shape": [2]}').dtype
        'int32'
        """
        data, file = load_json(json_or_path)
        try:
            return cls.from_dict(data, overrides)
        except MSCError as err:
            raise with_context(err, file=file) from None

    @classmethod
    def from_dict(cls, data: dict, overrides: dict | None = None, **context: Any) -> MSCTensor:
        """Build from a JSON object, checked key by key; ``context`` (node=, file=) names errors.

        ``overrides`` are constructor values (any accepted type) that replace JSON keys.
        """
        name = data.get("name") if isinstance(data, dict) else None
        values = schema.read_fields(data, schema.TENSOR, "tensor", tensor=name, **context)
        fields = dict(zip(_KEYS, values))
        unknown = sorted(set(overrides or ()) - set(_KEYS))
        if unknown:
            raise ValidationError(f"unknown tensor keys {unknown}", tensor=name,
                                  hint=f"use one of {', '.join(_KEYS)}")
        fields.update(overrides or {})
        return cls(**fields)

    def clone(self, **overrides: Any) -> MSCTensor:
        """A copy with some JSON keys replaced, e.g. ``t.clone(shape=[3, 3, 7, 7])``."""
        return MSCTensor.from_dict(self.to_json(), overrides)

    def __str__(self) -> str:
        alias = f"({self._alias})" if self._alias else ""
        layout = f"|{self._layout.name}" if self._layout else ""
        dims = self._prims or [str(d) for d in self._shape]
        body = f"{','.join(dims)}|{self._dtype}" if dims else self._dtype
        return f"{self._name}{alias}<{body}{layout}>"

    __repr__ = __str__
