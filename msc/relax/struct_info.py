"""Struct info: the static facts Relax keeps about every value (shape, dtype, tuple fields).

TVM 0.27 renamed these to ``relax.TensorType`` and friends; both names are exported::

    sinfo = TensorStructInfo((n, 3, 224, 224), "float32")
    sinfo.ndim, sinfo.dtype, sinfo.shape[0]      # 4, "float32", n
"""

from __future__ import annotations

from ..errors import ValidationError
from ..tir import expr as tir
from .text_form import sinfo_text

__all__ = [
    "FuncStructInfo",
    "ObjectStructInfo",
    "PrimStructInfo",
    "ShapeStructInfo",
    "StructInfo",
    "TensorStructInfo",
    "TupleStructInfo",
    "normalize_dtype",
    "set_shape_kinds",
]

# numpy / torch spellings -> Relax dtype names.
_DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "int": "int32",
                  "long": "int64", "bool_": "bool", "uint1": "bool", "": "void"}


def normalize_dtype(dtype) -> str:
    """A dtype given as str, numpy dtype or DataTypeImm -> Relax name ("float32", "void")."""
    if type(dtype) is str:
        known = _NAMES.get(dtype)  # one lookup per value of a graph, not the parsing below
        if known is not None:
            return known
    if dtype is None:
        return "void"
    name = getattr(dtype, "value", None) if not isinstance(dtype, str) else dtype
    if name is None:
        name = getattr(dtype, "name", None) or str(dtype)
    name = str(name).replace("torch.", "")
    return _DTYPE_ALIASES.get(name, name)


_NAMES = {name: name for name in ("bool", "float16", "bfloat16", "float32", "float64", "int8",
                                   "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                   "uint64", "void")}


# A TensorStructInfo holds its shape as an expression (a ShapeExpr, or a Var bound to an
# R.Shape), and expressions carry struct info themselves. expr.py builds on this module and
# hands its two shape classes in when it loads, so this module never imports it.
_SHAPE_KINDS: list[type] = []


def set_shape_kinds(shape_expr: type, shape_var: type) -> None:
    """Called once by expr.py: the ShapeExpr and Var classes a tensor shape may be."""
    _SHAPE_KINDS[:] = [shape_expr, shape_var]


_set = object.__setattr__


class StructInfo:
    """Base class. Immutable; equality is structural."""

    __slots__ = ()

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _init(self, **fields) -> None:
        for k, v in fields.items():
            object.__setattr__(self, k, v)

    def _key(self) -> tuple:
        raise NotImplementedError

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return sinfo_text(self)


class ObjectStructInfo(StructInfo):
    __slots__ = ()

    def _key(self):
        return ("Object",)


class PrimStructInfo(StructInfo):
    """A scalar: ``R.Prim("int64")`` or ``R.Prim(value=n)``."""

    __slots__ = ("dtype", "value")

    def __init__(self, dtype: str | None = None, value=None):
        value = tir.convert(value) if value is not None else None
        dtype = normalize_dtype(dtype or (value.dtype if value is not None else "int64"))
        self._init(dtype=dtype, value=value)

    def _key(self):
        return ("Prim", self.dtype, self.value)


class ShapeStructInfo(StructInfo):
    """A shape value: ``R.Shape([n, 3])`` (values known) or ``R.Shape(ndim=2)``."""

    __slots__ = ("ndim", "values")

    def __init__(self, values=None, ndim: int = -1):
        if values is not None:
            values = tuple(tir.convert(v) for v in values)
            ndim = len(values)
        self._init(values=values, ndim=ndim)

    @classmethod
    def of_prims(cls, values: tuple) -> ShapeStructInfo:
        """``ShapeStructInfo(values)`` for a tuple of PrimExprs already (no conversion)."""
        sinfo = object.__new__(cls)
        _set(sinfo, "values", values)
        _set(sinfo, "ndim", len(values))
        return sinfo

    def _key(self):
        return ("Shape", self.values, self.ndim)


class TensorStructInfo(StructInfo):
    """``R.Tensor((d0, d1), dtype="float32")``. ``shape`` is a ShapeExpr or None (unknown)."""

    # ``values`` (the dims, or None when unknown) is kept at init: read for every value.
    __slots__ = ("dtype", "ndim", "shape", "values", "vdevice")

    def __init__(self, shape=None, dtype="float32", ndim: int = -1, vdevice=None):
        shape_expr, shape_var = _SHAPE_KINDS
        if shape is not None and not isinstance(shape, (shape_expr, shape_var)):
            shape = shape_expr(shape)
        if isinstance(shape, shape_expr):
            if ndim not in (-1, len(shape.values)):
                raise ValidationError(f"shape {shape} has rank {len(shape.values)}, not {ndim}")
            ndim = len(shape.values)
        _set(self, "shape", shape)  # not _init(**fields): one per value of a graph
        _set(self, "values", getattr(shape, "values", None))  # a Var shape: unknown dims
        _set(self, "dtype", normalize_dtype(dtype))
        _set(self, "ndim", ndim)
        _set(self, "vdevice", vdevice)

    def _key(self):
        return ("Tensor", self.values, self.dtype, self.ndim)

    @property
    def is_static(self) -> bool:
        return self.values is not None and all(v.is_const for v in self.values)


class TupleStructInfo(StructInfo):
    __slots__ = ("fields",)

    def __init__(self, fields):
        fields = tuple(fields)
        for f in fields:
            if not isinstance(f, StructInfo):
                raise ValidationError(f"tuple field {f!r} is not a StructInfo")
        self._init(fields=fields)

    def _key(self):
        return ("Tuple", tuple(f._key() for f in self.fields))


class FuncStructInfo(StructInfo):
    __slots__ = ("params", "purity", "ret")

    def __init__(self, params, ret: StructInfo, purity: bool = True):
        params = tuple(params) if params is not None else None
        self._init(params=params, ret=ret, purity=purity)

    def _key(self):
        params = tuple(p._key() for p in self.params) if self.params is not None else None
        return ("Func", params, self.ret._key(), self.purity)

    @staticmethod
    def opaque_func(ret: StructInfo | None = None) -> FuncStructInfo:
        return FuncStructInfo(None, ret or ObjectStructInfo())


# TVM 0.27 names.
ObjectType = ObjectStructInfo
PrimType = PrimStructInfo
ShapeType = ShapeStructInfo
TensorType = TensorStructInfo
TupleType = TupleStructInfo
FuncType = FuncStructInfo
