"""One ``@R.function``: signature, bindings, dataflow blocks, ``if``, ``return``."""

from __future__ import annotations

import ast

from ...errors import MSCError, ParseError
from ...script.tir import dtype_ctor
from ...tir import intrin
from ..analysis import is_base_of, unify_struct_info
from ..arith import annotation_mismatch
from ..block_builder import BlockBuilder
from ..expr import (
    BindingBlock,
    DataflowBlock,
    DataflowVar,
    Function,
    If,
    MatchCast,
    PrimValue,
    SeqExpr,
    Var,
    VarBinding,
)
from ..printer.sinfo import sinfo_to_str
from ..struct_info import FuncStructInfo, ObjectStructInfo, PrimStructInfo
from .exprs import ExprParser
from .sinfo import SymScope

# The decorators TVM prints (any import alias of I/R/T); any other one is refused, not run.
DECORATORS = (("I", "ir_module"), ("R", "function"), ("T", "prim_func"))
# Older spellings of the same decorators ("TVM" is the package itself: ``import msc as tvm``)
SPELLINGS = {("TVM", "script.ir_module"): ("I", "ir_module")}


def _decorator_name(ctx, dec: ast.expr) -> tuple[str | None, str]:
    space, parts = ctx.namespace(dec.func if isinstance(dec, ast.Call) else dec)
    name = (space, ".".join(parts))
    name = SPELLINGS.get(name, name)
    if name not in DECORATORS:
        shown = ast.unparse(dec.func if isinstance(dec, ast.Call) else dec)
        raise ctx.error(dec, f"unknown decorator @{shown:.60}",
                        hint="supported: @I.ir_module, @R.function, @T.prim_func")
    return name


def decorator_flags(ctx, node: ast.FunctionDef, expected: tuple) -> dict | None:
    """``@R.function(private=True)`` -> {"private": True}; None if not decorated so."""
    names = [_decorator_name(ctx, dec) for dec in node.decorator_list]  # all checked first
    for dec, name in zip(node.decorator_list, names):
        if name != expected:
            continue
        flags = {}
        for kw in dec.keywords if isinstance(dec, ast.Call) else ():
            if not isinstance(kw.value, ast.Constant):
                raise ctx.error(kw.value, f"decorator argument {kw.arg!r} must be a literal")
            flags[kw.arg] = kw.value.value
        if isinstance(dec, ast.Call) and dec.args:
            raise ctx.error(dec, "decorator arguments must be keywords")
        return flags
    return None


class FunctionParser:
    """Parses a Relax function. ``signature()`` first (callers need it), then ``parse()``."""

    def __init__(self, ctx, node: ast.FunctionDef, module, metadata, syms=None, env=None):
        self.ctx = ctx
        self.node = node
        self.flags = decorator_flags(ctx, node, ("R", "function")) or {}
        for key in self.flags:
            if key not in ("private", "pure", "check_well_formed"):
                raise ctx.error(node, f"unknown @R.function argument {key!r}",
                                hint="supported: private, pure")
        self.syms = SymScope(ctx, syms if syms is not None else ctx.type_vars)
        self.env: dict = dict(env or {})
        self.module = module
        self.bb = BlockBuilder(module)
        self.exprs = ExprParser(ctx, self.syms, self.env, self._normalize, metadata)
        self.params: list[Var] | None = None
        self.ret = None
        self.attrs: dict = {}
        self.blocks: list = []
        self.bindings: list = []

    # ---- signature -------------------------------------------------------------------------
    def signature(self) -> FuncStructInfo:
        if self.params is None:
            self._predeclare(self.node.body)
            self.params = [self._param(a) for a in self._arg_nodes()]
            self.ret = self.exprs.sinfos.sinfo(self.node.returns, signature=True) \
                if self.node.returns is not None else None
        ret = self.ret or ObjectStructInfo()
        return FuncStructInfo([p.struct_info for p in self.params], ret,
                              self.flags.get("pure", True))

    def _arg_nodes(self):
        args = self.node.args
        extra = args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs
        if extra:
            raise self.ctx.error(self.node, "Relax functions take plain positional parameters")
        return args.args

    def _param(self, arg: ast.arg) -> Var:
        if arg.annotation is None:
            raise self.ctx.error(arg, f"parameter {arg.arg!r} needs a struct info annotation",
                                 hint='e.g. x: R.Tensor((1, 3), dtype="float32")')
        var = Var(arg.arg, self.exprs.sinfos.sinfo(arg.annotation, signature=True))
        self.env[arg.arg] = var
        return var

    def _predeclare(self, stmts) -> None:
        """``n = T.int64()`` anywhere at the top of the body declares ``n`` for the whole
        function, so signatures may use it before the declaration line."""
        for stmt in stmts:
            for decl in self._sym_decls(stmt):
                self.syms.declare(*decl)

    def _sym_decls(self, stmt) -> list:
        """[(name, dtype)] of ``n = T.int64()`` or ``m, n = T.int64(), T.int64()``, else []."""
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            return []
        target, value = stmt.targets[0], stmt.value
        pairs = [(target, value)]
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and \
                len(target.elts) == len(value.elts):
            pairs = list(zip(target.elts, value.elts))
        decls = [self._sym_decl(t, v) for t, v in pairs]
        return decls if all(decls) else []

    def _sym_decl(self, target, value):
        if not (isinstance(target, ast.Name) and isinstance(value, ast.Call)):
            return None
        space, parts = self.ctx.namespace(value.func)
        if space == "T" and len(parts) == 1 and parts[0] in intrin.DTYPES and \
                not value.args and not value.keywords:
            return target.id, parts[0]
        return None

    # ---- body ------------------------------------------------------------------------------
    def parse(self, module=None) -> Function:
        """The function; ``module`` holds the signatures of the functions it may call."""
        if module is not None:
            self.module = module
            self.bb = BlockBuilder(module)
        self.signature()
        body = self._statements(self.node.body, dataflow=False, outputs=set(), top=True)
        if body is None:
            raise self.ctx.error(self.node, f"function {self.node.name!r} has no return")
        self._flush()
        body_expr = body
        why = None if self.ret is None or body_expr.struct_info is None else \
            annotation_mismatch(self.ret, body_expr.struct_info)
        if why is not None:
            raise self.ctx.error(self._return_node, "return value does not match the return "
                                 f"annotation: {sinfo_to_str(body_expr.struct_info)} is not "
                                 f"{sinfo_to_str(self.ret)}: {why}")
        attrs = dict(self.attrs)
        if not self.flags.get("private", False):
            attrs.setdefault("global_symbol", self.node.name)
        return Function(self.params, SeqExpr(self.blocks, body_expr), self.ret,
                        self.flags.get("pure", True), attrs)

    def _flush(self) -> None:
        if self.bindings:
            self.blocks.append(BindingBlock(self.bindings))
        self.bindings = []

    def _statements(self, stmts, dataflow: bool, outputs: set, top: bool = False):
        """Parse statements; returns the returned expr (top level) or None."""
        for i, stmt in enumerate(stmts):
            if isinstance(stmt, ast.Return):
                if not top or i != len(stmts) - 1:
                    raise self.ctx.error(stmt, "return must be the last statement of the "
                                               "function")
                self._return_node = stmt
                if stmt.value is None:
                    raise self.ctx.error(stmt, "a Relax function must return a value")
                return self.exprs.expr(stmt.value)
            self._statement(stmt, dataflow, outputs, top)
        return None

    def _statement(self, stmt, dataflow: bool, outputs: set, top: bool) -> None:
        handler = getattr(self, f"_s_{type(stmt).__name__}", None)
        if handler is None:
            raise self.ctx.error(stmt, f"unsupported statement: {type(stmt).__name__}",
                                 hint="function bodies hold bindings, `with R.dataflow():`, "
                                      "`if`, R.func_attr and return")
        handler(stmt, dataflow, outputs, top)

    def _s_Pass(self, stmt, dataflow, outputs, top) -> None:
        return None

    def _s_Expr(self, stmt, dataflow, outputs, top) -> None:
        value = stmt.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return None  # docstring
        space, parts = self.ctx.namespace(value.func) if isinstance(value, ast.Call) \
            else (None, [])
        name = ".".join(parts) if space == "R" else ""
        if name == "func_attr":
            return self._func_attr(value, top)
        if name == "output":
            raise self.ctx.error(stmt, "R.output(...) must be the last statement of a "
                                       "`with R.dataflow():` block")
        self._bind("_", value, None, stmt, dataflow, outputs)
        return None

    def _func_attr(self, call: ast.Call, top: bool) -> None:
        if not top or len(call.args) != 1 or call.keywords:
            raise self.ctx.error(call, "R.func_attr({...}) takes one dict, at the top of the "
                                       "function body")
        attrs = self.exprs.value(call.args[0])
        if not isinstance(attrs, dict):
            raise self.ctx.error(call.args[0], "R.func_attr takes a dict")
        self.attrs.update(attrs)

    def _s_Assign(self, stmt, dataflow, outputs, top) -> None:
        for name, dtype in self._sym_decls(stmt):
            if name not in self.syms.vars or self.syms.vars[name].dtype != dtype:
                self.syms.declare(name, dtype)
        if self._sym_decls(stmt):
            return
        if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
            raise self.ctx.error(stmt, "bind one name per statement: `x = ...`",
                                 hint="tuple unpacking is not supported; index the tuple")
        name = stmt.targets[0].id
        if isinstance(stmt.value, ast.Name) and stmt.value.id == self.ctx.module_name and \
                name == "cls":
            return
        self._bind(name, stmt.value, None, stmt, dataflow, outputs)

    def _s_AnnAssign(self, stmt, dataflow, outputs, top) -> None:
        if not isinstance(stmt.target, ast.Name) or stmt.value is None:
            raise self.ctx.error(stmt, "an annotated binding needs a name and a value")
        self._bind(stmt.target.id, stmt.value, stmt.annotation, stmt, dataflow, outputs)

    def _s_With(self, stmt, dataflow, outputs, top) -> None:
        item = stmt.items[0] if len(stmt.items) == 1 else None
        is_dataflow = item is not None and isinstance(item.context_expr, ast.Call) and \
            self.ctx.namespace(item.context_expr.func) == ("R", ["dataflow"])
        if not is_dataflow or item.optional_vars is not None:
            raise self.ctx.error(stmt, "only `with R.dataflow():` is supported")
        if dataflow or not top:
            raise self.ctx.error(stmt, "dataflow blocks cannot be nested")
        body = list(stmt.body)
        names = self._outputs(body)
        self._flush()
        self._statements(body, dataflow=True, outputs=names)
        self.blocks.append(DataflowBlock(self.bindings))
        self.bindings = []
        self._check_outputs(names, body)

    def _outputs(self, body: list) -> set:
        last = body[-1] if body else None
        call = last.value if isinstance(last, ast.Expr) else None
        if not isinstance(call, ast.Call) or self.ctx.namespace(call.func) != ("R", ["output"]):
            return set()
        body.pop()
        self._output_node = call
        names = set()
        for arg in call.args:
            if not isinstance(arg, ast.Name):
                raise self.ctx.error(arg, "R.output takes the names of bound variables")
            names.add(arg.id)
        return names

    def _check_outputs(self, names: set, body) -> None:
        bound = {b.var.name_hint for b in self.blocks[-1].bindings}
        for name in sorted(names - bound):
            raise self.ctx.error(self._output_node, f"R.output({name}): {name!r} is not "
                                                    "bound in this dataflow block")

    def _s_If(self, stmt, dataflow, outputs, top) -> None:
        if dataflow:
            raise self.ctx.error(stmt, "`if` is not allowed inside a dataflow block")
        cond = self.exprs.expr(stmt.test)
        if not stmt.orelse:
            raise self.ctx.error(stmt, "`if` needs an `else` branch that binds the same name")
        name_t, ann_t, true_branch = self._branch(stmt.body, stmt)
        name_f, ann_f, false_branch = self._branch(stmt.orelse, stmt)
        if name_t != name_f:
            raise self.ctx.error(stmt.orelse[-1], f"both branches must end by binding the same "
                                                  f"name ({name_t!r} vs {name_f!r})")
        sinfo = unify_struct_info(true_branch.struct_info, false_branch.struct_info)
        ann = ann_t if ann_t is not None else ann_f
        value = If(cond, true_branch, false_branch)
        value._set_struct_info(sinfo)
        self._add_binding(name_t, value, ann, stmt, dataflow, outputs)

    def _branch(self, stmts, stmt):
        last = stmts[-1]
        if isinstance(last, ast.Assign) and len(last.targets) == 1 and \
                isinstance(last.targets[0], ast.Name):
            name, ann_node = last.targets[0].id, None
        elif isinstance(last, ast.AnnAssign) and isinstance(last.target, ast.Name):
            name, ann_node = last.target.id, last.annotation
        else:
            raise self.ctx.error(last, "each `if` branch must end with a binding `x = ...`")
        saved_blocks, saved_bindings = self.blocks, self.bindings
        self.blocks, self.bindings = [], []
        self._statements(stmts[:-1], dataflow=False, outputs=set())
        body = self.exprs.expr(last.value)
        self._flush()
        blocks = self.blocks
        self.blocks, self.bindings = saved_blocks, saved_bindings
        ann = self.exprs.sinfos.sinfo(ann_node) if ann_node is not None else None
        return name, ann, SeqExpr(blocks, body)

    def _s_FunctionDef(self, stmt, dataflow, outputs, top) -> None:
        if decorator_flags(self.ctx, stmt, ("R", "function")) is None:
            raise self.ctx.error(stmt, "inner functions must be decorated with @R.function")
        inner = FunctionParser(self.ctx, stmt, self.module, self.exprs.metadata,
                               syms=self.syms.vars, env=self.env)
        func = inner.parse()
        func = func.without_attr("global_symbol")
        var = Var(stmt.name, func.struct_info)
        self.bindings.append(VarBinding(var, func))
        self.env[stmt.name] = var

    # ---- bindings --------------------------------------------------------------------------
    def _bind(self, name, value_node, ann_node, stmt, dataflow, outputs) -> None:
        ann = self.exprs.sinfos.sinfo(ann_node) if ann_node is not None else None
        if self._is_match_cast(value_node):
            return self._match_cast(name, value_node, ann, ann_node, dataflow, outputs)
        value = self.exprs.expr(value_node)
        if isinstance(ann, PrimStructInfo) and _is_number(value_node):
            value = PrimValue(dtype_ctor(ann.dtype)(value.value.value))  # `p: T.int32 = 3`
        self._add_binding(name, value, ann, ann_node or stmt, dataflow, outputs)
        return None

    def _add_binding(self, name, value, ann, node, dataflow, outputs) -> None:
        sinfo = value.struct_info
        if ann is not None:
            why = None if sinfo is None else annotation_mismatch(ann, sinfo)
            if why is not None:
                raise self.ctx.error(node, f"annotation {sinfo_to_str(ann)} does not match "
                                           f"the inferred {sinfo_to_str(sinfo)} of {name!r}: "
                                           f"{why}", hint=_TRUSTED)
            sinfo = ann
        var = self._new_var(name, sinfo, dataflow, outputs)
        self.bindings.append(VarBinding(var, value))

    def _new_var(self, name, sinfo, dataflow, outputs) -> Var:
        var_type = DataflowVar if dataflow and name not in outputs else Var
        var = var_type(name, sinfo)
        self.env[name] = var
        return var

    def _is_match_cast(self, node) -> bool:
        return isinstance(node, ast.Call) and \
            self.ctx.namespace(node.func) == ("R", ["match_cast"])

    def _match_cast(self, name, node, ann, ann_node, dataflow, outputs) -> None:
        if len(node.args) != 2 or node.keywords:
            raise self.ctx.error(node, "R.match_cast(value, struct_info) takes two arguments")
        value = self.exprs.expr(node.args[0])
        sinfo = self.exprs.sinfos.sinfo(node.args[1])
        if ann is not None and not is_base_of(ann, sinfo):
            raise self.ctx.error(ann_node, f"annotation {sinfo_to_str(ann)} does not match "
                                           f"R.match_cast's {sinfo_to_str(sinfo)}")
        var = self._new_var(name, sinfo, dataflow, outputs)
        self.bindings.append(MatchCast(var, value, sinfo))

    def _normalize(self, expr, node):
        try:
            return self.bb.normalize(expr)
        except ParseError:
            raise
        except MSCError as err:
            raise self.ctx.wrap(node, err) from None


_TRUSTED = ("an annotation is accepted when its dims are provably equal to the inferred ones "
            "or cannot be proven different; fix the annotation or the expression")


def _is_number(node) -> bool:
    """A bare numeric literal (``3``, ``-1.5``): typed by its annotation, as in TVM."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and \
        not isinstance(node.value, bool)
