"""Relax expressions from the ast: op calls through the op table, constants, tuples, shapes,
metadata references, calls to module functions. Nothing is evaluated by Python."""

from __future__ import annotations

import ast
import inspect

import numpy as np

from ...errors import MSCError, ParseError
from ...tir import expr as tir
from ..expr import (
    Call,
    Constant,
    DataTypeImm,
    Expr,
    ExternFunc,
    GlobalVar,
    PrimValue,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
    const,
)
from ..op import registry
from ..printer.calls import SINFO_KEYWORDS, sinfo_keyword
from ..struct_info import ObjectStructInfo, StructInfo, TensorStructInfo, TupleStructInfo
from ..tvm_json import CONSTANT_TYPES as CONSTANT_KEYS
from .sinfo import PrimParser, SinfoParser

# Keywords that carry a call's sinfo_args (TVM 0.27 spelling first).
SINFO_KWARGS = ("out_ty", "out_sinfo", "ty_args", "sinfo_args")
# R.<name> forms that only make sense as statements.
STATEMENT_ONLY = ("dataflow", "output", "func_attr", "function")


class ExprParser:
    """Turns expression nodes into Relax exprs or plain values (ints, lists, struct info).

    ``env`` maps names to Relax vars; ``normalize(expr, node)`` infers struct info (errors
    become ParseErrors at ``node``); ``metadata`` maps keys to lists of constants.
    """

    def __init__(self, ctx, syms, env: dict, normalize, metadata: dict | None):
        self.ctx = ctx
        self.env = env
        self.normalize = normalize
        self.metadata = metadata
        self.prims = PrimParser(ctx, syms, self._prim_name)
        self.sinfos = SinfoParser(ctx, self.prims)

    def _prim_name(self, name: str):
        var = self.env.get(name)
        if isinstance(var, Var) and var.struct_info is not None and \
                type(var.struct_info).__name__ == "PrimStructInfo" and \
                var.struct_info.value is not None:
            return var.struct_info.value
        return None

    # ---- dispatch --------------------------------------------------------------------------
    def value(self, node):
        handler = getattr(self, f"_v_{type(node).__name__}", None)
        if handler is None:
            raise self.ctx.error(node, f"unsupported syntax: {type(node).__name__}",
                                 hint="TVMScript bodies hold bindings of R.* calls, tuples, "
                                      "indexing and constants")
        return handler(node)

    def expr(self, node) -> Expr:
        """A Relax expression (Python values converted: ints -> PrimValue, tuples -> Tuple)."""
        return self.to_expr(self.value(node), node)

    def to_expr(self, value, node) -> Expr:
        if isinstance(value, Expr):
            return value
        if isinstance(value, (list, tuple)):
            return self.normalize(Tuple([self.to_expr(v, node) for v in value]), node)
        if isinstance(value, (bool, int, float, tir.PrimExpr)):
            return PrimValue(value)
        if isinstance(value, str):
            return StringImm(value)
        if isinstance(value, StructInfo):
            raise self.ctx.error(node, "a struct info is not a value here")
        raise self.ctx.error(node, f"{value!r} is not a Relax value")

    # ---- leaves ----------------------------------------------------------------------------
    def _v_Constant(self, node):
        if node.value is Ellipsis or isinstance(node.value, (bytes, complex)):
            raise self.ctx.error(node, f"unsupported literal {node.value!r}")
        return node.value

    def _v_Name(self, node):
        name = node.id
        if name in self.env:
            return self.env[name]
        if name in self.prims.syms.vars:
            return self.prims.syms.vars[name]
        if name in self.ctx.global_vars:
            return self.ctx.global_vars[name]
        raise self.ctx.error(node, f"undefined variable {name!r}",
                             hint="bind it before use; module functions are cls.<name>")

    def _v_Tuple(self, node):
        return tuple(self.value(e) for e in node.elts)

    def _v_List(self, node):
        return [self.value(e) for e in node.elts]

    def _v_Dict(self, node):
        if any(k is None for k in node.keys):
            raise self.ctx.error(node, "** in a dict is not supported")
        return {self.value(k): self.value(v) for k, v in zip(node.keys, node.values)}

    def _v_Attribute(self, node):
        if isinstance(node.value, ast.Name) and node.value.id in ("cls", self.ctx.module_name):
            return self.global_var(node.attr, node)
        if self.sinfos.is_sinfo(node):
            return self.sinfos.sinfo(node)
        raise self.ctx.error(node, f"unsupported attribute {ast.unparse(node)!r}")

    def global_var(self, name: str, node) -> GlobalVar:
        if name not in self.ctx.global_vars:
            raise self.ctx.error(node, f"module has no function {name!r}",
                                 hint="functions: " + ", ".join(self.ctx.global_vars))
        return self.ctx.global_vars[name]

    def _v_Subscript(self, node):
        meta = self._metadata_ref(node)
        if meta is not None:
            return meta
        base = self.expr(node.value)
        index = self.prims.prim(node.slice)
        if not isinstance(index, tir.IntImm):
            raise self.ctx.error(node.slice, "a tuple index must be an integer constant")
        try:
            return self.normalize(TupleGetItem(base, index.value), node)
        except ParseError:
            raise
        except MSCError as err:
            raise self.ctx.wrap(node, err) from None

    def _metadata_ref(self, node):
        inner = node.value
        if not (isinstance(inner, ast.Subscript) and isinstance(inner.value, ast.Name)
                and inner.value.id == "metadata"):
            return None
        key, index = self._literal(inner.slice), self._literal(node.slice)
        if self.metadata is None:
            raise self.ctx.error(node, "metadata[...] is used but the text has no metadata "
                                       "section", hint="print with show_meta=True, or pass "
                                                       "metadata={key: [arrays]} to "
                                                       "from_script")
        table = self.metadata.get(key)
        if table is None:  # the same constants under another TVM version's key
            others = [self.metadata[k] for k in CONSTANT_KEYS if k in self.metadata]
            table = others[0] if key in CONSTANT_KEYS and len(others) == 1 else None
        if table is None or not isinstance(index, int) or not 0 <= index < len(table):
            raise self.ctx.error(node, f"metadata[{key!r}][{index!r}] is not in the metadata "
                                       "section")
        return table[index]

    def _literal(self, node):
        if isinstance(node, ast.Constant):
            return node.value
        raise self.ctx.error(node, "expected a literal key")

    # ---- operators -------------------------------------------------------------------------
    def _v_BinOp(self, node):
        return self._prim_op(node)

    def _v_UnaryOp(self, node):
        if isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) and \
                isinstance(node.operand.value, (int, float)):
            return -node.operand.value
        return self._prim_op(node)

    def _v_Compare(self, node):
        return self._prim_op(node)

    def _prim_op(self, node):
        for child in ast.walk(node):
            if isinstance(child, ast.Name) and isinstance(self.env.get(child.id), Expr) and \
                    self._prim_name(child.id) is None:
                raise self.ctx.error(child, "Python operators on Relax values are not "
                                            "supported", hint="use R.add, R.multiply, ...")
        return self.prims.prim(node)

    # ---- calls -----------------------------------------------------------------------------
    def _v_Call(self, node):
        space, parts = self.ctx.namespace(node.func)
        if space == "T":
            return self.prims.prim(node)
        if space == "R":
            return self._r_call(node, ".".join(parts))
        if space == "I":
            raise self.ctx.error(node.func, f"I.{'.'.join(parts)} is not an expression")
        if _is_float_literal(node):
            return float(node.args[0].value)  # float("inf"): a literal, not a call
        return self._func_call(node)

    def _args(self, node):
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise self.ctx.error(a, "*args are not supported")
        for k in node.keywords:
            if k.arg is None:
                raise self.ctx.error(k, "**kwargs are not supported")
        args = [self.value(a) for a in node.args]
        kwargs = {k.arg: self._kwarg(k) for k in node.keywords}
        return args, kwargs

    def _kwarg(self, keyword):
        if keyword.arg in SINFO_KWARGS:
            return self._sinfo_list(keyword.value)
        return self.value(keyword.value)

    def _sinfo_list(self, node):
        if isinstance(node, (ast.Tuple, ast.List)):
            return [self.sinfos.sinfo(e) for e in node.elts]
        return self.sinfos.sinfo(node)

    def _r_call(self, node, name: str):
        if name in STATEMENT_ONLY:
            raise self.ctx.error(node, f"R.{name}(...) is only valid as a statement")
        special = _R_SPECIAL.get(name)
        if special is not None:
            return special(self, node)
        if self.sinfos.is_sinfo(node):
            return self.sinfos.sinfo(node)
        try:
            op_def = registry.get_op(name)
        except MSCError as err:
            raise self.ctx.error(node.func, f"unknown op R.{name}", hint=err.hint) from None
        args, kwargs = self._args(node)
        return self.normalize(self._op_call(node, op_def, args, kwargs), node)

    def _op_call(self, node, op_def, args, kwargs) -> Call:
        sinfo = _pop_sinfo(kwargs)
        if sinfo is None:
            sinfo = _legacy_out_sinfo(op_def, args, kwargs)
        try:
            if op_def.builder is not None:
                return _call_builder(op_def, args, kwargs, sinfo)
            call = registry.make_call(op_def.name, *args, **kwargs)
        except ParseError:
            raise
        except MSCError as err:
            raise self.ctx.wrap(node, err) from None
        except (TypeError, ValueError) as err:
            raise self.ctx.error(node, f"bad arguments for R.{op_def.name}: {err}") from None
        if sinfo is not None:
            sinfo_args = sinfo if isinstance(sinfo, list) else [sinfo]
            call = Call(call.op, call.args, call.attrs, sinfo_args)
        return call

    def _func_call(self, node):
        args, kwargs = self._args(node)
        sinfo = _pop_sinfo(kwargs)
        if kwargs:
            raise self.ctx.error(node.keywords[0], "calls to functions take positional "
                                                   "arguments only")
        callee = self._callee(node.func)
        exprs = [self.to_expr(a, node) for a in args]
        sinfo_args = [] if sinfo is None else (sinfo if isinstance(sinfo, list) else [sinfo])
        return self.normalize(Call(callee, exprs, None, sinfo_args), node)

    def _callee(self, func):
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                func.value.id in ("cls", self.ctx.module_name):
            return self.global_var(func.attr, func)
        if isinstance(func, ast.Name):
            if func.id in self.env:
                return self.env[func.id]
            if func.id in self.ctx.global_vars:
                return self.ctx.global_vars[func.id]
            raise self.ctx.error(func, f"undefined function {func.id!r}",
                                 hint="call ops as R.<op>(...) and module functions as "
                                      "cls.<name>(...)")
        raise self.ctx.error(func, f"unsupported callee {ast.unparse(func)!r}")

    # ---- R.* special forms -----------------------------------------------------------------
    def _r_const(self, node):
        args, kwargs = self._args(node)
        value = args[0] if args else kwargs.get("value")
        dtype = args[1] if len(args) > 1 else kwargs.get("dtype")
        if isinstance(value, str):  # R.const("inf", "float32")
            value = float(value)
        if isinstance(value, tir.PrimExpr) and value.is_const:
            value = value.value
        if not isinstance(value, (bool, int, float, list)):
            raise self.ctx.error(node, "R.const takes a number (and a dtype)")
        try:
            return const(np.asarray(value, dtype=dtype) if dtype else value)
        except (TypeError, ValueError, MSCError) as err:
            raise self.ctx.error(node, f"invalid constant: {err}") from None

    def _r_shape(self, node):
        if len(node.args) != 1 or not isinstance(node.args[0], (ast.List, ast.Tuple)):
            raise self.ctx.error(node, "R.shape takes a list of dims: R.shape([n, 4])")
        return ShapeExpr([self.prims.prim(e) for e in node.args[0].elts])

    def _r_prim_value(self, node):
        if len(node.args) != 1:
            raise self.ctx.error(node, "R.prim_value takes one value")
        return PrimValue(self.prims.prim(node.args[0]))

    def _r_str(self, node):
        return StringImm(self._one_str(node, "R.str"))

    def _r_dtype(self, node):
        return DataTypeImm(self._one_str(node, "R.dtype"))

    def _one_str(self, node, what: str) -> str:
        if len(node.args) != 1 or not isinstance(node.args[0], ast.Constant) or \
                not isinstance(node.args[0].value, str):
            raise self.ctx.error(node, f"{what} takes one string literal")
        return node.args[0].value

    def _r_tuple(self, node):
        args, _ = self._args(node)
        return self.normalize(Tuple([self.to_expr(a, node) for a in args]), node)

    def _r_call_packed(self, node):
        args, kwargs = self._args(node)
        sinfo = _pop_sinfo(kwargs)
        if not args or not isinstance(args[0], str):
            raise self.ctx.error(node, 'R.call_packed takes the function name first: '
                                       'R.call_packed("name", args..., ty_args=...)')
        sinfo_args = [] if sinfo is None else (sinfo if isinstance(sinfo, list) else [sinfo])
        exprs = [self.normalize(self.to_expr(a, node), node) for a in args[1:]]
        call = Call(ExternFunc(args[0]), exprs, None, sinfo_args)
        call._set_struct_info(_packed_result(sinfo_args))
        return call

    def _r_match_cast(self, node):
        raise self.ctx.error(node, "R.match_cast is only valid as the value of a binding")


_R_SPECIAL = {
    "const": ExprParser._r_const,
    "shape": ExprParser._r_shape,
    "prim_value": ExprParser._r_prim_value,
    "str": ExprParser._r_str,
    "dtype": ExprParser._r_dtype,
    "tuple": ExprParser._r_tuple,
    "call_packed": ExprParser._r_call_packed,
    "match_cast": ExprParser._r_match_cast,
}


def _legacy_out_sinfo(op_def, args: list, kwargs: dict):
    """Older TVMScript: ``R.call_tir(cls.f, (x,), (1, 128), dtype="float32")`` gives the
    output as a shape and a dtype where 0.27 takes ``out_ty=R.Tensor(...)``."""
    keyword, position = sinfo_keyword(op_def)
    if keyword != "out_ty" or position is None or "dtype" not in kwargs or \
            len(args) <= position or not isinstance(args[position], (list, tuple)):
        return None
    shape = args.pop(position)
    return TensorStructInfo(list(shape), kwargs.pop("dtype"))


def _is_float_literal(node: ast.Call) -> bool:
    return isinstance(node.func, ast.Name) and node.func.id == "float" and \
        len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant) \
        and node.args[0].value in ("inf", "-inf", "nan")


def _pop_sinfo(kwargs: dict):
    found = [k for k in SINFO_KWARGS if k in kwargs]
    return kwargs.pop(found[0]) if found else None


def _call_builder(op_def, args, kwargs, sinfo):
    """Ops with a custom Python signature (call_tir & co): pass the sinfo under whichever
    name the builder takes, and strings for extern function names."""
    params = list(inspect.signature(op_def.builder).parameters)
    args = [_plain(a) for a in args]
    kwargs = {k: _plain(v) for k, v in kwargs.items()}
    if sinfo is not None:
        name = next((p for p in params if p in SINFO_KEYWORDS), None)
        if name is None:
            raise TypeError(f"R.{op_def.name} takes no out_ty/ty_args")
        kwargs[name] = sinfo
    return op_def.builder(*args, **kwargs)


def _packed_result(sinfo_args: list) -> StructInfo:
    """A packed call returns its one ty_arg, a tuple of several, or an opaque object."""
    if len(sinfo_args) == 1:
        return sinfo_args[0]
    return TupleStructInfo(sinfo_args) if sinfo_args else ObjectStructInfo()


def _plain(value):
    """Builders take Python values: ``R.str("x")`` is passed as "x"."""
    return value.value if isinstance(value, StringImm) else value


def constant_from(array) -> Constant:
    return array if isinstance(array, Constant) else const(np.asarray(array))
