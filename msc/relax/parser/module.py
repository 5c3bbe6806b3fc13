"""Module level: imports, ``n = TypeVar("n")``, the metadata section, ``@I.ir_module``
classes and lone ``@R.function`` functions."""

from __future__ import annotations

import ast

from ...errors import MSCError, ParseError
from ...tir import expr as tir
from ...tir.parser import parse_prim_func as tir_parse
from ..expr import GlobalVar
from ..module import IRModule
from ..struct_info import FuncStructInfo
from .context import ParseContext
from .function import FunctionParser, decorator_flags
from .metadata import parse_metadata


class _Signature:
    """A function's struct info, standing in the BlockBuilder's module before its body is
    parsed (calls to it infer their result from it)."""

    def __init__(self, struct_info):
        self.struct_info = struct_info


def parse_tree(ctx: ParseContext, tree: ast.Module, metadata: dict | None):
    """The module (or lone function) defined by a parsed file."""
    found = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            ctx.add_import(stmt)
        elif isinstance(stmt, ast.Assign):
            metadata = _module_assign(ctx, stmt, metadata)
        elif isinstance(stmt, (ast.ClassDef, ast.FunctionDef)):
            found.append(stmt)
        elif not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            raise ctx.error(stmt, f"unsupported module-level statement: {type(stmt).__name__}",
                            hint="a script holds imports, TypeVar declarations, metadata and "
                                 "one @I.ir_module class")
    if len(found) != 1:
        where = found[1] if found else tree
        raise ctx.error(where, f"expected one @I.ir_module class or @R.function, found "
                               f"{len(found)}")
    node = found[0]
    if isinstance(node, ast.ClassDef):
        return parse_class(ctx, node, metadata)
    return parse_lone_function(ctx, node, metadata)


def _module_assign(ctx, stmt: ast.Assign, metadata):
    target = stmt.targets[0] if len(stmt.targets) == 1 else None
    if not isinstance(target, ast.Name):
        raise ctx.error(stmt, "module-level assignments bind one name")
    if target.id == "metadata":
        return parse_metadata(ctx, stmt.value)
    value = stmt.value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
            value.func.id == "TypeVar" and len(value.args) >= 1 and \
            isinstance(value.args[0], ast.Constant):
        if value.args[0].value != target.id:
            raise ctx.error(value, f"TypeVar name {value.args[0].value!r} must match the "
                                   f"variable {target.id!r}")
        ctx.type_vars[target.id] = tir.Var(target.id, "int64")
        return metadata
    raise ctx.error(stmt, f"unsupported module-level assignment to {target.id!r}",
                    hint='only `n = TypeVar("n")` and `metadata = ...` are allowed')


def parse_class(ctx, node: ast.ClassDef, metadata) -> IRModule:
    if decorator_flags(ctx, node, ("I", "ir_module")) is None:
        raise ctx.error(node, f"class {node.name!r} must be decorated with @I.ir_module")
    ctx.module_name = node.name
    funcs, attrs = [], {}
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef):
            funcs.append(stmt)
        elif _is_module_attrs(ctx, stmt):
            attrs.update(_module_attrs(ctx, stmt))
        elif not isinstance(stmt, ast.Pass) and not (
                isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            raise ctx.error(stmt, "an @I.ir_module class holds only @R.function and "
                                  "@T.prim_func functions")
    ctx.global_vars = {f.name: GlobalVar(f.name) for f in funcs}
    return IRModule(_parse_functions(ctx, funcs, metadata), attrs)


def _is_module_attrs(ctx, stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
        ctx.namespace(stmt.value.func) == ("I", ["module_attrs"])


def _module_attrs(ctx, stmt) -> dict:
    from .metadata import literal

    call = stmt.value
    if len(call.args) != 1:
        raise ctx.error(call, "I.module_attrs takes one dict")
    value = literal(ctx, call.args[0])
    if not isinstance(value, dict):
        raise ctx.error(call, "I.module_attrs takes one dict")
    return value


def _parse_functions(ctx, nodes, metadata) -> dict:
    stub = IRModule()
    relax_parsers, out = {}, {}
    for node in nodes:
        gv = ctx.global_vars[node.name]
        if decorator_flags(ctx, node, ("R", "function")) is not None:
            parser = FunctionParser(ctx, node, None, metadata)
            sinfo = parser.signature()
            relax_parsers[node.name] = parser
        elif decorator_flags(ctx, node, ("T", "prim_func")) is not None:
            out[node.name] = parse_prim_func(ctx, node)
            sinfo = out[node.name].struct_info if hasattr(out[node.name], "struct_info") \
                else FuncStructInfo.opaque_func()
        else:
            raise ctx.error(node, f"function {node.name!r} needs @R.function or @T.prim_func")
        gv._set_struct_info(sinfo if isinstance(sinfo, FuncStructInfo)
                            else FuncStructInfo.opaque_func())
        stub[node.name] = _Signature(gv.struct_info)
    for node in nodes:
        if node.name in relax_parsers:
            out[node.name] = relax_parsers[node.name].parse(stub)
            stub[node.name] = _Signature(out[node.name].struct_info)
    return {gv: out[name] for name, gv in ctx.global_vars.items()}


def parse_prim_func(ctx, node: ast.FunctionDef):
    """Hand a ``@T.prim_func`` to msc.tir.parser."""
    try:
        return tir_parse(node, ctx.source, ctx)
    except ParseError:
        raise
    except MSCError as err:
        raise ctx.wrap(node, err) from None


def parse_lone_function(ctx, node: ast.FunctionDef, metadata):
    if decorator_flags(ctx, node, ("R", "function")) is None:
        raise ctx.error(node, f"function {node.name!r} must be decorated with @R.function")
    return FunctionParser(ctx, node, IRModule(), metadata).parse()
