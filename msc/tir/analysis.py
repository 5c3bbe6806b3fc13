"""TVM's ``tirx.analysis`` helpers msc's expressions answer directly.

    expr_deep_equal(i * 2 + 1, i * 2 + 1)      # True: the same expression tree
"""

from __future__ import annotations

from .expr import PrimExpr

__all__ = ["expr_deep_equal"]


def expr_deep_equal(lhs: PrimExpr, rhs: PrimExpr) -> bool:
    """Whether two expressions are the same tree (vars by name, constants by value)."""
    return lhs == rhs
