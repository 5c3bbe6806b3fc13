"""Print a PrimFunc as TVMScript in TVM 0.27's style.

Printing a parsed TVM function reproduces TVM's text (up to whitespace), and print -> parse ->
print is a fixed point::

    print(prim_func_to_script(func, "add", indent=4))

TVM's quirks kept on purpose: int64 signature vars are declared at module level (see
``PrimFunc.module_vars``), compound signature dims and the first signature use of other vars
are quoted strings, consecutive serial loops print as ``T.grid``, and the root block of an
s_tir function prints as the comment ``# with T.sblock("root"):``.
"""

from __future__ import annotations

import json
import math

from ..errors import ValidationError
from . import expr as E
from . import intrin
from .expr import is_float
from .function import (
    ITER_KINDS,
    AllocBuffer,
    AttrStmt,
    Buffer,
    BufferLoad,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    LetStmt,
    PrimFunc,
    SBlock,
    SeqStmt,
    StringImm,
    While,
    range_stop,
)

__all__ = ["expr_to_script", "format_float", "module_var_decls", "prim_func_to_script"]

# Python precedence, higher binds tighter.
_ATOM = 100
_PREC = {"or": 1, "and": 2, "not": 3, "==": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4,
         "|": 5, "^": 6, "&": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10,
         "//": 10, "%": 10, "unary": 11}
_COMPARE = frozenset(["==", "!=", "<", "<=", ">", ">="])
_INDENT = "    "


def prim_func_to_script(func: PrimFunc, name: str, indent: int = 0) -> str:
    """``@T.prim_func ... def name(...):`` with every line indented by ``indent`` spaces."""
    return "\n".join(" " * indent + line if line else line for line in _Printer(func).lines(name))


def module_var_decls(func: PrimFunc) -> list[str]:
    """Module-level declarations TVM prints before the module (``n = TypeVar("n")``)."""
    return [f'{v.name} = TypeVar("{v.name}")' for v in func.module_vars()]


def expr_to_script(e: E.PrimExpr) -> str:
    """A TIR expression in TVMScript (dtype-aware constants: ``T.int64(2)``)."""
    return _expr(e)[0]


# ------------------------------------------------------------------------------------ exprs

def format_float(value: float) -> str:
    """TVM's float literal: integral values in full (``1e30`` -> ``1000...0.0``), others with
    17 significant digits, non-finite values quoted."""
    if math.isnan(value) or math.isinf(value):
        return f'"{value}"'
    if value.is_integer():
        return ("-" if math.copysign(1.0, value) < 0 and value == 0 else "") + f"{int(value)}.0"
    return f"{value:.17g}"


def _imm(e: E.PrimExpr) -> tuple[str, int]:
    if isinstance(e, E.FloatImm):
        return f"T.{e.dtype}({format_float(e.value)})", _ATOM
    if e.dtype == "bool":
        return f"T.bool({bool(e.value)})", _ATOM
    if e.dtype == "int32":
        return str(e.value), _ATOM if e.value >= 0 else _PREC["unary"]
    return f"T.{e.dtype}({e.value})", _ATOM


def _call(name: str, args) -> str:
    return f"T.{name}({', '.join(_expr(a)[0] for a in args)})"


def _infix(sym: str, a: E.PrimExpr, b: E.PrimExpr) -> tuple[str, int]:
    prec = _PREC[sym]
    left, lp = _expr(a)
    right, rp = _expr(b)
    if lp < prec or (sym in _COMPARE and lp == prec):
        left = f"({left})"
    if rp <= prec:
        right = f"({right})"
    return f"{left} {sym} {right}", prec


def _binary(e: E.BinaryOp) -> tuple[str, int]:
    sym = E.BINARY_KINDS[e.op][0]
    if e.op == "Div" and is_float(e.dtype):
        sym = "/"
    if sym.startswith("T."):
        return _call(sym[2:], (e.a, e.b)), _ATOM
    return _infix(sym, e.a, e.b)


def _prim_call(e: E.PrimCall) -> tuple[str, int]:
    if e.name in intrin.BITWISE:
        return _infix(intrin.BITWISE[e.name][0], *e.args)
    if e.name == "bitwise_not":
        text, prec = _expr(e.args[0])
        return "~" + (f"({text})" if prec < _PREC["unary"] else text), _PREC["unary"]
    if e.name in intrin.TYPED_CALLS:
        args = ", ".join(_expr(a)[0] for a in e.args)
        return f'T.{e.name}("{e.dtype}", {args})', _ATOM
    if e.name == "type_annotation":  # TVM's: a call of that dtype without arguments
        return f'T.type_annotation("{e.dtype}")', _ATOM
    if intrin.OPAQUE_CALLS.get(e.name, e.dtype) != e.dtype:
        args = "".join(_expr(a)[0] + ", " for a in e.args)
        return f'T.{e.name}({args}dtype="{e.dtype}")', _ATOM
    return _call(e.name, e.args), _ATOM


def _not(e: E.Not) -> tuple[str, int]:
    text, prec = _expr(e.a)
    return "not " + (f"({text})" if prec < _PREC["not"] else text), _PREC["not"]


_EXPR_PRINTERS = {
    E.IntImm: _imm,
    E.FloatImm: _imm,
    E.Var: lambda e: (e.name, _ATOM),
    StringImm: lambda e: (json.dumps(e.value), _ATOM),
    BufferLoad: lambda e: (f"{e.buffer.name}[{_indices(e.indices)}]", _ATOM),
    E.BinaryOp: _binary,
    E.Not: _not,
    E.Select: lambda e: (_call("Select", (e.cond, e.true_value, e.false_value)), _ATOM),
    E.Cast: lambda e: (f'T.Cast("{e.dtype}", {_expr(e.value)[0]})', _ATOM),
    E.PrimCall: _prim_call,
}


def _expr(e: E.PrimExpr) -> tuple[str, int]:
    printer = _EXPR_PRINTERS.get(type(e))
    if printer is None:
        raise ValidationError(f"cannot print TIR expression {type(e).__name__}")
    return printer(e)


def _indices(indices) -> str:
    # A 0-d buffer is indexed with the empty tuple: `y[()]`.
    return ", ".join(_expr(i)[0] for i in indices) if indices else "()"


def _value(v) -> str:
    """An attribute value: Python literals, lists, dicts or PrimExprs."""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_value(k)}: {_value(x)}" for k, x in sorted(v.items())) + "}"
    if isinstance(v, E.PrimExpr):
        return _expr(v)[0]
    if isinstance(v, Buffer):
        return v.name
    return repr(v)


def _tuple(items: list[str]) -> str:
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


# ------------------------------------------------------------------------------------ stmts

class _Printer:
    def __init__(self, func: PrimFunc):
        self.func = func
        self.out: list[str] = []
        self.depth = 0
        self.loops: dict = {}

    def lines(self, name: str) -> list[str]:
        func = self.func
        seen: set = set()
        params = ", ".join(self._param(p, seen) for p in func.params)
        self.out.append(self._decorator())
        self.out.append(f"def {name}({params}):")
        self.depth = 1
        for var in self._body_decls(seen):
            self._line(f"{var.name} = T.{var.dtype}()")
        attrs = {k: v for k, v in func.attrs.items()
                 if not (k == "global_symbol" and v == name)}
        if attrs:
            self._line(f"T.func_attr({_value(attrs)})")
        body = func.body
        if isinstance(body, SBlock) and body.is_implicit_root:
            self._line('# with T.sblock("root"):')
            for buf in body.alloc_buffers:
                self._line(f"{buf.name} = {self._alloc('sblock_alloc_buffer', buf)}")
            body = body.body
        self.stmt(body)
        return self.out

    def _decorator(self) -> str:
        flags = [f"{k}=True" for k in ("private", "s_tir") if getattr(self.func, k)]
        return f"@T.prim_func({', '.join(flags)})" if flags else "@T.prim_func"

    def _body_decls(self, quoted: set) -> list:
        module = {v.name for v in self.func.module_vars()}
        decls = {v.name: v for v in self.func.signature_vars() if v.name in quoted}
        for v in self.func.sym_vars:
            if v.name not in module:
                decls.setdefault(v.name, v)
        return list(decls.values())

    def _param(self, p, seen: set) -> str:
        if isinstance(p, E.Var):
            return f"{p.name}: T.{p.dtype}"
        dims = [self._sig_dim(d, seen) for d in p.shape]
        return f"{p.name}: T.Buffer({self._buffer_args(p, dims, always_dtype=True)})"

    def _sig_dim(self, d: E.PrimExpr, seen: set) -> str:
        """TVM quotes compound dims and a non-int64 var's first use in the signature."""
        if isinstance(d, E.IntImm):
            return _expr(d)[0]
        if isinstance(d, E.Var) and (d.dtype == "int64" or d.name in seen):
            return d.name
        if isinstance(d, E.Var):
            seen.add(d.name)
        return json.dumps(_expr(d)[0])

    def _buffer_args(self, buf: Buffer, dims: list, always_dtype: bool = False) -> str:
        parts = [_tuple(dims)]
        if always_dtype or buf.dtype != "float32":
            parts.append(f'"{buf.dtype}"')
        if buf.strides is not None:
            parts.append(f"strides={_tuple([_expr(s)[0] for s in buf.strides])}")
        if buf.elem_offset is not None:
            parts.append(f"elem_offset={_expr(buf.elem_offset)[0]}")
        if buf.scope != "global":
            parts.append(f'scope="{buf.scope}"')
        return ", ".join(parts)

    def _alloc(self, func: str, buf: Buffer) -> str:
        return f"T.{func}({self._buffer_args(buf, [_expr(d)[0] for d in buf.shape])})"

    def _line(self, text: str) -> None:
        self.out.append(_INDENT * self.depth + text)

    def _nested(self, stmt) -> None:
        self.depth += 1
        self.stmt(stmt)
        self.depth -= 1

    def stmt(self, s) -> None:
        handler = _STMT_PRINTERS.get(type(s))
        if handler is None:
            raise ValidationError(f"cannot print TIR statement {type(s).__name__}")
        handler(self, s)

    def _seq(self, s: SeqStmt) -> None:
        for child in s.stmts:
            self.stmt(child)

    def _store(self, s: BufferStore) -> None:
        self._line(f"{s.buffer.name}[{_indices(s.indices)}] = {_expr(s.value)[0]}")

    def _evaluate(self, s: Evaluate) -> None:
        text = _expr(s.value)[0]
        self._line(text if isinstance(s.value, E.PrimCall) else f"T.evaluate({text})")

    def _let(self, s: LetStmt) -> None:
        ann = f"T.let[T.{s.var.dtype}]" if s.let_expr else f"T.{s.var.dtype}"
        self._line(f"{s.var.name}: {ann} = {_expr(s.value)[0]}")

    def _attr(self, s: AttrStmt) -> None:
        self._line(f"T.attr({_value(s.attrs)})")

    def _alloc_stmt(self, s: AllocBuffer) -> None:
        self._line(f"{s.buffer.name} = {self._alloc('alloc_buffer', s.buffer)}")

    def _if(self, s: IfThenElse) -> None:
        self._line(f"if {_expr(s.cond)[0]}:")
        self._nested(s.then_case)
        if s.else_case is not None:
            self._line("else:")
            self._nested(s.else_case)

    def _while(self, s: While) -> None:
        self._line(f"while {_expr(s.cond)[0]}:")
        self._nested(s.body)

    def _for(self, s: For) -> None:
        chain = _grid_chain(s)
        for loop in chain:
            self.loops[loop.var.name] = loop
        if len(chain) > 1:
            names = ", ".join(f.var.name for f in chain)
            extents = ", ".join(_expr(f.extent)[0] for f in chain)
            self._line(f"for {names} in T.grid({extents}):")
        else:
            self._line(f"for {s.var.name} in {_loop_iter(s)}:")
        self._nested(chain[-1].body)

    def _block(self, s: SBlock) -> None:
        self._line(f'with T.sblock("{s.name}"):')
        self.depth += 1
        self._iter_vars(s.iter_vars)
        if s.predicate is not None:
            self._line(f"T.where({_expr(s.predicate)[0]})")
        for key in ("reads", "writes"):
            regions = getattr(s, key)
            if regions is not None:
                self._line(f"T.{key}({', '.join(_region(r) for r in regions)})")
        if s.annotations:
            self._line(f"T.sblock_attr({_value(s.annotations)})")
        for buf in s.alloc_buffers:
            self._line(f"{buf.name} = {self._alloc('sblock_alloc_buffer', buf)}")
        for buf, region in s.match_buffers:
            text = self._alloc("match_buffer", buf).replace("(", f"({_region(region)}, ", 1)
            self._line(f"{buf.name} = {text}")
        if s.init is not None:
            self._line("with T.init():")
            self._nested(s.init)
        self.stmt(s.body)
        self.depth -= 1

    def _iter_vars(self, iter_vars) -> None:
        group: list = []
        for iv in iter_vars:
            if self._remappable(iv):
                group.append(iv)
                continue
            self._remap(group)
            group = []
            self._axis(iv)
        self._remap(group)

    def _remappable(self, iv) -> bool:
        loop = self.loops.get(iv.binding.name) if isinstance(iv.binding, E.Var) else None
        return (loop is not None and ITER_KINDS.get(iv.kind) is not None
                and loop.min == iv.min and loop.extent == iv.extent)

    def _remap(self, group: list) -> None:
        if len(group) == 1:
            self._axis(group[0])
        elif group:
            names = ", ".join(iv.var.name for iv in group)
            kinds = "".join(ITER_KINDS.get(iv.kind) for iv in group)
            binds = ", ".join(iv.binding.name for iv in group)
            self._line(f'{names} = T.axis.remap("{kinds}", [{binds}])')

    def _axis(self, iv) -> None:
        if iv.min == E.IntImm(0):
            dom = _expr(iv.extent)[0]
        else:
            dom = f"({_expr(iv.min)[0]}, {_expr(range_stop(iv.min, iv.extent))[0]})"
        self._line(f"{iv.var.name} = T.axis.{iv.kind}({dom}, {_expr(iv.binding)[0]})")


def _region(r) -> str:
    # TVM prints a range of extent 1 as its point, and its parser reads ``v:v + 1`` so
    parts = [_expr(lo)[0] if hi is None or E.sub(hi, lo) == E.IntImm(1)
             else f"{_expr(lo)[0]}:{_expr(hi)[0]}" for lo, hi in r.region]
    return f"{r.buffer.name}[{', '.join(parts)}]"


def _plain_serial(f: For) -> bool:
    return f.kind == "serial" and not f.annotations and f.thread is None and \
        f.min == E.IntImm(0)


def _grid_chain(s: For) -> list:
    """Consecutive plain serial loops whose extents do not use outer loop vars."""
    chain = [s]
    outer = {s.var.name}
    while _plain_serial(chain[-1]) and isinstance(chain[-1].body, For):
        inner = chain[-1].body
        if not _plain_serial(inner) or outer & {v.name for v in E.free_vars(inner.extent)}:
            break
        chain.append(inner)
        outer.add(inner.var.name)
    return chain if len(chain) > 1 else [s]


def _loop_iter(f: For) -> str:
    zero = f.min == E.IntImm(0)
    args = [_expr(f.extent)[0]] if zero else [_expr(f.min)[0], _expr(range_stop(f.min, f.extent))[0]]
    if f.thread is not None:
        args.append(f'thread="{f.thread}"')
    if f.annotations:
        args.append(f"annotations={_value(f.annotations)}")
    if f.kind == "serial" and not f.annotations:
        return f"range({', '.join(args)})"
    return f"T.{f.kind}({', '.join(args)})"


_STMT_PRINTERS = {
    SeqStmt: _Printer._seq,
    BufferStore: _Printer._store,
    Evaluate: _Printer._evaluate,
    LetStmt: _Printer._let,
    AllocBuffer: _Printer._alloc_stmt,
    AttrStmt: _Printer._attr,
    IfThenElse: _Printer._if,
    While: _Printer._while,
    For: _Printer._for,
    SBlock: _Printer._block,
}
