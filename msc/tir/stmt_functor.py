"""Visiting a TIR statement tree (TVM's ``tvm.tirx.stmt_functor``).

    post_order_visit(func.body, lambda node: found.append(node))   # children first
"""

from __future__ import annotations

from collections.abc import Callable

from .function import stmt_children

__all__ = ["post_order_visit", "pre_order_visit"]


def post_order_visit(stmt, fvisit: Callable) -> None:
    """Call ``fvisit`` on every statement under ``stmt`` (a block's init included), children
    before their parent."""
    for child in stmt_children(stmt):
        post_order_visit(child, fvisit)
    fvisit(stmt)


def pre_order_visit(stmt, fvisit: Callable) -> None:
    """Call ``fvisit`` on every statement, a parent before its children; a ``False`` result
    skips the children (as TVM's)."""
    if fvisit(stmt) is False:
        return
    for child in stmt_children(stmt):
        pre_order_visit(child, fvisit)
