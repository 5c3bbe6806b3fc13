"""Joint attrs as values: joint attrs are strings (conventions 1.2), decoded with the *op
table's* attr types, so no codegen re-declares an op's attrs or defaults; and
layout_transform's index map, read back (never evaluated) from its printed lambda::

    decode("1,1", "ints")                                  # [1, 1]
    index_map("T.index_map(lambda n, c: (n, c // 4))")     # an ast.Lambda
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from msc.errors import ValidationError

__all__ = ["decode", "index_map"]


def _split(text: str) -> list[str]:
    items = text.split(",")
    return items[:-1] if items and items[-1] == "" else items


def _number(text: str):
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        return float(text)


def _bool(text: str) -> bool:
    return text.strip().lower() not in ("0", "false")


def _list(cast):
    return lambda text: [cast(s) for s in _split(text)]


def _axes(text: str):
    return _list(int)(text) if "," in text else int(text)


def _any(text: str):
    return [_number(s) for s in _split(text)] if "," in text else _number(text)


_DECODERS: dict[str, Callable] = {
    "int": int, "float": float, "bool": _bool, "str": str, "dtype": str,
    "ints": _list(int), "floats": _list(float), "axes": _axes, "any": _any,
    # argument kinds given as attrs (ShapeExpr, PrimValue, tuples)
    "shape": _list(int), "prim": _number, "tensor": _any, "tensors": _any,
}


def decode(text: str, kind: str, default=None):
    """An attr string as a value of op-table type ``kind``; ``""`` gives ``default``."""
    if text == "":
        return "" if kind == "str" and default == "" else (None if kind != "str" else default)
    try:
        return _DECODERS[kind](text)
    except (ValueError, KeyError):
        raise ValidationError(f"attr value {text!r} is not a valid {kind}") from None


# --------------------------------------------------------------------------------------------
# layout_transform's index map: the attr is the IndexMap printed, ``T.index_map(lambda n, c:
# (n, c // 4, c % 4))``; it is read back (never evaluated) as its initial vars and final exprs.

_INDEX_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)


def _index_expr_ok(e, params: set) -> bool:
    if isinstance(e, ast.Name):
        return e.id in params
    if isinstance(e, ast.Constant):
        return type(e.value) is int
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return _index_expr_ok(e.operand, params)
    return isinstance(e, ast.BinOp) and isinstance(e.op, _INDEX_BINOPS) and \
        _index_expr_ok(e.left, params) and _index_expr_ok(e.right, params)


def index_map(text: str) -> ast.Lambda:
    """``"T.index_map(lambda n, c: (n, c // 4))"`` (or the bare lambda) as its ``ast.Lambda``:
    ``args.args`` are the initial vars, ``body.elts`` the final exprs (+ - * // % on the vars
    and int constants only)."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        tree = None
    if isinstance(tree, ast.Call) and ast.unparse(tree.func) in ("T.index_map", "index_map") \
            and len(tree.args) == 1 and not tree.keywords:
        tree = tree.args[0]
    if not isinstance(tree, ast.Lambda) or tree.args.vararg or tree.args.kwarg or \
            tree.args.kwonlyargs or tree.args.defaults or tree.args.posonlyargs:
        raise ValidationError(f"index_map {text!r} is not T.index_map(lambda <vars>: (...))",
                              op="layout_transform", key="index_map")
    if not isinstance(tree.body, ast.Tuple):
        tree.body = ast.Tuple([tree.body], ast.Load())
    params = {a.arg for a in tree.args.args}
    bad = [ast.unparse(e) for e in tree.body.elts if not _index_expr_ok(e, params)]
    if bad or len(params) != len(tree.args.args):
        raise ValidationError(f"index_map {text!r}: unsupported index expressions {bad}",
                              op="layout_transform", key="index_map",
                              hint="only + - * // % of the lambda's vars and int constants")
    return tree
