"""Where the parser is: the source text, name spaces, and errors that point at the source."""

from __future__ import annotations

import ast

from ...errors import MSCError, ParseError
from ..expr import GlobalVar

# Python module names -> the namespace they stand for (``from tvm.script import relax as R``).
NAMESPACE_MODULES = {"relax": "R", "ir": "I", "tir": "T", "tirx": "T"}
DEFAULT_ALIASES = {"R": "R", "I": "I", "T": "T"}


class ParseContext:
    """Shared by the Relax parser and the TIR hook (``msc.tir.parser.parse_prim_func``).

    ``error(node, message)`` returns a ParseError whose line, column and caret point at
    ``node`` in the original text. ``aliases`` maps names (``R``, ``relax``) to namespaces;
    ``global_vars`` the module's functions; ``type_vars`` module-level symbolic vars.
    """

    def __init__(self, source: str, filename: str | None = None, line_offset: int = 0,
                 col_offset: int = 0, full_source: str | None = None):
        self.source = source
        self.full_source = full_source if full_source is not None else source
        self.filename = filename
        self.line_offset = line_offset
        self.col_offset = col_offset
        self.aliases = dict(DEFAULT_ALIASES)
        self.global_vars: dict[str, GlobalVar] = {}
        self.type_vars: dict = {}
        self.module_name = "Module"

    @property
    def tir_vars(self) -> dict:
        """Module-level symbolic vars, as the TIR parser hook reads them."""
        return self.type_vars

    def error(self, node, message: str, hint: str | None = None) -> ParseError:
        line = getattr(node, "lineno", None)
        col = getattr(node, "col_offset", None)
        if line is not None:
            line += self.line_offset
        if col is not None:
            col += 1 + self.col_offset
        return ParseError(message, source=self.full_source, line=line, col=col,
                          file=self.filename, hint=hint)

    def wrap(self, node, err: MSCError, prefix: str = "") -> ParseError:
        """An msc error raised while building ``node`` (inference, op binding) as a
        ParseError at that node, keeping the original message and hint."""
        where = []
        for key in ("op", "param"):
            if key in err.context:
                where.append(f"{key} {err.context[key]!r}")
        text = (", ".join(where) + ": " if where else "") + err.message
        return self.error(node, prefix + text, hint=err.hint)

    def namespace(self, node) -> tuple[str | None, list[str]]:
        """``R.nn.conv2d`` -> ("R", ["nn", "conv2d"]); (None, [...]) if not a namespace."""
        if type(node) is ast.Attribute and type(node.value) is ast.Name:  # ``R.add``: most
            return self.aliases.get(node.value.id), [node.attr]
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None, []
        parts.reverse()
        return self.aliases.get(node.id), parts

    def add_import(self, node: ast.ImportFrom | ast.Import) -> None:
        for alias in node.names:
            module = alias.name.rsplit(".", 1)[-1]
            if module in NAMESPACE_MODULES:
                self.aliases[alias.asname or module] = NAMESPACE_MODULES[module]
