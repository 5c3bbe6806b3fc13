"""Structural analyses: structural equality of modules, functions and expressions, and the
struct-info lattice the parser uses to check annotations.

Vars are matched by binding position (a parameter or binding in ``a`` pairs with the one at
the same place in ``b``), symbolic dims by where they are first defined, constants by value,
attrs by value::

    assert structural_equal(from_script(mod.script(show_meta=True)), mod)
    assert_structural_equal(a, b)   # ValidationError naming the first difference
"""

from __future__ import annotations

import numpy as np

from ..errors import ValidationError
from ..tir import expr as tir
from .expr import (
    BindingBlock,
    Call,
    Constant,
    DataflowBlock,
    DataTypeImm,
    Expr,
    ExternFunc,
    Function,
    GlobalVar,
    If,
    MatchCast,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
)
from .struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)

__all__ = ["assert_structural_equal", "is_base_of", "structural_equal", "unify_struct_info"]


# --------------------------------------------------------------------------------------------
# Struct info lattice.

def is_base_of(base: StructInfo, derived: StructInfo) -> bool:
    """True when every value described by ``derived`` is also described by ``base``
    (``R.Tensor(ndim=2)`` is a base of ``R.Tensor((2, 3), "float32")``)."""
    if isinstance(base, ObjectStructInfo):
        return True
    if type(base) is not type(derived):
        return False
    check = _BASE_CHECKS.get(type(base))
    return check(base, derived) if check else base == derived


def _tensor_base(b: TensorStructInfo, d: TensorStructInfo) -> bool:
    if b.dtype != "void" and b.dtype != d.dtype:
        return False
    if b.ndim != -1 and b.ndim != d.ndim:
        return False
    return b.values is None or b.values == d.values


def _shape_base(b: ShapeStructInfo, d: ShapeStructInfo) -> bool:
    if b.ndim != -1 and b.ndim != d.ndim:
        return False
    return b.values is None or b.values == d.values


def _prim_base(b: PrimStructInfo, d: PrimStructInfo) -> bool:
    return b.dtype == d.dtype and (b.value is None or b.value == d.value)


def _tuple_base(b: TupleStructInfo, d: TupleStructInfo) -> bool:
    return len(b.fields) == len(d.fields) and all(
        is_base_of(x, y) for x, y in zip(b.fields, d.fields))


def _func_base(b: FuncStructInfo, d: FuncStructInfo) -> bool:
    if b.params is None:
        return is_base_of(b.ret, d.ret)
    return b == d


_BASE_CHECKS = {
    TensorStructInfo: _tensor_base,
    ShapeStructInfo: _shape_base,
    PrimStructInfo: _prim_base,
    TupleStructInfo: _tuple_base,
    FuncStructInfo: _func_base,
}


def unify_struct_info(a: StructInfo | None, b: StructInfo | None) -> StructInfo:
    """The most specific struct info describing both (the two branches of an ``if``)."""
    if a is None or b is None:
        return ObjectStructInfo()
    if a == b:
        return a
    if isinstance(a, TensorStructInfo) and isinstance(b, TensorStructInfo):
        dtype = a.dtype if a.dtype == b.dtype else "void"
        ndim = a.ndim if a.ndim == b.ndim else -1
        shape = a.values if a.values is not None and a.values == b.values else None
        return TensorStructInfo(shape, dtype, ndim if shape is None else -1)
    if isinstance(a, TupleStructInfo) and isinstance(b, TupleStructInfo) and \
            len(a.fields) == len(b.fields):
        return TupleStructInfo([unify_struct_info(x, y) for x, y in zip(a.fields, b.fields)])
    if isinstance(a, ShapeStructInfo) and isinstance(b, ShapeStructInfo):
        return ShapeStructInfo(ndim=a.ndim if a.ndim == b.ndim else -1)
    if isinstance(a, PrimStructInfo) and isinstance(b, PrimStructInfo) and a.dtype == b.dtype:
        return PrimStructInfo(a.dtype)
    return ObjectStructInfo()


# --------------------------------------------------------------------------------------------
# Structural equality.

class _Mismatch(Exception):
    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


class _Comparer:
    def __init__(self, map_free_vars: bool):
        self.map_free_vars = map_free_vars
        self.vars: dict = {}      # relax Var in a -> Var in b
        self.bound: set = set()   # ids of Vars in b already paired
        self.dims: dict = {}      # tir var name in a -> tir Var in b
        self.path: list[str] = []

    def fail(self, message: str):
        raise _Mismatch("".join(self.path) or "<root>", message)

    def at(self, step: str):
        comparer = self

        class _Step:
            def __enter__(self):
                comparer.path.append(step)

            def __exit__(self, *exc):
                comparer.path.pop()
        return _Step()

    # ---- modules and functions -------------------------------------------------------------
    def module(self, a, b) -> None:
        names_a = sorted(gv.name_hint for gv in a.get_global_vars())
        names_b = sorted(gv.name_hint for gv in b.get_global_vars())
        if names_a != names_b:
            self.fail(f"functions differ: {names_a} vs {names_b}")
        for name in names_a:
            with self.at(name):
                self.vars, self.dims, self.bound = {}, {}, set()
                self.any_func(a[name], b[name])

    def any_func(self, a, b) -> None:
        if isinstance(a, Function) and isinstance(b, Function):
            return self.function(a, b)
        if type(a) is not type(b):
            self.fail(f"{type(a).__name__} vs {type(b).__name__}")
        if a != b:
            self.fail(f"{type(a).__name__}s differ")
        return None

    def function(self, a: Function, b: Function) -> None:
        if len(a.params) != len(b.params):
            self.fail(f"{len(a.params)} vs {len(b.params)} parameters")
        for i, (pa, pb) in enumerate(zip(a.params, b.params)):
            with self.at(f".params[{i}]"):
                self.define(pa, pb)
        with self.at(".ret_struct_info"):
            self.sinfo(a.ret_struct_info, b.ret_struct_info)
        if a.is_pure != b.is_pure:
            self.fail(f"purity {a.is_pure} vs {b.is_pure}")
        with self.at(".attrs"):
            self.value(a.attrs, b.attrs)
        with self.at(".body"):
            self.expr(a.body, b.body)

    def define(self, a: Var, b: Var) -> None:
        if type(a) is not type(b):
            self.fail(f"{type(a).__name__} vs {type(b).__name__}")
        self.sinfo(a.struct_info, b.struct_info, define=True)
        if id(b) in self.bound and self.vars.get(a) is not b:
            self.fail(f"var {b.name_hint} is paired twice")
        self.vars[a] = b
        self.bound.add(id(b))

    # ---- struct info and dims --------------------------------------------------------------
    def sinfo(self, a, b, define: bool = False) -> None:
        if a is None or b is None:
            if a is not b:
                self.fail(f"struct info {a} vs {b}")
            return
        if type(a) is not type(b):
            self.fail(f"struct info {a} vs {b}")
        if isinstance(a, (TensorStructInfo, ShapeStructInfo)):
            if (a.dtype if isinstance(a, TensorStructInfo) else None) != \
                    (b.dtype if isinstance(b, TensorStructInfo) else None) or a.ndim != b.ndim:
                self.fail(f"struct info {a} vs {b}")
            self.dim_list(a.values, b.values, define, a, b)
        elif isinstance(a, PrimStructInfo):
            if a.dtype != b.dtype:
                self.fail(f"struct info {a} vs {b}")
            self.dim_list(None if a.value is None else (a.value,),
                          None if b.value is None else (b.value,), define, a, b)
        elif isinstance(a, TupleStructInfo):
            if len(a.fields) != len(b.fields):
                self.fail(f"struct info {a} vs {b}")
            for fa, fb in zip(a.fields, b.fields):
                self.sinfo(fa, fb, define)
        elif isinstance(a, FuncStructInfo):
            if (a.params is None) != (b.params is None) or a.purity != b.purity:
                self.fail(f"struct info {a} vs {b}")
            for pa, pb in zip(a.params or (), b.params or ()):
                self.sinfo(pa, pb, define)
            self.sinfo(a.ret, b.ret, define)

    def dim_list(self, a, b, define, sa, sb) -> None:
        if (a is None) != (b is None) or (a is not None and len(a) != len(b)):
            self.fail(f"struct info {sa} vs {sb}")
        for da, db in zip(a or (), b or ()):
            self.dim(da, db, define)

    def dim(self, a, b, define: bool = False) -> None:
        a, b = tir.convert(a), tir.convert(b)
        if isinstance(a, tir.Var) and isinstance(b, tir.Var) and a.name not in self.dims and \
                (define or self.map_free_vars):
            self.dims[a.name] = b
        mapped = tir.substitute(a, self.dims) if self.dims else a
        if mapped != b:
            self.fail(f"dim {a} vs {b}")

    # ---- expressions -----------------------------------------------------------------------
    def expr(self, a, b) -> None:
        if isinstance(a, Var) and isinstance(b, Var):
            return self.var(a, b)
        if type(a) is not type(b):
            self.fail(f"{type(a).__name__} vs {type(b).__name__}")
        handler = _EXPR_CHECKS.get(type(a))
        if handler is None:
            if a is not b and a != b:
                self.fail(f"{type(a).__name__}s differ")
            return None
        return handler(self, a, b)

    def var(self, a: Var, b: Var) -> None:
        if a in self.vars:
            if self.vars[a] is not b:
                self.fail(f"var {a.name_hint} is bound to a different variable")
            return
        if not self.map_free_vars and a is not b:
            self.fail(f"free var {a.name_hint} vs {b.name_hint}")
        self.define(a, b)

    def seq(self, a: SeqExpr, b: SeqExpr) -> None:
        if len(a.blocks) != len(b.blocks):
            self.fail(f"{len(a.blocks)} vs {len(b.blocks)} blocks")
        for i, (ba, bb) in enumerate(zip(a.blocks, b.blocks)):
            with self.at(f".blocks[{i}]"):
                self.block(ba, bb)
        with self.at(".body"):
            self.expr(a.body, b.body)

    def block(self, a: BindingBlock, b: BindingBlock) -> None:
        if isinstance(a, DataflowBlock) != isinstance(b, DataflowBlock):
            self.fail("dataflow block vs binding block")
        if len(a.bindings) != len(b.bindings):
            self.fail(f"{len(a.bindings)} vs {len(b.bindings)} bindings")
        for i, (x, y) in enumerate(zip(a.bindings, b.bindings)):
            with self.at(f".bindings[{i}]"):
                self.binding(x, y)

    def binding(self, a, b) -> None:
        if type(a) is not type(b):
            self.fail(f"{type(a).__name__} vs {type(b).__name__}")
        with self.at(".value"):
            self.expr(a.value, b.value)
        if isinstance(a, MatchCast):
            with self.at(".struct_info"):
                self.sinfo(a.struct_info, b.struct_info, define=True)
        with self.at(f" ({a.var.name_hint})"):
            self.define(a.var, b.var)

    def call(self, a: Call, b: Call) -> None:
        with self.at(".op"):
            self.op(a.op, b.op)
        self.fields("args", a.args, b.args)
        with self.at(".attrs"):
            self.value(dict(a.attrs.items()) if a.attrs else {},
                       dict(b.attrs.items()) if b.attrs else {})
        if len(a.sinfo_args) != len(b.sinfo_args):
            self.fail("sinfo_args differ")
        for sa, sb in zip(a.sinfo_args, b.sinfo_args):
            with self.at(".sinfo_args"):
                self.sinfo(sa, sb)

    def op(self, a, b) -> None:
        if isinstance(a, Expr) and not isinstance(a, (Var, GlobalVar, ExternFunc)) and \
                hasattr(a, "name"):
            if getattr(b, "name", None) != a.name:
                self.fail(f"op {a.name} vs {getattr(b, 'name', b)}")
            return
        self.expr(a, b)

    def fields(self, name: str, a, b) -> None:
        if len(a) != len(b):
            self.fail(f"{len(a)} vs {len(b)} {name}")
        for i, (x, y) in enumerate(zip(a, b)):
            with self.at(f".{name}[{i}]"):
                self.expr(x, y)

    def constant(self, a: Constant, b: Constant) -> None:
        x, y = a.data, b.data
        if x.dtype != y.dtype or x.shape != y.shape:
            self.fail(f"constant {x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}")
        if not np.array_equal(x, y, equal_nan=x.dtype.kind == "f"):
            self.fail("constant values differ")

    def value(self, a, b) -> None:
        """Attr values: lists and tuples alike, PrimExprs through the dim map."""
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            if len(a) != len(b):
                self.fail(f"{list(a)} vs {list(b)}")
            for x, y in zip(a, b):
                self.value(x, y)
        elif isinstance(a, dict) and isinstance(b, dict):
            if sorted(map(str, a)) != sorted(map(str, b)):
                self.fail(f"keys {sorted(map(str, a))} vs {sorted(map(str, b))}")
            for k in a:
                with self.at(f"[{k!r}]"):
                    self.value(a[k], b[k])
        elif isinstance(a, tir.PrimExpr) or isinstance(b, tir.PrimExpr):
            self.dim(a, b)
        elif isinstance(a, Expr) and isinstance(b, Expr):
            self.expr(a, b)
        elif a != b or type(a) is not type(b) and not _same_number(a, b):
            self.fail(f"{a!r} vs {b!r}")


def _same_number(a, b) -> bool:
    numbers = (int, float, np.integer, np.floating)
    return isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and \
        not isinstance(b, bool) and a == b


_EXPR_CHECKS = {
    SeqExpr: _Comparer.seq,
    Call: _Comparer.call,
    Constant: _Comparer.constant,
    Tuple: lambda c, a, b: c.fields("fields", a.fields, b.fields),
    TupleGetItem: lambda c, a, b: (c.fail(f"index {a.index} vs {b.index}")
                                   if a.index != b.index else c.expr(a.tuple_value,
                                                                     b.tuple_value)),
    ShapeExpr: lambda c, a, b: c.dim_list(a.values, b.values, False, a, b),
    PrimValue: lambda c, a, b: c.dim(a.value, b.value),
    StringImm: lambda c, a, b: a.value == b.value or c.fail(f"{a.value!r} vs {b.value!r}"),
    DataTypeImm: lambda c, a, b: a.value == b.value or c.fail(f"{a.value} vs {b.value}"),
    GlobalVar: lambda c, a, b: a == b or c.fail(f"{a.name_hint} vs {b.name_hint}"),
    ExternFunc: lambda c, a, b: (a.global_symbol == b.global_symbol
                                 or c.fail(f"{a.global_symbol} vs {b.global_symbol}")),
    If: lambda c, a, b: (c.expr(a.cond, b.cond), c.expr(a.true_branch, b.true_branch),
                         c.expr(a.false_branch, b.false_branch)),
    Function: _Comparer.function,
}


def _compare(a, b, map_free_vars: bool) -> None:
    from .module import IRModule

    comparer = _Comparer(map_free_vars)
    if isinstance(a, IRModule) and isinstance(b, IRModule):
        comparer.module(a, b)
    elif isinstance(a, StructInfo) and isinstance(b, StructInfo):
        comparer.sinfo(a, b, define=True)
    elif isinstance(a, Expr) and isinstance(b, Expr):
        comparer.expr(a, b)
    else:
        comparer.any_func(a, b)


def structural_equal(a, b, map_free_vars: bool = True) -> bool:
    """Whether two modules, functions, expressions or struct infos are structurally equal."""
    try:
        _compare(a, b, map_free_vars)
    except _Mismatch:
        return False
    return True


def assert_structural_equal(a, b, map_free_vars: bool = True) -> None:
    """Raise ValidationError naming the first difference (path and values)."""
    try:
        _compare(a, b, map_free_vars)
    except _Mismatch as err:
        raise ValidationError(f"not structurally equal at {err.path}: {err.message}",
                              hint="print both with .script() to compare") from None

