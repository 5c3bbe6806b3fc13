"""Symbolic scalars and struct-info annotations: ``R.Tensor((n, 3), dtype="float32")``,
``"n * 3"``, ``T.int64(4)``, ``T.min(a, b)``. Built from the ast, never evaluated by Python."""

from __future__ import annotations

import ast

from ...errors import MSCError, ParseError
from ...script import tir as script_tir
from ...tir import expr as tir
from ...tir import intrin
from ..struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    TensorStructInfo,
    TupleStructInfo,
)

_BINOPS = {ast.Add: tir.add, ast.Sub: tir.sub, ast.Mult: tir.mul, ast.FloorDiv: tir.floordiv,
           ast.Mod: tir.floormod}
_COMPARES = {ast.Lt: "LT", ast.LtE: "LE", ast.Gt: "GT", ast.GtE: "GE", ast.Eq: "EQ",
             ast.NotEq: "NE"}
# Bare struct-info names: ``R.Tensor`` / ``R.Object`` written without a call.
# Annotations of the first Relax TVMScript (2022) name the type without ``R.``.
_UNQUALIFIED = ("Tensor", "Tuple", "Shape")
_BARE_SINFO = {
    "Tensor": lambda: TensorStructInfo(None, "void"),
    "Tuple": lambda: TupleStructInfo([]),
    "Shape": lambda: ShapeStructInfo(ndim=-1),
    "Object": ObjectStructInfo,
    "Any": ObjectStructInfo,
    "Callable": FuncStructInfo.opaque_func,
}
SINFO_NAMES = frozenset(_BARE_SINFO) | {"Prim"}


class SymScope:
    """Symbolic vars visible in a function: module TypeVars plus ``n = T.int64()`` and
    string-dim declarations. ``implicit`` lets string dims (``"n"``) declare new vars."""

    def __init__(self, ctx, parent: dict | None = None):
        self.ctx = ctx
        self.vars: dict[str, tir.Var] = dict(parent or {})
        self.implicit = True

    def lookup(self, name: str, node) -> tir.Var:
        if name in self.vars:
            return self.vars[name]
        raise self.ctx.error(node, f"undefined symbolic variable {name!r}",
                             hint=f"declare it with `{name} = T.int64()` or "
                                  f'`{name} = TypeVar("{name}")`')

    def declare(self, name: str, dtype: str = "int64") -> tir.Var:
        var = tir.Var(name, dtype)
        self.vars[name] = var
        return var


class PrimParser:
    """ast -> PrimExpr for dims and ``T.*`` expressions."""

    def __init__(self, ctx, syms: SymScope, names=None):
        self.ctx = ctx
        self.syms = syms
        self.names = names  # optional fallback: name -> value (Relax prim-valued vars)

    def prim(self, node, in_string: ast.AST | None = None):
        handler = getattr(self, f"_p_{type(node).__name__}", None)
        if handler is None:
            raise self.ctx.error(in_string or node, f"unsupported syntax in a symbolic "
                                                    f"expression: {type(node).__name__}")
        return handler(node, in_string)

    def _p_Constant(self, node, in_string):
        value = node.value
        if isinstance(value, str) and in_string is None:
            return self.parse_string(value, node)
        if isinstance(value, bool):
            return tir.IntImm(int(value), "bool")
        if isinstance(value, (int, float)):
            return tir.convert(value)
        raise self.ctx.error(in_string or node, f"{value!r} is not a symbolic scalar")

    def parse_string(self, text: str, node) -> tir.PrimExpr:
        """A dim written as a string: ``"n * 3"`` (names may declare new vars)."""
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError:
            raise self.ctx.error(node, f"invalid symbolic expression {text!r}") from None
        return self.prim(tree.body, in_string=node)

    def _p_Name(self, node, in_string):
        name = node.id
        if name in self.syms.vars:
            return self.syms.vars[name]
        if self.names is not None:
            value = self.names(name)
            if value is not None:
                return value
        if in_string is not None and self.syms.implicit:
            return self.syms.declare(name)
        return self.syms.lookup(name, in_string or node)

    def _p_BinOp(self, node, in_string):
        fn = _BINOPS.get(type(node.op))
        if fn is None:
            raise self.ctx.error(in_string or node, f"operator {type(node.op).__name__} is "
                                                    "not supported on symbolic scalars")
        return self._apply(node, in_string, fn, self.prim(node.left, in_string),
                           self.prim(node.right, in_string))

    def _p_UnaryOp(self, node, in_string):
        value = self.prim(node.operand, in_string)
        if isinstance(node.op, ast.USub):
            return self._apply(node, in_string, tir.mul, value, -1) if not value.is_const \
                else tir.convert(-value.value)
        if isinstance(node.op, ast.UAdd):
            return value
        if isinstance(node.op, ast.Not):
            return tir.Not(value)
        raise self.ctx.error(in_string or node, "unsupported unary operator")

    def _p_Compare(self, node, in_string):
        if len(node.ops) != 1 or type(node.ops[0]) not in _COMPARES:
            raise self.ctx.error(in_string or node, "only single comparisons are supported")
        kind = _COMPARES[type(node.ops[0])]
        return self._apply(node, in_string, tir.binary, kind, self.prim(node.left, in_string),
                           self.prim(node.comparators[0], in_string))

    def _p_BoolOp(self, node, in_string):
        kind = "And" if isinstance(node.op, ast.And) else "Or"
        values = [self.prim(v, in_string) for v in node.values]
        result = values[0]
        for v in values[1:]:
            result = self._apply(node, in_string, tir.binary, kind, result, v)
        return result

    def _p_Call(self, node, in_string):
        space, parts = self.ctx.namespace(node.func)
        if space != "T" or len(parts) != 1:
            raise self.ctx.error(in_string or node.func, "only T.<name>(...) calls are "
                                                         "allowed in symbolic expressions")
        if node.keywords:
            raise self.ctx.error(in_string or node.keywords[0], "keyword arguments are not "
                                                                "supported here")
        args = [self._t_arg(a, in_string) for a in node.args]
        return self.call_t(parts[0], args, in_string or node)

    def _t_arg(self, node, in_string):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value  # T.Cast("int32", x): the dtype
        return self.prim(node, in_string)

    def call_t(self, name: str, args: list, node):
        fn = _t_function(name)
        if fn is None:
            raise self.ctx.error(node, f"unknown TIR function T.{name}",
                                 hint="symbolic expressions support T.<dtype>(v), "
                                      + ", ".join(f"T.{n}" for n in sorted(
                                          script_tir.PRIM_FUNCS)[:8]) + ", ...")
        return self._apply(node, None, fn, *args)

    def _apply(self, node, in_string, fn, *args):
        try:
            return fn(*args)
        except (MSCError, TypeError, ValueError) as err:
            if isinstance(err, ParseError):
                raise
            raise self.ctx.error(in_string or node, f"invalid symbolic expression: {err}") \
                from None


def _t_function(name: str):
    if name in intrin.DTYPES:
        return script_tir.dtype_ctor(name)
    return script_tir.PRIM_FUNCS.get(name)


class SinfoParser:
    """ast -> StructInfo for annotations, ``out_ty=`` and ``R.match_cast``."""

    def __init__(self, ctx, prims: PrimParser):
        self.ctx = ctx
        self.prims = prims

    def is_sinfo(self, node) -> bool:
        target = node.func if isinstance(node, ast.Call) else node
        space, parts = self.ctx.namespace(target)
        if space == "R":
            return len(parts) == 1 and parts[0] in SINFO_NAMES
        return space == "T" and len(parts) == 1 and parts[0] in intrin.DTYPES and \
            not isinstance(node, ast.Call)

    def sinfo(self, node, signature: bool = False):
        if isinstance(node, ast.Constant) and node.value is None:
            return None
        if isinstance(node, ast.Call):
            return self._call(node)
        space, parts = self.ctx.namespace(node)
        if space == "R" and len(parts) == 1 and parts[0] in _BARE_SINFO:
            return _BARE_SINFO[parts[0]]()
        if space == "T" and len(parts) == 1 and parts[0] in intrin.DTYPES:
            return PrimStructInfo(parts[0])
        raise self.ctx.error(node, "expected a struct info annotation such as "
                                   'R.Tensor((1, 3), dtype="float32")',
                             hint="supported: R.Tensor, R.Tuple, R.Shape, R.Prim, T.<dtype>, "
                                  "R.Object, R.Any, R.Callable")

    def _call(self, node: ast.Call):
        space, parts = self.ctx.namespace(node.func)
        if isinstance(node.func, ast.Name) and node.func.id in _UNQUALIFIED:
            space, parts = "R", [node.func.id]  # Relax of 2022: ``x: Tensor((1, 784), "float32")``
        if space != "R" or len(parts) != 1 or parts[0] not in SINFO_NAMES:
            raise self.ctx.error(node, "expected a struct info annotation such as "
                                       'R.Tensor((1, 3), dtype="float32")')
        builder = getattr(self, f"_s_{parts[0]}")
        kwargs = {k.arg: k.value for k in node.keywords}
        if None in kwargs:
            raise self.ctx.error(node, "**kwargs are not supported in annotations")
        try:
            return builder(node, list(node.args), kwargs)
        except ParseError:
            raise
        except (MSCError, TypeError, ValueError) as err:
            raise self.ctx.error(node, f"invalid struct info: {err}") from None

    def _bind(self, node, args, kwargs, names):
        if len(args) > len(names):
            raise self.ctx.error(node, f"too many arguments: expected at most {len(names)}")
        bound = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names or key in bound:
                raise self.ctx.error(value, f"unexpected argument {key!r}",
                                     hint=f"arguments: {', '.join(names)}")
            bound[key] = value
        return bound

    def _s_Tensor(self, node, args, kwargs):
        b = self._bind(node, args, kwargs, ["shape", "dtype", "vdevice", "ndim"])
        shape = self._dims(b["shape"], sizes=True) if "shape" in b else None
        dtype = self._str(b["dtype"]) if "dtype" in b else "void"
        ndim = self._int(b["ndim"]) if "ndim" in b else -1
        return TensorStructInfo(shape, dtype or "void", ndim)

    def _s_Tuple(self, node, args, kwargs):
        if kwargs:
            raise self.ctx.error(node, "R.Tuple takes only positional fields")
        if len(args) == 1 and isinstance(args[0], ast.List):
            args = args[0].elts
        return TupleStructInfo([self.sinfo(a) for a in args])

    def _s_Shape(self, node, args, kwargs):
        b = self._bind(node, args, kwargs, ["values", "ndim"])
        values = self._dims(b["values"]) if "values" in b else None
        return ShapeStructInfo(values, self._int(b["ndim"]) if "ndim" in b else -1)

    def _s_Prim(self, node, args, kwargs):
        b = self._bind(node, args, kwargs, ["dtype", "value"])
        value = self.prims.prim(b["value"]) if "value" in b else None
        return PrimStructInfo(self._str(b["dtype"]) if "dtype" in b else None, value)

    def _s_Object(self, node, args, kwargs):
        self._bind(node, args, kwargs, [])
        return ObjectStructInfo()

    _s_Any = _s_Object

    def _s_Callable(self, node, args, kwargs):
        b = self._bind(node, args, kwargs, ["params", "ret", "purity", "derive_func"])
        params = b.get("params")
        if params is None or (isinstance(params, ast.Constant) and params.value is None):
            param_sinfo = None
        elif isinstance(params, (ast.Tuple, ast.List)):
            param_sinfo = [self.sinfo(p) for p in params.elts]
        else:
            param_sinfo = [self.sinfo(params)]
        ret = self.sinfo(b["ret"]) if "ret" in b else ObjectStructInfo()
        purity = self._bool(b["purity"]) if "purity" in b else True
        return FuncStructInfo(param_sinfo, ret or ObjectStructInfo(), purity)

    def _dims(self, node, sizes: bool = False):
        """Integer dims; ``sizes``: constant ones are tensor sizes, 0 .. int64 max."""
        if isinstance(node, ast.Constant) and node.value is None:
            return None
        if not isinstance(node, (ast.Tuple, ast.List)):
            raise self.ctx.error(node, "expected a tuple of dims such as (1, n, 3)")
        return [self._dim(e, sizes) for e in node.elts]

    def _dim(self, node, size: bool):
        value = self.prims.prim(node)
        if (problem := tir.dim_problem(value, size)) is not None:
            raise self.ctx.error(node, f"a dim {problem}")
        return value

    def _str(self, node):
        if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value,
                                                                                 str)):
            return node.value
        raise self.ctx.error(node, "expected a string such as \"float32\"")

    def _int(self, node):
        value = self.prims.prim(node)
        if not isinstance(value, tir.IntImm):
            raise self.ctx.error(node, "expected an integer")
        return value.value

    def _bool(self, node):
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            return node.value
        raise self.ctx.error(node, "expected True or False")
