"""Relax expressions: an immutable, pure-Python subset of TVM Relax.

Leaf and compound expressions carry their struct info (``expr.struct_info``) once the
BlockBuilder has normalized them; Vars and Constants carry it from construction::

    x = Var("x", TensorStructInfo((1, 784), "float32"))
    c = const(np.ones((784, 10), "float32"))
    call = op.matmul(x, c)          # struct_info filled when the BlockBuilder emits it
"""

from __future__ import annotations

import functools

import numpy as np

from ..errors import ValidationError
from ..tir import expr as tir
from .struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
    normalize_dtype,
    set_shape_kinds,
)
from .text_form import expr_text

__all__ = [
    "Attrs",
    "Binding",
    "BindingBlock",
    "Call",
    "Constant",
    "DataTypeImm",
    "DataflowBlock",
    "DataflowVar",
    "Expr",
    "ExternFunc",
    "Function",
    "GlobalVar",
    "If",
    "MatchCast",
    "PrimValue",
    "SeqExpr",
    "ShapeExpr",
    "Span",
    "StringImm",
    "Tuple",
    "TupleGetItem",
    "Var",
    "VarBinding",
    "const",
    "convert_to_expr",
    "prim_value",
]


_set = object.__setattr__


class Span:
    """Where an expression came from, as TVM's ``ir.Span`` names its source: the frontend's
    node (``source_name``) and the model's module path (``scope``) it belongs to. Frontends
    set it through ``BlockBuilder.span``; the graph builder reads it into ``MSCJoint.scope``::

        Span("/layer1/layer1.0/conv1/Conv", ("layer1", "layer1.0", "conv1"))
    """

    __slots__ = ("scope", "source_name")

    def __init__(self, source_name: str = "", scope=()):
        object.__setattr__(self, "source_name", str(source_name))
        object.__setattr__(self, "scope", tuple(str(s) for s in scope))

    def __setattr__(self, name, value):
        raise AttributeError("Span is immutable; build a new one instead")

    def __eq__(self, other) -> bool:
        return isinstance(other, Span) and (self.source_name, self.scope) == (
            other.source_name, other.scope)

    def __hash__(self) -> int:
        return hash((self.source_name, self.scope))

    def __repr__(self) -> str:
        return f"Span({self.source_name!r}, {self.scope!r})"


class Node:
    """Frozen after ``__init__``: fields are set through ``_init`` (or ``_set``) only."""

    __slots__ = ()

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable; build a new one instead")

    def _init(self, **fields) -> None:
        for k, v in fields.items():
            object.__setattr__(self, k, v)


class Expr(Node):
    """Base of Relax expressions. Identity semantics (``is``) unless a subclass says otherwise."""

    # ``struct_info`` is a slot read directly (not a property): the most read field of the IR.
    # It is read-only like every field (Node.__setattr__); normalization sets it once.
    __slots__ = ("span", "struct_info")

    def __init__(self, sinfo: StructInfo | None = None, span=None):
        _set(self, "struct_info", sinfo)  # not _init(**fields): the hottest constructors
        _set(self, "span", span)

    @property
    def struct_info_(self) -> StructInfo | None:  # TVM spelling
        return self.struct_info

    def _set_struct_info(self, sinfo: StructInfo) -> None:
        """Set once, by normalization (the BlockBuilder); never changed afterwards."""
        if self.struct_info is not None and self.struct_info != sinfo:
            raise ValidationError(f"{type(self).__name__} already has struct info "
                                  f"{self.struct_info}")
        object.__setattr__(self, "struct_info", sinfo)

    def __repr__(self) -> str:
        return expr_text(self)

    def __getitem__(self, index):
        """``tuple_var[i]`` builds a TupleGetItem, as in TVMScript."""
        return TupleGetItem(self, index)


class Var(Expr):
    __slots__ = ("name_hint",)

    def __init__(self, name_hint: str, struct_info: StructInfo | None = None, span=None):
        if struct_info is not None and not isinstance(struct_info, StructInfo):
            raise ValidationError(f"var {name_hint!r}: struct_info must be a StructInfo, "
                                  f"got {type(struct_info).__name__}",
                                  hint="e.g. relax.TensorStructInfo((1, 3), 'float32')")
        super().__init__(struct_info, span)
        _set(self, "name_hint", name_hint)


class DataflowVar(Var):
    __slots__ = ()


class Constant(Expr):
    """A tensor constant backed by a numpy array (not copied)."""

    __slots__ = ("data",)

    def __init__(self, data, span=None):
        arr = data if isinstance(data, np.ndarray) else np.asarray(data)
        super().__init__(TensorStructInfo(arr.shape, _np_dtype_name(arr.dtype)), span)
        self._init(data=arr)

    def numpy(self) -> np.ndarray:
        return self.data


@functools.cache  # once per dtype, not once per constant
def _np_dtype_name(dtype) -> str:
    name = np.dtype(dtype).name
    return "bool" if name == "bool" else name


def const(value, dtype: str | None = None) -> Constant:
    """``relax.const(1.0, "float32")`` / ``relax.const(np_array)``."""
    if isinstance(value, Constant):
        return value
    np_dtype = _to_numpy_dtype(dtype) if dtype else None
    if isinstance(value, np.ndarray) and (np_dtype is None or value.dtype == np_dtype):
        return Constant(value)
    if np_dtype is None and isinstance(value, float):
        np_dtype = np.float32
    if np_dtype is None and isinstance(value, bool):
        np_dtype = np.bool_
    if np_dtype is None and isinstance(value, int):
        np_dtype = np.int64
    return Constant(np.asarray(value, dtype=np_dtype))


def _to_numpy_dtype(dtype):
    name = normalize_dtype(dtype)
    if name == "bfloat16":
        raise ValidationError("numpy has no bfloat16; build bfloat16 constants as float32 and "
                              "cast with R.astype", key="dtype")
    return np.dtype(name)


class Attrs(Node):
    """An op's attributes: an ordered read-only mapping with attribute access."""

    __slots__ = ("_items",)

    def __init__(self, items=None):
        self._init(_items=dict(items or {}))

    def __getattr__(self, name):
        try:
            return object.__getattribute__(self, "_items")[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, name):
        return self._items[name]

    def __contains__(self, name) -> bool:
        return name in self._items

    def __iter__(self):
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def keys(self):
        return self._items.keys()

    def items(self):
        return self._items.items()

    def get(self, name, default=None):
        return self._items.get(name, default)

    def __eq__(self, other) -> bool:
        return isinstance(other, Attrs) and self._items == other._items

    def __hash__(self) -> int:
        return hash(tuple(self._items))

    def __repr__(self) -> str:
        return f"Attrs({self._items})"


class Call(Expr):
    """``op(args, attrs)``; ``op`` is an Op, GlobalVar, ExternFunc or a Var of function type."""

    __slots__ = ("args", "attrs", "op", "sinfo_args")

    def __init__(self, op, args, attrs=None, sinfo_args=(), span=None):
        super().__init__(None, span)
        attrs = attrs if isinstance(attrs, Attrs) or attrs is None else Attrs(attrs)
        _set(self, "op", op)
        _set(self, "args", tuple([a if isinstance(a, Expr) else convert_to_expr(a) for a in args]))
        _set(self, "attrs", attrs)
        _set(self, "sinfo_args", tuple(sinfo_args or ()))


class Tuple(Expr):
    __slots__ = ("fields",)

    def __init__(self, fields, span=None):
        fields = tuple(convert_to_expr(f) for f in fields)
        sinfos = [f.struct_info for f in fields]
        sinfo = TupleStructInfo(sinfos) if all(s is not None for s in sinfos) else None
        super().__init__(sinfo, span)
        self._init(fields=fields)

    def __len__(self) -> int:
        return len(self.fields)

    def __getitem__(self, index):
        return self.fields[index]


class TupleGetItem(Expr):
    __slots__ = ("index", "tuple_value")

    def __init__(self, tuple_value: Expr, index: int, span=None):
        sinfo = tuple_value.struct_info
        field = None
        if isinstance(sinfo, TupleStructInfo):
            if not -len(sinfo.fields) <= index < len(sinfo.fields):
                raise ValidationError(f"tuple index {index} out of range for a tuple of "
                                      f"{len(sinfo.fields)} fields")
            field = sinfo.fields[index]
        super().__init__(field, span)
        self._init(tuple_value=tuple_value, index=int(index))


class ShapeExpr(Expr):
    """A shape value ``R.shape([n, 3])``; iterable over its PrimExpr dims."""

    __slots__ = ("values",)

    def __init__(self, values, span=None):
        if isinstance(values, ShapeExpr):
            values = values.values
        vals = tuple([tir.convert(v) for v in values])
        super().__init__(ShapeStructInfo.of_prims(vals), span)
        _set(self, "values", vals)

    def __iter__(self):
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, i):
        return self.values[i]

    def __eq__(self, other) -> bool:
        if isinstance(other, ShapeExpr):
            return self.values == other.values
        if isinstance(other, (list, tuple)):
            return self.values == tuple(tir.convert(v) for v in other)
        return False

    def __hash__(self) -> int:
        return hash(self.values)


class PrimValue(Expr):
    """A scalar value as a Relax expression (``R.prim_value(1)``)."""

    __slots__ = ("value",)

    def __init__(self, value, span=None):
        value = tir.convert(value)
        super().__init__(PrimStructInfo(value.dtype, value), span)
        self._init(value=value)


def prim_value(value) -> PrimValue:
    return PrimValue(value)


class StringImm(Expr):
    __slots__ = ("value",)

    def __init__(self, value: str, span=None):
        super().__init__(ObjectStructInfo(), span)
        self._init(value=str(value))


class DataTypeImm(Expr):
    __slots__ = ("value",)

    def __init__(self, value, span=None):
        super().__init__(ObjectStructInfo(), span)
        self._init(value=normalize_dtype(value))


class If(Expr):
    __slots__ = ("cond", "false_branch", "true_branch")

    def __init__(self, cond, true_branch, false_branch, span=None):
        super().__init__(None, span)
        self._init(cond=cond, true_branch=true_branch, false_branch=false_branch)


class Binding(Node):
    __slots__ = ("span", "value", "var")


class VarBinding(Binding):
    __slots__ = ()

    def __init__(self, var: Var, value: Expr, span=None):
        _set(self, "var", var)
        _set(self, "value", value)
        _set(self, "span", span)


class MatchCast(Binding):
    __slots__ = ("struct_info",)

    def __init__(self, var: Var, value: Expr, struct_info: StructInfo, span=None):
        self._init(var=var, value=value, struct_info=struct_info, span=span)


class BindingBlock(Node):
    __slots__ = ("bindings",)

    def __init__(self, bindings):
        self._init(bindings=tuple(bindings))


class DataflowBlock(BindingBlock):
    __slots__ = ()


class SeqExpr(Expr):
    __slots__ = ("blocks", "body")

    def __init__(self, blocks, body: Expr, span=None):
        super().__init__(body.struct_info, span)
        self._init(blocks=tuple(blocks), body=body)


class BaseFunc(Expr):
    __slots__ = ("attrs",)

    def with_attr(self, key: str, value):
        raise NotImplementedError


class Function(BaseFunc):
    """A Relax function. ``attrs`` holds e.g. ``global_symbol`` and ``num_input``."""

    __slots__ = ("body", "is_pure", "params", "ret_struct_info")

    def __init__(self, params, body: Expr, ret_struct_info: StructInfo | None = None,
                 is_pure: bool = True, attrs=None, span=None):
        params = tuple(params)
        ret = ret_struct_info or body.struct_info or ObjectStructInfo()
        sinfo = FuncStructInfo([p.struct_info for p in params], ret, is_pure)
        super().__init__(sinfo, span)
        self._init(params=params, body=body, ret_struct_info=ret, is_pure=is_pure,
                   attrs=dict(attrs or {}))

    def with_attr(self, key: str, value) -> Function:
        attrs = {**self.attrs, key: value}
        return Function(self.params, self.body, self.ret_struct_info, self.is_pure, attrs,
                        self.span)

    def without_attr(self, key: str) -> Function:
        attrs = {k: v for k, v in self.attrs.items() if k != key}
        return Function(self.params, self.body, self.ret_struct_info, self.is_pure, attrs,
                        self.span)


class GlobalVar(Expr):
    """The name of a module-level function. Equal when the names are equal."""

    __slots__ = ("name_hint",)

    def __init__(self, name_hint: str, span=None):
        super().__init__(None, span)
        self._init(name_hint=name_hint)

    def __eq__(self, other) -> bool:
        return isinstance(other, GlobalVar) and other.name_hint == self.name_hint

    def __hash__(self) -> int:
        return hash(("GlobalVar", self.name_hint))


class ExternFunc(BaseFunc):
    __slots__ = ("global_symbol",)

    def __init__(self, global_symbol: str, struct_info: StructInfo | None = None, span=None):
        super().__init__(struct_info or FuncStructInfo.opaque_func(), span)
        self._init(global_symbol=global_symbol, attrs={})


def convert_to_expr(value) -> Expr:
    """Python values -> Relax exprs: numbers -> PrimValue, str -> StringImm,
    list/tuple of exprs -> Tuple, numpy arrays -> Constant."""
    if isinstance(value, (Expr, Node)):
        return value
    if isinstance(value, tir.PrimExpr):
        return PrimValue(value)
    if isinstance(value, (bool, int, float)):
        return PrimValue(value)
    if isinstance(value, str):
        return StringImm(value)
    if isinstance(value, np.ndarray):
        return Constant(value)
    if isinstance(value, (list, tuple)):
        return Tuple([convert_to_expr(v) for v in value])
    raise ValidationError(f"cannot convert {type(value).__name__} {value!r} to a Relax expr")


# TensorStructInfo holds its shape as one of these; struct_info.py sits below this module.
set_shape_kinds(ShapeExpr, Var)
