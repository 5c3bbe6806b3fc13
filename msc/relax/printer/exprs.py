"""Expressions and the functions that hold them, as TVMScript.

Generic: a call prints as ``R.<op name>(args..., attr=value...)`` from the op table, with no
per-op code. One module for both, since a function is itself an expression (an inner
function, or an attribute value) and a function's body is made of expressions::

    expr_to_str(call)                 # 'R.nn.relu(x)'
    function_to_script(func, "main")  # '@R.function\ndef main(x: R.Tensor(...)) -> ...'
"""

from __future__ import annotations

import numpy as np

from ...tir import expr as tir
from ..expr import (
    BindingBlock,
    Call,
    Constant,
    DataflowBlock,
    DataflowVar,
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
    VarBinding,
)
from ..op.registry import Op
from ..struct_info import StructInfo
from .calls import is_dps_call, keyword_only_args, sinfo_args_text, sinfo_keyword
from .metadata import CONST_KEY, TENSOR_KEY, MetaTables
from .sinfo import sinfo_to_str, sinfo_vars
from .text import INDENT, format_float, format_str, prim_to_str, script_header

__all__ = ["FunctionPrinter", "expr_to_str", "function_to_script", "literal"]

# Scalar constants of these dtypes print inline as R.const(v, dtype); others go to metadata.
INLINE_CONST_DTYPES = ("bool", "int8", "int16", "int32", "int64", "float16", "float32",
                       "float64")


# --------------------------------------------------------------------------------------------
# Attribute values.

def literal(value, meta: MetaTables | None = None) -> str:
    """Python-literal text of an attribute value (lists for tuples, None for void dtypes);
    tensors in it print as ``metadata["ffi.Tensor"][i]`` numbered in ``meta``."""
    if isinstance(value, (Constant, np.ndarray)) and meta is not None:
        return meta.ref(TENSOR_KEY, value)
    if value is None:
        return "None"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return format_float(value)
    if isinstance(value, str):
        return format_str(value)
    if isinstance(value, tir.PrimExpr):
        return prim_to_str(value)
    if isinstance(value, dict):
        items = ", ".join(f"{literal(k, meta)}: {literal(v, meta)}"
                          for k, v in _sorted_items(value))
        return "{" + items + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v, meta) for v in value) + "]"
    if isinstance(value, StructInfo):
        return sinfo_to_str(value)
    if isinstance(value, Expr):
        return expr_to_str(value)
    return format_str(str(value))


def _sorted_items(mapping: dict):
    return sorted(mapping.items(), key=lambda kv: str(kv[0]))


# --------------------------------------------------------------------------------------------
# Expressions.

class _ExprPrinter:
    """Prints expressions; names come from ``names`` (a dict var -> name) when given."""

    def __init__(self, names: dict | None = None, meta: MetaTables | None = None):
        self.names = names if names is not None else {}
        self.meta = meta if meta is not None else MetaTables()
        self.uses_cls = False

    def expr(self, e, top: bool = False) -> str:
        handler = _EXPR_PRINTERS.get(type(e))
        if handler is None:
            for base, fn in _EXPR_PRINTERS.items():
                if isinstance(e, base):
                    handler = fn
                    break
        if handler is None:
            if isinstance(e, tir.PrimExpr):
                return prim_to_str(e)
            return f"<unprintable {type(e).__name__}>"
        return handler(self, e, top)

    def var(self, v: Var, top: bool) -> str:
        return self.names.get(v, v.name_hint)

    def global_var(self, gv: GlobalVar, top: bool) -> str:
        self.uses_cls = True
        return f"cls.{gv.name_hint}"

    def constant(self, c: Constant, top: bool) -> str:
        data = c.data
        dtype = c.struct_info.dtype
        if data.ndim == 0 and dtype in INLINE_CONST_DTYPES:
            return f"R.const({_scalar_text(data)}, {format_str(dtype)})"
        return self.meta.ref(CONST_KEY, c)

    def tuple(self, t: Tuple, top: bool) -> str:
        if not t.fields:
            return "R.tuple()"
        fields = [self.expr(f) for f in t.fields]
        text = ", ".join(fields) + ("," if len(fields) == 1 else "")
        return text if top and len(fields) > 1 else f"({text})"

    def get_item(self, e: TupleGetItem, top: bool) -> str:
        return f"{self.expr(e.tuple_value)}[{e.index}]"

    def shape(self, e: ShapeExpr, top: bool) -> str:
        return "R.shape([" + ", ".join(prim_to_str(v) for v in e.values) + "])"

    def prim(self, e: PrimValue, top: bool) -> str:
        return prim_to_str(e.value)

    def string(self, e: StringImm, top: bool) -> str:
        return f"R.str({format_str(e.value)})"

    def dtype(self, e: DataTypeImm, top: bool) -> str:
        return f"R.dtype({format_str(e.value)})"

    def extern(self, e: ExternFunc, top: bool) -> str:
        return format_str(e.global_symbol)

    def op(self, e, top: bool) -> str:
        return "R." + e.name[len("relax."):] if e.name.startswith("relax.") else e.name

    def call(self, call: Call, top: bool) -> str:
        op_def = getattr(call.op, "op_def", None)
        if op_def is not None:
            return self._op_call(call, op_def)
        args = [self.expr(a) for a in call.args]
        if isinstance(call.op, ExternFunc):
            head = "R.call_packed"
            args.insert(0, format_str(call.op.global_symbol))
        else:
            head = self.expr(call.op)
        if call.sinfo_args:
            args.append(f"ty_args={sinfo_args_text(call, 'ty_args')}")
        return f"{head}({', '.join(args)})"

    def _op_call(self, call: Call, op_def) -> str:
        keyword, position = sinfo_keyword(op_def) if call.sinfo_args else ("", None)
        split = len(call.args) if position is None else min(position, len(call.args))
        named = keyword_only_args(op_def)
        parts, kw_parts = [], []
        for i, a in enumerate(call.args):
            name = op_def.args[i].name if i < len(op_def.args) else f"arg{i}"
            if i >= split or name in named:
                kw_parts.append(f"{name}={self.expr(a)}")
            else:
                parts.append(self.expr(a))
        if call.sinfo_args and position is not None:
            parts.append(f"{keyword}={sinfo_args_text(call, keyword)}")
        parts += kw_parts
        for name, value in (call.attrs or {}).items():
            parts.append(f"{name}={self._attr(op_def, name, value)}")
        if call.sinfo_args and position is None:
            parts.append(f"{keyword}={sinfo_args_text(call, keyword)}")
        return f"R.{op_def.name}({', '.join(parts)})"

    def _attr(self, op_def, name: str, value) -> str:
        if isinstance(value, str) and value == "void":
            kinds = {a.name: a.type for a in op_def.attrs}
            if kinds.get(name) == "dtype":
                return "None"
        if isinstance(value, Expr):
            return self.expr(value)
        return literal(value)

    def if_(self, e: If, top: bool) -> str:
        return (f"R.If({self.expr(e.cond)}, {self.expr(e.true_branch)}, "
                f"{self.expr(e.false_branch)})")

    def seq(self, e: SeqExpr, top: bool) -> str:
        return self.expr(e.body)

    def function(self, f: Function, top: bool) -> str:
        return function_to_script(f)


def _scalar_text(data: np.ndarray) -> str:
    value = data.item()
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and not np.isfinite(value):
        # TVM 0.27 prints R.const("inf", ...), which its own parser rejects.
        return f"float({format_str(str(value))})"
    if isinstance(value, float):
        return format_float(value)
    return str(value)


_EXPR_PRINTERS = {
    Var: _ExprPrinter.var,
    GlobalVar: _ExprPrinter.global_var,
    Constant: _ExprPrinter.constant,
    Tuple: _ExprPrinter.tuple,
    TupleGetItem: _ExprPrinter.get_item,
    ShapeExpr: _ExprPrinter.shape,
    PrimValue: _ExprPrinter.prim,
    StringImm: _ExprPrinter.string,
    DataTypeImm: _ExprPrinter.dtype,
    ExternFunc: _ExprPrinter.extern,
    Call: _ExprPrinter.call,
    If: _ExprPrinter.if_,
    SeqExpr: _ExprPrinter.seq,
    Function: _ExprPrinter.function,
    Op: _ExprPrinter.op,
}


def expr_to_str(expr) -> str:
    """One expression as TVMScript (vars by their name hints)."""
    if isinstance(expr, Function):
        return function_to_script(expr)
    return _ExprPrinter().expr(expr, top=False)


# --------------------------------------------------------------------------------------------
# Functions.

class _Namer:
    """Unique names within a function: a repeated hint ``x`` becomes ``x_1``, ``x_2``."""

    def __init__(self, reserved=()):
        self.used: set[str] = set(reserved)
        self.names: dict = {}

    def name(self, var: Var) -> str:
        if var in self.names:
            return self.names[var]
        hint = var.name_hint or "v"
        name, k = hint, 0
        while name in self.used:
            k += 1
            name = f"{hint}_{k}"
        self.used.add(name)
        self.names[var] = name
        return name


class FunctionPrinter:
    """Prints one Relax function at a given indent; shares the module's metadata tables."""

    def __init__(self, func: Function, name: str, meta: MetaTables, indent: int = 1,
                 inner: bool = False):
        self.func = func
        self.name = name
        self.inner = inner
        self.namer = _Namer()
        self.ep = _ExprPrinter(self.namer.names, meta)
        self.indent = indent
        self.lines: list[str] = []

    def print(self) -> list[str]:
        pad = INDENT * self.indent
        head = [pad + self._decorator(), pad + self._signature()]
        body_pad = pad + INDENT
        self._emit_attrs(body_pad)
        body: list[str] = []
        for block in self.func.body.blocks if isinstance(self.func.body, SeqExpr) else ():
            body += self._block(block, body_pad)
        body.append(f"{body_pad}return {self.ep.expr(self._body_expr(), top=False)}")
        pre = self.lines
        if self.ep.uses_cls:
            pre.append(f"{body_pad}cls = Module")
        pre += [f"{body_pad}{v.name} = T.{v.dtype}()" for v in self._body_vars()]
        return head + pre + body

    def _body_expr(self):
        body = self.func.body
        return body.body if isinstance(body, SeqExpr) else body

    def _decorator(self) -> str:
        flags = []
        if "global_symbol" not in self.func.attrs and not self.inner:
            flags.append("private=True")
        if not self.func.is_pure:
            flags.append("pure=False")
        return "@R.function" + (f"({', '.join(flags)})" if flags else "")

    def _signature(self) -> str:
        params = []
        for p in self.func.params:
            name = self.namer.name(p)
            params.append(f"{name}: {sinfo_to_str(p.struct_info, signature=True)}")
        ret = sinfo_to_str(self.func.ret_struct_info, signature=True)
        return f"def {self.name}({', '.join(params)}) -> {ret}:"

    def _emit_attrs(self, pad: str) -> None:
        attrs = {k: v for k, v in self.func.attrs.items()
                 if not (k == "global_symbol" and v == self.name)}
        if attrs:
            self.lines.append(f"{pad}R.func_attr({literal(attrs, self.ep.meta)})")

    def signature_vars(self) -> dict:
        found: dict = {}
        for p in self.func.params:
            sinfo_vars(p.struct_info, found)
        sinfo_vars(self.func.ret_struct_info, found)
        return found

    def _body_vars(self) -> list:
        sig = self.signature_vars()
        found: dict = {}
        for binding in _all_bindings(self.func.body):
            sinfo_vars(binding.var.struct_info, found)
            if isinstance(binding, MatchCast):
                sinfo_vars(binding.struct_info, found)
        return [v for name, v in found.items() if name not in sig]

    def _block(self, block: BindingBlock, pad: str) -> list[str]:
        if not isinstance(block, DataflowBlock):
            return [line for b in block.bindings for line in self._binding(b, pad)]
        inner = pad + INDENT
        lines = [f"{pad}with R.dataflow():"]
        for b in block.bindings:
            lines += self._binding(b, inner)
        outputs = [self.namer.name(b.var) for b in block.bindings if _is_output(b.var)]
        if outputs:
            lines.append(f"{inner}R.output({', '.join(outputs)})")
        return lines

    def _binding(self, binding, pad: str) -> list[str]:
        value = binding.value
        if isinstance(value, If):
            return self._if(binding, pad)
        if isinstance(value, Function):
            return self._inner_function(binding, pad)
        rhs = self.ep.expr(value, top=True)
        if binding.var.name_hint == "_" and isinstance(binding, VarBinding):
            return [f"{pad}{rhs}"]  # a call kept for its effect (R.print)
        name = self.namer.name(binding.var)
        if isinstance(binding, MatchCast):
            rhs = f"R.match_cast({self.ep.expr(value)}, {sinfo_to_str(binding.struct_info)})"
        elif is_dps_call(value):
            return [f"{pad}{name} = {rhs}"]
        return [f"{pad}{name}: {sinfo_to_str(binding.var.struct_info)} = {rhs}"]

    def _if(self, binding, pad: str) -> list[str]:
        value: If = binding.value
        lines = [f"{pad}if {self.ep.expr(value.cond)}:"]
        lines += self._branch(value.true_branch, binding, pad + INDENT)
        lines.append(f"{pad}else:")
        lines += self._branch(value.false_branch, binding, pad + INDENT)
        return lines

    def _branch(self, branch, binding, pad: str) -> list[str]:
        lines = []
        blocks = branch.blocks if isinstance(branch, SeqExpr) else ()
        for block in blocks:
            lines += self._block(block, pad)
        body = branch.body if isinstance(branch, SeqExpr) else branch
        name = self.namer.names.get(binding.var) or self.namer.name(binding.var)
        sinfo = sinfo_to_str(binding.var.struct_info)
        return lines + [f"{pad}{name}: {sinfo} = {self.ep.expr(body, top=True)}"]

    def _inner_function(self, binding, pad: str) -> list[str]:
        name = self.namer.name(binding.var)
        inner = FunctionPrinter(binding.value, name, self.ep.meta, indent=0, inner=True)
        inner.namer.used |= self.namer.used
        inner.namer.names.update(self.namer.names)
        lines = [pad + line for line in inner.print()]
        self.ep.uses_cls |= inner.ep.uses_cls
        return lines + [""]


def _is_output(var) -> bool:
    return not isinstance(var, DataflowVar)


def _all_bindings(expr):
    if isinstance(expr, SeqExpr):
        for block in expr.blocks:
            for b in block.bindings:
                yield b
                if isinstance(b.value, If):
                    yield from _all_bindings(b.value.true_branch)
                    yield from _all_bindings(b.value.false_branch)


def function_to_script(func: Function, name: str | None = None) -> str:
    """A single Relax function as TVMScript, named by ``name`` or its global symbol."""
    name = name or func.attrs.get("global_symbol", "main")
    printer = FunctionPrinter(func, name, MetaTables(), indent=0)
    body = "\n".join(printer.print())
    type_vars = sorted(n for n, v in printer.signature_vars().items() if v.dtype == "int64")
    lines = script_header(body, bool(type_vars), module=False)
    return "\n".join(lines + [f'{n} = TypeVar("{n}")' for n in type_vars] + [body])

