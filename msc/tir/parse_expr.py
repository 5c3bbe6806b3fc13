"""TIR expression parsing from Python ``ast`` (the value half of ``msc.tir.parser``).

Builds nodes directly (``BinaryOp``, ``PrimCall``...) without simplifying, so the printed text
matches the source. Literals adopt the dtype of the typed operand beside them.
"""

from __future__ import annotations

import ast

import numpy as np

from ..errors import ParseError
from . import expr as E
from . import intrin
from .expr import is_float, is_int
from .function import Buffer, BufferLoad, StringImm

_BINOPS = {ast.Add: "Add", ast.Sub: "Sub", ast.Mult: "Mul", ast.Div: "Div",
           ast.FloorDiv: "FloorDiv", ast.Mod: "FloorMod"}
_BITOPS = {ast.BitAnd: "bitwise_and", ast.BitOr: "bitwise_or", ast.BitXor: "bitwise_xor",
           ast.LShift: "shift_left", ast.RShift: "shift_right"}
_CMPOPS = {ast.Eq: "EQ", ast.NotEq: "NE", ast.Lt: "LT", ast.LtE: "LE", ast.Gt: "GT",
           ast.GtE: "GE"}
_INT32 = (-(2 ** 31), 2 ** 31 - 1)


def _py_value(value):
    """A Python value of the enclosing scope as a TIR value (None: not one)."""
    if isinstance(value, E.PrimExpr):
        return value
    if isinstance(value, bool):
        return E.IntImm(int(value), "bool")
    if isinstance(value, int):
        return E.IntImm(value, "int32")
    if isinstance(value, float):
        return E.FloatImm(value, "float32")
    return None


def t_name(node) -> str | None:
    """``T.a.b`` -> ``"a.b"``; None for anything not rooted at the ``T`` namespace."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id == "T" and parts:
        return ".".join(reversed(parts))
    return None


def is_literal(node: ast.expr) -> bool:
    """A bare Python number (possibly negated): it takes the dtype of its typed neighbour."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def make_imm(value, dtype: str) -> E.PrimExpr:
    """A constant of ``dtype`` (``T.float32(0)``, ``T.int64(-1)``, ``T.bool(True)``)."""
    if is_float(dtype):
        return E.FloatImm(float(value), dtype)
    return E.IntImm(int(value), dtype)


class ExprParser:
    """Resolves names through a stack of frames (dicts name -> Var/Buffer)."""

    def __init__(self, source: str, frames: list, py_env: dict | None = None):
        self.source = source
        self.frames = frames
        self.implicit_vars = False  # in a signature, unknown names become int64 vars
        # The Python names the decorated function sees (its globals and closure): numbers and
        # PrimExprs read as values, strings as dtypes, functions are called on the parsed
        # arguments (TVM's parser evaluates such names the same way).
        self.py_env: dict = dict(py_env or {})
        self.anchor: ast.AST | None = None  # error position while parsing a string dim

    # ---------------------------------------------------------------- helpers
    def error(self, node, message: str, hint: str | None = None) -> ParseError:
        node = self.anchor or node
        line = getattr(node, "lineno", None)
        col = getattr(node, "col_offset", None)
        return ParseError(message, source=self.source, line=line,
                          col=None if col is None else col + 1, hint=hint)

    def lookup(self, node: ast.Name):
        for frame in reversed(self.frames):
            if node.id in frame:
                return frame[node.id]
        if node.id in self.py_env and _py_value(self.py_env[node.id]) is not None:
            return _py_value(self.py_env[node.id])
        if self.implicit_vars:
            var = E.Var(node.id, "int64")
            self.frames[1 if len(self.frames) > 1 else 0][node.id] = var
            return var
        raise self.error(node, f"undefined name {node.id!r} in prim func")

    def thread_launch(self, node: ast.With, call: ast.Call) -> dict:
        """``with T.launch_thread("threadIdx.x", n) as x:`` (TVM's GPU thread launch) as the
        loop TVM makes of it, ``for x in T.thread_binding(n, thread="threadIdx.x")``: the
        parser's loop arguments. (``x = T.launch_thread(tag, n)`` is an opaque call.)"""
        target = node.items[0].optional_vars
        if len(call.args) != 2 or not isinstance(target, ast.Name):
            raise self.error(call, "expected `with T.launch_thread(tag, extent) as name:`")
        extent = self.expr(call.args[1])
        return {"name": target.id, "lo": zero_like(extent), "extent": extent,
                "kind": "thread_binding", "body": node.body, "thread": self.constant(call.args[0])}

    def declare_vars(self, decls: list) -> None:
        """``n = T.int32()`` in a body (TVM's declared vars, e.g. a match_buffer's
        ``elem_offset``): a var of that name unless one is in scope already."""
        for name, dtype in decls:
            if not any(name in frame for frame in self.frames):
                self.frames[-1][name] = E.Var(name, dtype)

    def buffer(self, node: ast.expr) -> Buffer:
        value = self.lookup(node) if isinstance(node, ast.Name) else None
        if not isinstance(value, Buffer):
            raise self.error(node, f"{ast.unparse(node)!r} is not a buffer")
        return value

    def constant(self, node: ast.expr):
        """A Python literal (str, number, bool, None), negatives included."""
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and \
                isinstance(node.operand, ast.Constant):
            return -node.operand.value
        if not isinstance(node, ast.Constant):
            raise self.error(node, "expected a literal value here")
        return node.value

    def dtype_arg(self, node: ast.expr) -> str:
        value = self.constant(node) if isinstance(node, ast.Constant) else t_name(node)
        if isinstance(node, ast.Name) and isinstance(self.py_env.get(node.id), str):
            value = self.py_env[node.id]  # a dtype held in a Python variable
        if value not in intrin.DTYPES:
            raise self.error(node, f"unknown dtype {ast.unparse(node)}",
                             hint=f"use one of {', '.join(sorted(intrin.DTYPES))}")
        return value

    def single_arg(self, call: ast.Call) -> ast.expr:
        if len(call.args) != 1 or call.keywords:
            raise self.error(call, f"{ast.unparse(call.func)} takes exactly one argument")
        return call.args[0]

    def attr_dict(self, node: ast.expr) -> dict:
        if not isinstance(node, ast.Dict) or None in node.keys:
            raise self.error(node, "expected a dict literal of attributes")
        return {self.constant(k): self.attr_value(v) for k, v in zip(node.keys, node.values)}

    def attr_value(self, node: ast.expr):
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.attr_value(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            return self.attr_dict(node)
        if isinstance(node, ast.Constant) or is_literal(node):
            return self.constant(node)
        if isinstance(node, ast.Name) and isinstance(self.py_env.get(node.id), str) and \
                not any(node.id in frame for frame in self.frames):
            return self.py_env[node.id]  # a string held in a Python variable of the scope
        if isinstance(node, ast.Name) and isinstance(self.lookup(node), Buffer):
            return self.lookup(node)
        value = self.expr(node)
        if isinstance(value, E.IntImm) and value.dtype == "bool":
            return bool(value.value)  # older TVM printed T.bool(True) in func_attr
        return value

    def check_known(self, call: ast.Call) -> None:
        name = t_name(call.func)
        if name is not None and name not in intrin.TIR_NAMES:
            raise self.error(call.func, f"unknown TIR intrinsic T.{name}",
                             hint="see msc.tir.intrin.TIR_NAMES for the supported names")

    # ---------------------------------------------------------------- literals
    def adopt(self, value: E.PrimExpr, dtype: str) -> E.PrimExpr:
        """Give a literal the dtype it is combined with."""
        if not isinstance(value, (E.IntImm, E.FloatImm)) or value.dtype == "bool":
            return value
        if is_float(dtype) or (is_int(dtype) and isinstance(value, E.IntImm)):
            return make_imm(value.value, dtype)
        return value

    def operands(self, nodes: list) -> list:
        exprs = [self.expr(n) for n in nodes]
        typed = next((e for n, e in zip(nodes, exprs) if not is_literal(n)), None)
        if typed is None:
            return exprs
        exprs = [self.adopt(e, typed.dtype) if is_literal(n) else e for n, e in zip(nodes, exprs)]
        return _match_int_float(exprs)

    # ---------------------------------------------------------------- expressions
    def expr(self, node: ast.expr) -> E.PrimExpr:
        handler = _EXPRS.get(type(node))
        if handler is None:
            raise self.error(node, f"unsupported expression `{ast.unparse(node)}` in a prim "
                                   "func")
        return handler(self, node)

    def _constant(self, node: ast.Constant) -> E.PrimExpr:
        value = node.value
        if isinstance(value, bool):
            return E.IntImm(int(value), "bool")
        if isinstance(value, int):
            return E.IntImm(value, "int32" if _INT32[0] <= value <= _INT32[1] else "int64")
        if isinstance(value, float):
            return E.FloatImm(value, "float32")
        if isinstance(value, str):
            if self.implicit_vars:
                return self._string_dim(node)
            return StringImm(value)
        raise self.error(node, f"unsupported literal {value!r}")

    def _string_dim(self, node: ast.Constant) -> E.PrimExpr:
        """TVM prints compound signature dims as strings: ``T.Buffer(("n * 2",), ...)``."""
        try:
            inner = ast.parse(node.value.strip(), mode="eval").body
        except SyntaxError:
            raise self.error(node, f"cannot parse the dim {node.value!r}") from None
        previous, self.anchor = self.anchor, self.anchor or node
        try:
            return self.expr(inner)
        finally:
            self.anchor = previous

    def _attribute(self, node: ast.Attribute) -> E.PrimExpr:
        """``B.data`` (the data pointer, a handle var named ``B.data``) and ``B.elem_offset``
        (the buffer's stated offset, else an int32 var named ``B.elem_offset``)."""
        if node.attr not in _BUFFER_FIELDS or not isinstance(node.value, ast.Name):
            raise self.error(node, f"unsupported expression {ast.unparse(node)} in a prim func",
                             hint="of a buffer's attributes B.data and B.elem_offset are "
                                  "expressions")
        buf = self.buffer(node.value)
        if node.attr == "elem_offset" and buf.elem_offset is not None:
            return buf.elem_offset
        return E.Var(f"{buf.name}.{node.attr}", _BUFFER_FIELDS[node.attr])

    def _stride(self, target: ast.expr, index: ast.expr) -> E.PrimExpr:
        """``B.strides[k]``: the stated stride, else an int32 var named ``B.strides[k]``."""
        buf = self.buffer(target)
        if not (isinstance(index, ast.Constant) and type(index.value) is int
                and 0 <= index.value < buf.ndim):
            raise self.error(index, f"B.strides takes a constant dim below {buf.ndim}")
        if buf.strides is not None:
            return buf.strides[index.value]
        return E.Var(f"{buf.name}.strides[{index.value}]", "int32")

    def _name(self, node: ast.Name) -> E.PrimExpr:
        value = self.lookup(node)
        if isinstance(value, Buffer):
            raise self.error(node, f"buffer {node.id!r} used as a value; index it: "
                                   f"{node.id}[...]")
        return value

    def _binop(self, node: ast.BinOp) -> E.PrimExpr:
        a, b = self.operands([node.left, node.right])
        kind = _BINOPS.get(type(node.op))
        if kind:
            return E.BinaryOp(kind, a, b)
        name = _BITOPS.get(type(node.op))
        if name is None:
            raise self.error(node, f"operator {type(node.op).__name__} is not supported in TIR")
        return E.PrimCall(name, [a, b], a.dtype)

    def _unaryop(self, node: ast.UnaryOp) -> E.PrimExpr:
        if is_literal(node):
            return self._constant(ast.Constant(self.constant(node)))
        value = self.expr(node.operand)
        op = type(node.op)
        if op is ast.UAdd:
            return value
        if op is ast.Not:
            return E.Not(value)
        if op is ast.Invert:
            return E.PrimCall("bitwise_not", [value], value.dtype)
        return E.BinaryOp("Mul", value, make_imm(-1, value.dtype))

    def _boolop(self, node: ast.BoolOp) -> E.PrimExpr:
        kind = "And" if isinstance(node.op, ast.And) else "Or"
        values = [self.expr(v) for v in node.values]
        result = values[0]
        for v in values[1:]:
            result = E.BinaryOp(kind, result, v)
        return result

    def _compare(self, node: ast.Compare) -> E.PrimExpr:
        result, left = None, node.left
        for op, right in zip(node.ops, node.comparators):
            kind = _CMPOPS.get(type(op))
            if kind is None:
                raise self.error(node, f"comparison {type(op).__name__} is not supported")
            cmp = E.BinaryOp(kind, *self.operands([left, right]))
            result = cmp if result is None else E.BinaryOp("And", result, cmp)
            left = right
        return result

    def _subscript(self, node: ast.Subscript) -> E.PrimExpr:
        if isinstance(node.value, ast.Attribute) and node.value.attr == "strides":
            return self._stride(node.value.value, node.slice)
        buf = self.buffer(node.value)
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if any(isinstance(e, ast.Slice) for e in elts):
            raise self.error(node, "slices are only allowed in T.reads/T.writes")
        if len(elts) != buf.ndim:
            raise self.error(node, f"buffer {buf.name!r} has {buf.ndim} dims, indexed with "
                                   f"{len(elts)}")
        return BufferLoad(buf, [self.expr(e) for e in elts])

    def _call(self, node: ast.Call) -> E.PrimExpr:
        if isinstance(node.func, ast.Attribute) and node.func.attr == "access_ptr" and \
                isinstance(node.func.value, ast.Name):
            return self._access_ptr(node)
        name = t_name(node.func)
        if name is None and self._py_callee(node.func) is not None:
            return self._py_call(node)
        if name is None:
            raise self.error(node.func, f"unknown function {ast.unparse(node.func)} in a prim "
                                        "func", hint="TIR calls are written T.<name>(...)")
        self.check_known(node)
        extra = [k for k in node.keywords if k.arg != "dtype"]
        if extra or (node.keywords and name not in _DTYPE_KWARG):
            bad = (extra or node.keywords)[0]
            raise self.error(bad.value, f"T.{name} takes no keyword argument {bad.arg!r}")
        handler = _CALLS.get(name) or _CALL_GROUPS.get(_group(name))
        if handler is None:
            raise self.error(node.func, f"T.{name} cannot be used as a value")
        value = handler(self, name, node)
        if node.keywords and name not in intrin.TYPED_CALLS.union(intrin.OPAQUE_CALLS):
            dtype = self.dtype_arg(node.keywords[0].value)
            if dtype != value.dtype:
                raise self.error(node.keywords[0].value, f"T.{name} gives {value.dtype}, "
                                 f"not dtype={dtype!r}", hint="cast with T.Cast(dtype, x)")
        return value

    def _py_callee(self, func: ast.expr):
        """The Python function ``func`` names: a callable of the enclosing scope, or one
        that such a callable returns for constant arguments (``make(32)(x, y)``)."""
        if isinstance(func, ast.Name):
            fn = self.py_env.get(func.id)
            return fn if callable(fn) and not any(func.id in f for f in self.frames) else None
        if isinstance(func, ast.Call) and not func.keywords and \
                all(is_literal(a) for a in func.args):
            maker = self._py_callee(func.func)
            if maker is not None:
                made = maker(*[self.constant(a) for a in func.args])
                return made if callable(made) else None
        return None

    def _py_call(self, node: ast.Call) -> E.PrimExpr:
        """A Python function of the enclosing scope called on parsed arguments (keyword
        arguments are constants): its result (built on PrimExprs) is the value."""
        fn = self._py_callee(node.func)
        try:
            kwargs = {k.arg: self.constant(k.value) for k in node.keywords}
            args = [self.constant(a) if is_literal(a) else self.expr(a) for a in node.args]
            value = fn(*args, **kwargs)  # literals as Python values, as TVM's parser passes
            return E.convert(value)
        except ParseError:
            raise
        except Exception as exc:  # the user's function: report it at the call  # noqa: BLE001
            raise self.error(node, f"calling {ast.unparse(node.func)}(...) failed: "
                                   f"{type(exc).__name__}: {exc}") from None

    def _access_ptr(self, node: ast.Call) -> E.PrimExpr:
        """``B.access_ptr(mask, ptr_type="handle", content_lanes=1, offset=0, extent=None)``
        is TVM's ``T.tvm_access_ptr(T.type_annotation(dtype), B.data, B.elem_offset + offset,
        extent, mask)``: parsed as that call, so both spellings are the same expression. The
        mask is "r", "w", "rw" or its bits (1 read, 2 write); the extent defaults to the
        elements from the offset to the buffer's end."""
        buf = self.buffer(node.func.value)
        names = ("access_mask", "ptr_type", "content_lanes", "offset", "extent")
        given = dict(zip(names, node.args)) | {k.arg: k.value for k in node.keywords}
        unknown = sorted(set(given) - set(names))
        if unknown or "access_mask" not in given or len(node.args) > len(names):
            raise self.error(node, f"{buf.name}.access_ptr takes (access_mask, ptr_type, "
                                   f"content_lanes, offset, extent)"
                                   + (f", not {unknown[0]!r}" if unknown else ""))
        for key, default in (("ptr_type", "handle"), ("content_lanes", 1)):
            if key in given and not (isinstance(given[key], ast.Constant)
                                     and given[key].value == default):
                raise self.error(given[key], f"{buf.name}.access_ptr supports {key}={default!r} "
                                             "only")
        mask = given["access_mask"]
        if isinstance(mask, ast.Constant) and isinstance(mask.value, str):
            if not mask.value or set(mask.value) - {"r", "w"}:
                raise self.error(mask, f"access mask {mask.value!r}: use 'r', 'w' or 'rw'")
            mask = ast.Constant(("r" in mask.value) + 2 * ("w" in mask.value))
        offset = given.get("offset", ast.Constant(0))
        base = buf.elem_offset if buf.elem_offset is not None else E.IntImm(0, "int32")
        start = E.add(base, self.expr(offset))  # constants fold, as TVM's operators do
        size = E.IntImm(1, "int32")
        for dim in buf.shape:
            size = E.mul(size, dim)
        extent = self.expr(given["extent"]) if "extent" in given else E.sub(size, start)
        annotation = E.PrimCall("type_annotation", [], buf.dtype)
        data = E.Var(f"{buf.name}.data", "handle")
        return E.PrimCall("tvm_access_ptr", [annotation, data, start, extent,
                                             self.expr(mask)], "handle")

    # ---------------------------------------------------------------- calls
    def _dtype_call(self, dtype: str, node: ast.Call) -> E.PrimExpr:
        if len(node.args) != 1:
            raise self.error(node, f"T.{dtype}(value) takes one value; declare a symbolic var "
                                   f"with `n = T.{dtype}()` at the top of the function")
        arg = node.args[0]
        if is_literal(arg) or (isinstance(arg, ast.Constant) and type(arg.value) is bool):
            return make_imm(self.constant(arg), dtype)
        if isinstance(arg, ast.Constant) and arg.value in ("inf", "-inf", "nan"):
            return E.FloatImm(float(arg.value), dtype)
        if isinstance(arg, ast.Name) and not any(arg.id in f for f in self.frames) and \
                type(self.py_env.get(arg.id)) in (int, float, bool):
            return make_imm(self.py_env[arg.id], dtype)  # T.float32(lower): a Python number
        return E.Cast(dtype, self.expr(arg))

    def _cast(self, name: str, node: ast.Call) -> E.PrimExpr:
        self._arity(name, node, 2)
        value, dtype = node.args if name == "cast" else node.args[::-1]  # T.cast(x, dtype)
        return E.Cast(self.dtype_arg(dtype), self.expr(value))

    def _opaque_dtype(self, node: ast.expr) -> str:
        if isinstance(node, ast.Constant) and node.value in ("handle", "void", ""):
            return node.value or "void"
        return self.dtype_arg(node)

    def _opaque(self, name: str, node: ast.Call) -> E.PrimExpr:
        if name == "type_annotation":  # T.type_annotation("float32"): a call of that dtype
            given = node.args or [k.value for k in node.keywords]
            if len(given) != 1:
                raise self.error(node, "T.type_annotation takes one dtype")
            return E.PrimCall(name, [], self._opaque_dtype(given[0]))
        dtype = next((self._opaque_dtype(k.value) for k in node.keywords), None)
        args = [self.expr(a) for a in node.args]
        return E.PrimCall(name, args, dtype or intrin.OPAQUE_CALLS[name])

    def _select(self, name: str, node: ast.Call) -> E.PrimExpr:
        self._arity(name, node, 3)
        cond = self.expr(node.args[0])
        t, f = self.operands(node.args[1:])
        if name == "Select":
            return E.Select(cond, t, f)
        return E.PrimCall(name, [cond, t, f], t.dtype)

    def _limit(self, name: str, node: ast.Call) -> E.PrimExpr:
        self._arity(name, node, 1)
        dtype = self.dtype_arg(node.args[0])
        info = np.finfo(dtype) if is_float(dtype) else np.iinfo(dtype)
        return make_imm(info.max if name == "max_value" else info.min, dtype)

    def _ceildiv(self, name: str, node: ast.Call) -> E.PrimExpr:
        """``T.ceildiv(a, b)``: ``(a + b - 1) // b``, as TVM's helper builds it."""
        self._arity(name, node, 2)
        return E.ceildiv(*self.operands(node.args))

    def _binary_func(self, name: str, node: ast.Call) -> E.PrimExpr:
        self._arity(name, node, 2)
        return E.BinaryOp(intrin.BINARY_FUNCS[name], *self.operands(node.args))

    def _math(self, name: str, node: ast.Call) -> E.PrimExpr:
        arity = 1 if name in intrin.MATH_UNARY or name in intrin.PREDICATES else 2
        self._arity(name, node, arity)
        args = self.operands(node.args)
        if name == "abs" and is_float(args[0].dtype):
            name = "fabs"  # as TVM: T.abs on floats is fabs
        return E.PrimCall(name, args, intrin.call_dtype(name, args))

    def _typed_call(self, name: str, node: ast.Call) -> E.PrimExpr:
        """``T.call_extern(dtype, "f", *args)`` or ``T.call_extern("f", *args, dtype=...)``;
        the dtype may be "handle" or "void" (also spelled "")."""
        if node.keywords:
            dtype_node, rest = node.keywords[0].value, node.args
        else:
            dtype_node, rest = (node.args or [None])[0], node.args[1:]
        if dtype_node is None or not rest:
            raise self.error(node, f"T.{name} needs (dtype, name, *args)")
        args = [self.expr(a) for a in rest]
        return E.PrimCall(name, args, self._opaque_dtype(dtype_node))

    def _arity(self, name: str, node: ast.Call, count: int) -> None:
        if len(node.args) != count:
            raise self.error(node, f"T.{name} takes {count} argument(s), got {len(node.args)}")


def _group(name: str) -> str | None:
    for group, names in (("dtype", intrin.DTYPES), ("binary", intrin.BINARY_FUNCS),
                         ("math", intrin.MATH_UNARY | intrin.MATH_BINARY | intrin.PREDICATES
                          | set(intrin.BITWISE)), ("typed", intrin.TYPED_CALLS),
                         ("opaque", intrin.OPAQUE_CALLS)):
        if name in names:
            return group
    return None


_EXPRS = {
    ast.Constant: ExprParser._constant,
    ast.Name: ExprParser._name,
    ast.BinOp: ExprParser._binop,
    ast.UnaryOp: ExprParser._unaryop,
    ast.BoolOp: ExprParser._boolop,
    ast.Compare: ExprParser._compare,
    ast.Subscript: ExprParser._subscript,
    ast.Call: ExprParser._call,
    ast.Attribute: ExprParser._attribute,
}
_CALLS = {
    "Cast": ExprParser._cast,
    "cast": ExprParser._cast,
    "Select": ExprParser._select,
    "if_then_else": ExprParser._select,
    "max_value": ExprParser._limit,
    "min_value": ExprParser._limit,
    "ceildiv": ExprParser._ceildiv,
}
_CALL_GROUPS = {
    "dtype": ExprParser._dtype_call,
    "binary": ExprParser._binary_func,
    "math": ExprParser._math,
    "typed": ExprParser._typed_call,
    "opaque": ExprParser._opaque,
}
def _match_int_float(exprs: list) -> list:
    """TVM's ``BinaryOpMatchTypes`` for an int and a float operand: the int one is cast to
    the float's dtype (``v * 2 + 0.5`` is ``T.Cast("float32", v * 2) + T.float32(0.5)``)."""
    floats = [e.dtype for e in exprs if is_float(e.dtype)]
    if not floats or len(exprs) != 2:
        return exprs
    return [E.Cast(floats[0], e) if is_int(e.dtype) and e.dtype != "bool" else e
            for e in exprs]


_BUFFER_FIELDS = {"data": "handle", "elem_offset": "int32"}
# Calls that take TVM's `dtype=` keyword: the builtins' result dtype; for if_then_else and the
# math intrinsics TVM's printer repeats the dtype the arguments already give, so it is checked.
_DTYPE_KWARG = frozenset({"if_then_else", *intrin.OPAQUE_CALLS, *intrin.TYPED_CALLS,
                          *intrin.MATH_UNARY, *intrin.MATH_BINARY})


def zero_like(like: E.PrimExpr) -> E.IntImm:
    """0 in the dtype of ``like`` (a loop's start next to its extent)."""
    return E.IntImm(0, like.dtype)


def sym_var_decls(node: ast.stmt, typevar: bool) -> list:
    """[(name, dtype)] of ``n = T.int64()`` or ``m, n = T.int64(), T.int64()`` (or, at module
    level, ``n = TypeVar("n")``); [] for any other statement."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
        return []
    target, value = node.targets[0], node.value
    pairs = [(target, value)]
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and \
            len(target.elts) == len(value.elts):
        pairs = list(zip(target.elts, value.elts))
    decls = [_var_decl(t, v, typevar) for t, v in pairs]
    return decls if all(decls) else []


def _var_decl(target: ast.expr, call: ast.expr, typevar: bool):
    if not (isinstance(target, ast.Name) and isinstance(call, ast.Call)):
        return None
    if typevar and isinstance(call.func, ast.Name) and call.func.id == "TypeVar":
        return target.id, "int64"
    dtype = t_name(call.func)
    return (target.id, dtype) if dtype in intrin.DTYPES and not call.args else None

