"""Parse a TVMScript ``@T.prim_func`` (Python ``ast``, never exec/eval) into a PrimFunc.

Both spellings are accepted: TVM 0.27's (``T.sblock``, ``T.sblock_alloc_buffer``,
``@T.prim_func(private=True, s_tir=True)``) and the older one (``T.block``, ``T.Buffer[...]``
annotations, ``T.match_buffer``, root-level ``T.alloc_buffer``, ``n = T.int64()``)::

    tree = ast.parse(text)
    func = parse_prim_func(tree.body[0], text)

Expressions are kept exactly as written (no simplification), so printing a parsed TVM function
gives TVM's text back. Python literals take the dtype of the typed operand next to them, as in
TVM (``n * 2`` with ``n: int64`` multiplies by ``T.int64(2)``).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import replace

from ..errors import ParseError
from . import expr as E
from . import intrin
from .function import (
    ITER_KINDS,
    AllocBuffer,
    AttrStmt,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    IterVar,
    LetStmt,
    PrimFunc,
    SBlock,
    While,
    range_extent,
    seq,
)
from .parse_expr import ExprParser, is_literal, sym_var_decls, t_name, zero_like

__all__ = ["TIR_NAMES", "parse_prim_func", "parse_tir_text"]

TIR_NAMES = intrin.TIR_NAMES
_AXIS_KINDS = {"spatial": "spatial", "S": "spatial", "reduce": "reduce", "R": "reduce",
               "scan": "scan", "opaque": "opaque"}
_REMAP = {letter: kind for kind, letter in ITER_KINDS.items() if letter}
_ALLOCS = {"alloc_buffer": "global", "sblock_alloc_buffer": "global",
           "alloc_shared": "shared", "alloc_local": "local"}
_BLOCKS = ("sblock", "block")
_BLOCK_ONLY = ("reads", "writes", "where", "sblock_attr", "block_attr", "init")


def parse_prim_func(node: ast.FunctionDef, source: str, ctx=None, py_env=None) -> PrimFunc:
    """Parse ``node`` (a ``def`` decorated with ``@T.prim_func``) taken from ``source``.

    ``ctx`` carries module-level symbolic vars (``n = TypeVar("n")`` in TVM's module text): a
    mapping name -> ``tir.Var``, or an object with such a mapping as ``tir_vars``; None is fine.
    Unknown names in a param's shape become int64 vars; ``py_env``: the Python names it sees.
    """
    parser = _FuncParser(source, _module_vars(ctx), py_env)
    try:
        return parser.parse(node)
    except RecursionError:  # the expression reader recurses on depth; no prim func nests so
        raise parser.error(node, "expression nested too deeply",
                           hint="split the expression into several statements") from None


def _module_vars(ctx) -> dict:
    if ctx is None:
        return {}
    table = ctx if isinstance(ctx, Mapping) else getattr(ctx, "tir_vars", {})
    return {k: v for k, v in table.items() if isinstance(v, E.PrimExpr)}


class _FuncParser(ExprParser):
    def __init__(self, source: str, module_vars: dict, py_env: dict | None = None):
        super().__init__(source, [dict(module_vars)], py_env)
        self.attrs: dict = {}
        self.sym_vars: dict = {}
        self.params: list = []
        self.loops: dict = {}
        self.has_blocks = False

    # ---------------------------------------------------------------- function
    def parse(self, node: ast.FunctionDef) -> PrimFunc:
        if not isinstance(node, ast.FunctionDef):
            raise self.error(node, "expected a `def` decorated with @T.prim_func")
        private, s_tir = self._decorator(node)
        self.frames.append({})
        self._predeclare(node.body)
        self.params = [self._param(arg) for arg in node.args.args]
        self._check_args(node.args)
        stmts = self._stmts(node.body, top=True)
        s_tir = s_tir or self.has_blocks
        body = self._root(stmts) if s_tir else seq(stmts or [Evaluate(E.IntImm(0, "int32"))])
        func = PrimFunc(tuple(self.params), body, self.attrs, node.name, private, s_tir)
        for var in func.signature_vars():
            self.sym_vars.setdefault(var.name, var)
        return replace(func, sym_vars=tuple(self.sym_vars.values()))

    def _decorator(self, node: ast.FunctionDef) -> tuple[bool, bool]:
        flags = {"private": False, "s_tir": False}
        for deco in node.decorator_list:
            if t_name(deco.func if isinstance(deco, ast.Call) else deco) != "prim_func":
                shown = ast.unparse(deco.func if isinstance(deco, ast.Call) else deco)
                raise self.error(deco, f"unknown decorator @{shown:.60}",
                                 hint="a prim func takes @T.prim_func only")
            if isinstance(deco, ast.Call):
                for kw in deco.keywords:
                    if kw.arg in flags:
                        flags[kw.arg] = bool(self.constant(kw.value))
        return flags["private"], flags["s_tir"]

    def _check_args(self, args: ast.arguments) -> None:
        extra = args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs
        if extra:
            node = extra[0] if isinstance(extra, list) else extra
            raise self.error(node, "prim func params must be plain positional params")

    def _predeclare(self, body: list) -> None:
        """Declare ``n = T.int64()`` vars first: the signature may use them (TVM prints an
        int32 var's first use in the signature as the string ``"n"``)."""
        for st in body:
            for name, dtype in sym_var_decls(st, typevar=False):
                var = E.Var(name, dtype)
                self.sym_vars[name] = var
                self.frames[-1][name] = var

    def _param(self, arg: ast.arg):
        ann = arg.annotation
        if ann is None:
            raise self.error(arg, f"param {arg.arg!r} needs a type: T.Buffer(...), T.handle "
                                  "or T.int64")
        kind = t_name(ann.func if isinstance(ann, ast.Call) else
                      ann.value if isinstance(ann, ast.Subscript) else ann)
        if kind == "Buffer":
            buf = self._buffer_decl(ann, arg.arg, signature=True)
            self.frames[-1][arg.arg] = buf
            return buf
        if kind == "handle" or kind in intrin.DTYPES:
            var = E.Var(arg.arg, kind)
            self.frames[-1][arg.arg] = var
            return var
        raise self.error(ann, f"unsupported type for param {arg.arg!r}",
                         hint="use T.Buffer((shape), dtype), T.handle or a dtype like T.int64")

    def _root(self, stmts: list) -> SBlock:
        """An s_tir body is one block: the single top-level block, or an implicit root."""
        if len(stmts) == 1 and isinstance(stmts[0], SBlock) and not stmts[0].iter_vars:
            return stmts[0]
        allocs = [s.buffer for s in stmts if isinstance(s, AllocBuffer)]
        rest = [s for s in stmts if not isinstance(s, AllocBuffer)]
        return SBlock("root", seq(rest or [Evaluate(E.IntImm(0, "int32"))]),
                      alloc_buffers=tuple(allocs))

    # ---------------------------------------------------------------- buffers
    def _buffer_decl(self, node: ast.expr, name: str, signature: bool = False) -> Buffer:
        """``T.Buffer((shape), dtype, ...)`` or the older ``T.Buffer[(shape), dtype]``."""
        if isinstance(node, ast.Subscript):
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return self._make_buffer(node, name, elts, [], signature)
        return self._make_buffer(node, name, node.args, node.keywords, signature)

    def _make_buffer(self, node, name, args, keywords, signature=False, scope="global"):
        if not args:
            raise self.error(node, f"buffer {name!r} needs a shape")
        kw, self.implicit_vars = {k.arg: k.value for k in keywords}, signature
        try:
            shape = self._sizes(args[0])
            dtype_node = args[1] if len(args) > 1 else kw.pop("dtype", None)
            dtype = "float32" if dtype_node is None else self.dtype_arg(dtype_node)
            strides = self._shape(kw.pop("strides")) if "strides" in kw else None
            offset = kw.pop("elem_offset", None)
            if isinstance(offset, ast.Name):  # TVM prints elem_offset=A_elem_offset: a var
                self.declare_vars([(offset.id, "int32")])
            offset = None if offset is None else self.expr(offset)
        finally:
            self.implicit_vars = False
        scope = (self.constant(kw.pop("scope")) or "global") if "scope" in kw else scope
        if self.constant(kw.pop("offset_factor", ast.Constant(0))) and offset is None:
            offset = E.Var(f"{name}_elem_offset", "int32")  # TVM: an offset factor, a var
        kw.pop("align", None), kw.pop("buffer_type", None)
        if kw or len(args) > 2:
            bad = next(iter(kw.values())) if kw else args[2]
            raise self.error(bad, f"unsupported argument for buffer {name!r}",
                             hint="supported: shape, dtype, strides, elem_offset, scope")
        return Buffer(name, shape, dtype, strides, offset, scope)

    def _shape(self, node: ast.expr) -> tuple:
        elts = node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node]
        return tuple(self.expr(e) for e in elts)

    def _sizes(self, node: ast.expr) -> tuple:
        """A buffer's shape: integer dims, constant ones in 0 .. int64 max."""
        shape = self._shape(node)
        elts = node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node]
        for elt, dim in zip(elts, shape):
            if (problem := E.dim_problem(dim)) is not None:
                raise self.error(elt, f"a buffer dim {problem}")
        return shape

    # ---------------------------------------------------------------- statements
    def _stmts(self, nodes: list, top: bool = False) -> list:
        out = []
        for node in nodes:
            stmt = self._stmt(node, top)
            if stmt is not None:
                out.append(stmt)
        return out

    def _body(self, nodes: list, frame: dict | None = None):
        self.frames.append(frame or {})
        try:
            stmts = self._stmts(nodes)
        finally:
            self.frames.pop()
        return seq(stmts or [Evaluate(E.IntImm(0, "int32"))])

    def _stmt(self, node: ast.stmt, top: bool = False):
        handler = _STMTS.get(type(node))
        if handler is None:
            raise self.error(node, f"unsupported statement `{type(node).__name__}` in a prim "
                                   "func", hint="see msc.tir.parser for the supported syntax")
        return handler(self, node, top)

    def _pass(self, node, top):
        return None

    def _expr_stmt(self, node: ast.Expr, top: bool):
        value = node.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return None  # docstring
        name = t_name(value.func) if isinstance(value, ast.Call) else None
        if name == "func_attr":
            self._func_attr(value, top)
            return None
        if name == "evaluate":
            return Evaluate(self.expr(self.single_arg(value)))
        if name == "attr":
            return AttrStmt(self.attr_dict(self.single_arg(value)))
        if name in _BLOCK_ONLY:
            raise self.error(value, f"T.{name} is only allowed directly inside a T.sblock")
        if name is None or name not in intrin.EXPR_NAMES:
            if isinstance(value, ast.Call):
                self.check_known(value)
            raise self.error(value, "expected a statement, got an expression",
                             hint="wrap it in T.evaluate(...)")
        return Evaluate(self.expr(value))

    def _func_attr(self, call: ast.Call, top: bool) -> None:
        if not top:
            raise self.error(call, "T.func_attr must be at the top of the function")
        self.attrs.update(self.attr_dict(self.single_arg(call)))

    def _assign(self, node: ast.Assign, top: bool):
        if len(node.targets) != 1:
            raise self.error(node, "chained assignment is not supported in a prim func")
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Subscript):
            return self._store(target, value)
        name = t_name(value.func) if isinstance(value, ast.Call) else None
        if decls := sym_var_decls(node, typevar=False):
            return self.declare_vars(decls)  # predeclared symbolic var(s)
        if name == "match_buffer":
            return self._match_buffer(node, target, value, top)
        if name in _ALLOCS:
            buf = self._alloc(target, value, name)
            if name == "sblock_alloc_buffer" and top:
                self.has_blocks = True
            return AllocBuffer(buf)
        if name and name.startswith("axis."):
            raise self.error(value, f"T.{name} is only allowed directly inside a T.sblock")
        if not isinstance(target, ast.Name):
            raise self.error(target, "can only assign to a name or a buffer element")
        return self._let(target.id, self.expr(value), None, False)

    def _ann_assign(self, node: ast.AnnAssign, top: bool):
        if not isinstance(node.target, ast.Name) or node.value is None:
            raise self.error(node, "expected `name: T.<dtype> = value`")
        ann, let_expr = node.annotation, False
        if isinstance(ann, ast.Subscript) and t_name(ann.value) == "let":
            ann, let_expr = ann.slice, True
        dtype = t_name(ann)
        if dtype not in intrin.DTYPES:
            raise self.error(ann, "a let binding needs a dtype annotation like T.int32")
        value = self.expr(node.value)
        if is_literal(node.value):
            value = self.adopt(value, dtype)
        return self._let(node.target.id, value, dtype, let_expr)

    def _let(self, name: str, value: E.PrimExpr, dtype: str | None, let_expr: bool):
        var = E.Var(name, dtype or value.dtype)
        self.frames[-1][name] = var
        return LetStmt(var, value, let_expr)

    def _aug_assign(self, node: ast.AugAssign, top: bool):
        """``B[i] += x`` is ``B[i] = B[i] + x`` (TVMScript accepts both)."""
        if not isinstance(node.target, ast.Subscript):
            raise self.error(node, "only a buffer element can be updated in place (B[i] += x)")
        load = ast.copy_location(ast.Subscript(node.target.value, node.target.slice), node.target)
        return self._store(node.target, ast.copy_location(ast.BinOp(load, node.op, node.value),
                                                          node))

    def _store(self, target: ast.Subscript, value_node: ast.expr) -> BufferStore:
        load = self.expr(target)
        if not isinstance(load, BufferLoad):
            raise self.error(target, "can only store into a buffer element")
        value = self.expr(value_node)
        if is_literal(value_node):
            value = self.adopt(value, load.buffer.dtype)
        return BufferStore(load.buffer, value, load.indices)

    def _match_buffer(self, node, target, call: ast.Call, top: bool):
        if not top or not isinstance(target, ast.Name) or not call.args:
            raise self.error(node, "use `A = T.match_buffer(handle, shape, dtype)` at the top "
                                   "of the function")
        handle = call.args[0]
        index = next((i for i, p in enumerate(self.params) if isinstance(handle, ast.Name)
                      and isinstance(p, E.Var) and p.name == handle.id), None)
        if index is None:
            raise self.error(handle, "T.match_buffer needs a T.handle param of this function")
        buf = self._make_buffer(call, target.id, call.args[1:], call.keywords, signature=True)
        self.params[index] = buf
        self.frames[-1][target.id] = buf

    def _alloc(self, target: ast.expr, call: ast.Call, name: str) -> Buffer:
        if not isinstance(target, ast.Name):
            raise self.error(target, f"T.{name} must be assigned to a name")
        buf = self._make_buffer(call, target.id, call.args, call.keywords, scope=_ALLOCS[name])
        self.frames[-1][target.id] = buf
        return buf

    def _if(self, node: ast.If, top: bool) -> IfThenElse:
        cond = self.expr(node.test)
        orelse = self._body(node.orelse) if node.orelse else None
        return IfThenElse(cond, self._body(node.body), orelse)

    def _while(self, node: ast.While, top: bool) -> While:
        if node.orelse:
            raise self.error(node, "while/else is not supported")
        return While(self.expr(node.test), self._body(node.body))

    # ---------------------------------------------------------------- loops
    def _for(self, node: ast.For, top: bool) -> For:
        call = node.iter
        name = "range" if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) \
            and call.func.id == "range" else t_name(call.func) if isinstance(call, ast.Call) \
            else None
        if node.orelse or name not in ("range", "grid", *intrin.LOOP_KINDS):
            raise self.error(call, "expected range(...), T.grid(...), T.serial/parallel/"
                                   "vectorized/unroll/thread_binding(...)")
        if name == "grid":
            return self._grid(node, call)
        names = self._targets(node.target, 1)
        lo, extent = self._loop_range(call)
        kw = {k.arg: k for k in call.keywords}
        annotations = self.attr_dict(kw.pop("annotations").value) if "annotations" in kw else {}
        thread = self.constant(kw.pop("thread").value) if "thread" in kw else None
        if kw:
            raise self.error(next(iter(kw.values())), "unsupported loop argument")
        kind = intrin.LOOP_KINDS.get(name, "serial")
        return self._loop(names[0], lo, extent, kind, node.body, annotations, thread)

    def _grid(self, node: ast.For, call: ast.Call) -> For:
        if call.keywords or not call.args:
            raise self.error(call, "T.grid takes the loop extents only")
        names = self._targets(node.target, len(call.args))
        extents = [self.expr(a) for a in call.args]
        return self._nest(list(zip(names, extents)), node.body)

    def _nest(self, loops: list, body: list) -> For:
        name, extent = loops[0]
        if len(loops) == 1:
            return self._loop(name, zero_like(extent), extent, "serial", body)
        var = E.Var(name, extent.dtype)
        self.loops[name] = (zero_like(extent), extent)
        self.frames.append({name: var})
        try:
            inner = self._nest(loops[1:], body)
        finally:
            self.frames.pop()
        return For(var, zero_like(extent), extent, "serial", inner)

    def _loop(self, name, lo, extent, kind, body, annotations=None, thread=None) -> For:
        var = E.Var(name, extent.dtype)
        self.loops[name] = (lo, extent)
        return For(var, lo, extent, kind, self._body(body, {name: var}), annotations or {},
                   thread)

    def _loop_range(self, call: ast.Call) -> tuple:
        if not 1 <= len(call.args) <= 2:
            raise self.error(call, "a loop takes (extent) or (start, stop)")
        args = self.operands(call.args)
        if len(args) == 1:
            return zero_like(args[0]), args[0]
        return args[0], range_extent(args[0], args[1])

    def _targets(self, target: ast.expr, count: int) -> list[str]:
        elts = target.elts if isinstance(target, ast.Tuple) else [target]
        if len(elts) != count or not all(isinstance(t, ast.Name) for t in elts):
            raise self.error(target, f"expected {count} loop variable name(s)")
        return [t.id for t in elts]

    # ---------------------------------------------------------------- blocks
    def _with(self, node: ast.With, top: bool):
        call = node.items[0].context_expr if len(node.items) == 1 else None
        name = t_name(call.func) if isinstance(call, ast.Call) else None
        if name == "launch_thread":  # `with T.launch_thread(tag, n) as x:`: a thread loop
            return self._loop(**self.thread_launch(node, call))
        if name not in _BLOCKS:
            if name == "init":
                raise self.error(call, "T.init() is only allowed directly inside a T.sblock")
            raise self.error(node, "expected `with T.sblock(\"name\"):`")
        self.has_blocks = True
        return _BlockParser(self, call).parse(node.body)


class _BlockParser:
    """Collects a block's axes, reads/writes, attrs, allocs and init, then its body."""

    def __init__(self, parent: _FuncParser, call: ast.Call):
        self.p = parent
        self.name = parent.constant(parent.single_arg(call))
        self.iter_vars: list = []
        self.fields: dict = {"alloc_buffers": [], "annotations": {}, "match_buffers": []}

    def parse(self, nodes: list) -> SBlock:
        p = self.p
        p.frames.append({})
        try:
            body = [s for s in (self._item(n) for n in nodes) if s is not None]
        finally:
            p.frames.pop()
        f = self.fields
        f["alloc_buffers"] = tuple(f["alloc_buffers"])
        f["match_buffers"] = tuple(f["match_buffers"])
        return SBlock(self.name, seq(body or [Evaluate(E.IntImm(0, "int32"))]),
                      tuple(self.iter_vars), **f)

    def _item(self, node: ast.stmt):
        if isinstance(node, ast.With):
            call = node.items[0].context_expr
            if isinstance(call, ast.Call) and t_name(call.func) == "init":
                self.fields["init"] = self.p._body(node.body)
                return None
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            name = t_name(node.value.func)
            if name in _BLOCK_ONLY:
                self._meta(name, node.value)
                return None
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            name = t_name(node.value.func) or ""
            if name.startswith("axis."):
                self._axes(node.targets[0], node.value, name[5:])
                return None
            if name in _ALLOCS:
                self.fields["alloc_buffers"].append(self.p._alloc(node.targets[0], node.value,
                                                                  name))
                return None
            if name == "match_buffer":
                self.fields["match_buffers"].append(self._match(node.targets[0], node.value))
                return None
        return self.p._stmt(node)

    def _match(self, target: ast.expr, call: ast.Call) -> tuple:
        """``X = T.match_buffer(B[vi, 0:4], (4,), ...)``: X views that region of B."""
        p = self.p
        if not isinstance(target, ast.Name) or len(call.args) < 2:
            raise p.error(call, "expected `X = T.match_buffer(B[region], shape, dtype)` in a "
                                "block")
        region = self._region(call.args[0])
        buf = p._make_buffer(call, target.id, call.args[1:], call.keywords)
        p.frames[-1][target.id] = buf
        return buf, region

    def _meta(self, name: str, call: ast.Call) -> None:
        p = self.p
        if name in ("reads", "writes"):
            self.fields[name] = tuple(self._region(r) for r in _flatten(call.args))
        elif name == "where":
            self.fields["predicate"] = p.expr(p.single_arg(call))
        else:
            self.fields["annotations"].update(p.attr_dict(p.single_arg(call)))

    def _region(self, node: ast.expr) -> BufferRegion:
        p = self.p
        if not isinstance(node, ast.Subscript):
            raise p.error(node, "expected a buffer region like A[i, 0:4]")
        buf = p.buffer(node.value)
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if len(elts) != buf.ndim:
            raise p.error(node, f"buffer {buf.name!r} has {buf.ndim} dims, region has "
                                f"{len(elts)}")
        return BufferRegion(buf, tuple(self._range(e, d) for e, d in zip(elts, buf.shape)))

    def _range(self, node: ast.expr, dim) -> tuple:  # i, lo:hi, :hi, lo: or : of the dim
        if not isinstance(node, ast.Slice):
            return (self.p.expr(node), None)
        if node.step is not None:
            raise self.p.error(node, "a region slice takes no step")
        lo = E.IntImm(0, dim.dtype) if node.lower is None else self.p.expr(node.lower)
        hi = dim if node.upper is None else self.p.expr(node.upper)  # v:v + 1 is a point
        return (lo, None) if E.sub(hi, lo) == E.IntImm(1) else (lo, hi)

    def _axes(self, target: ast.expr, call: ast.Call, kind: str) -> None:
        if kind == "remap":
            self._remap(target, call)
            return
        p = self.p
        if kind not in _AXIS_KINDS or len(call.args) != 2 or not isinstance(target, ast.Name):
            raise p.error(call, f"unknown block axis T.axis.{kind}",
                          hint="use `v = T.axis.spatial/reduce/scan/opaque(dom, binding)` or "
                               "`vi, vj = T.axis.remap(\"SR\", [i, j])`")
        dom, binding = call.args
        if isinstance(dom, ast.Tuple) and len(dom.elts) == 2:
            lo, hi = p.operands(dom.elts)
            lo_ext = (lo, range_extent(lo, hi))
        else:
            extent = p.expr(dom)
            lo_ext = (zero_like(extent), extent)
        self._add(target.id, *lo_ext, _AXIS_KINDS[kind], p.expr(binding))

    def _remap(self, target: ast.expr, call: ast.Call) -> None:
        p = self.p
        kinds = p.constant(call.args[0]) if len(call.args) == 2 else None
        bindings = call.args[1].elts if kinds and isinstance(call.args[1], ast.List) else None
        names = target.elts if isinstance(target, ast.Tuple) else [target]
        if not isinstance(kinds, str) or bindings is None or \
                not len(kinds) == len(bindings) == len(names):
            raise p.error(call, "expected `v0, v1 = T.axis.remap(\"SR\", [i, j])` with one "
                                "kind letter per var")
        for letter, name, bnode in zip(kinds, names, bindings):
            if letter not in _REMAP or not isinstance(bnode, ast.Name) \
                    or bnode.id not in p.loops:
                raise p.error(bnode, f"remap needs kinds S/R and loop variables, got "
                                     f"{letter!r} for {ast.unparse(bnode)!r}")
            lo, extent = p.loops[bnode.id]
            self._add(name.id, lo, extent, _REMAP[letter], p.expr(bnode))

    def _add(self, name, lo, extent, kind, binding) -> None:
        var = E.Var(name, binding.dtype)
        self.p.frames[-1][name] = var
        self.iter_vars.append(IterVar(var, lo, extent, kind, binding))


def _flatten(args: list) -> list:
    out = []
    for a in args:
        out.extend(a.elts if isinstance(a, (ast.List, ast.Tuple)) else [a])
    return out


_STMTS = {
    ast.Assign: _FuncParser._assign,
    ast.AnnAssign: _FuncParser._ann_assign,
    ast.AugAssign: _FuncParser._aug_assign,
    ast.Expr: _FuncParser._expr_stmt,
    ast.For: _FuncParser._for,
    ast.With: _FuncParser._with,
    ast.If: _FuncParser._if,
    ast.While: _FuncParser._while,
    ast.Pass: _FuncParser._pass,
}


def parse_tir_text(text: str) -> dict:
    """Every ``@T.prim_func`` in ``text`` (top level or inside an ``@I.ir_module`` class), by
    name. Module-level ``n = TypeVar("n")`` / ``n = T.int64()`` lines declare symbolic vars.

    >>> funcs = parse_tir_text(tvm_module.script())   # doctest: +SKIP
    """
    try:
        tree = ast.parse(text)
    except SyntaxError as err:
        raise ParseError(f"invalid Python syntax: {err.msg}", source=text, line=err.lineno,
                         col=err.offset) from None
    except (RecursionError, MemoryError):  # Python's own parser on thousands of nested ops
        raise ParseError("expression nested too deeply for Python's parser",
                         hint="is this a TVMScript text?") from None
    module_vars, defs = {}, []
    for node in tree.body:
        decls = sym_var_decls(node, typevar=True)
        module_vars.update((name, E.Var(name, dtype)) for name, dtype in decls)
        if decls:
            continue
        if isinstance(node, ast.ClassDef):
            defs.extend(n for n in node.body if _is_prim_func(n))
        elif _is_prim_func(node):
            defs.append(node)
    return {d.name: parse_prim_func(d, text, module_vars) for d in defs}


def _is_prim_func(node: ast.stmt) -> bool:
    return isinstance(node, ast.FunctionDef) and any(
        t_name(d.func if isinstance(d, ast.Call) else d) == "prim_func"
        for d in node.decorator_list)
