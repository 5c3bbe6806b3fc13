"""The IR classes' one link to their text form.

``repr(expr)`` and ``repr(sinfo)`` are TVMScript, which ``msc/relax/printer/`` writes. The
printer imports the IR classes, so the classes reach it through this hook instead of
importing it; ``msc/relax/__init__.py`` installs the printer before anything can be printed.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["expr_text", "install", "sinfo_text"]

_PRINTERS: dict[str, Callable] = {}


def install(expr_to_str: Callable, sinfo_to_str: Callable) -> None:
    """Called once by the package: the printer's expression and struct-info entry points."""
    _PRINTERS.update(expr=expr_to_str, sinfo=sinfo_to_str)


def expr_text(expr) -> str:
    return _PRINTERS["expr"](expr)


def sinfo_text(sinfo) -> str:
    return _PRINTERS["sinfo"](sinfo)
