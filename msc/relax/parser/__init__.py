"""TVMScript parser: text (or a decorated Python class/function) -> msc IRModule / Function.

The text is read with ``ast`` and interpreted node by node; it is never executed. Op calls go
through the op table (``registry.make_call``), every binding is normalized by a BlockBuilder
(struct info inferred and checked against its annotation), and every error is a ParseError
with line, column and a caret::

    mod = from_script(text)                      # what TVM 0.27 or msc printed
    mod = from_script(text, metadata={"ir.GenericConst": [w0, w1]})   # TVM text w/o metadata
"""

from __future__ import annotations

import ast
import inspect
import linecache
import sys
import textwrap
import typing
import warnings

from ...errors import ParseError
from ...gc_tuning import fewer_collections
from ...tir import expr as tir
from .context import NAMESPACE_MODULES, ParseContext
from .metadata import normalize_metadata
from .module import parse_tree

__all__ = ["ParseContext", "from_script", "parse_object"]


@fewer_collections
def from_script(text: str, metadata: dict | None = None, filename: str | None = None):
    """Parse TVMScript: an ``@I.ir_module`` class -> IRModule, an ``@R.function`` ->
    Function. ``metadata`` supplies constants the text references but does not contain
    ({key: [numpy arrays]}); a metadata section in the text takes precedence."""
    if not isinstance(text, str):
        raise ParseError(f"from_script takes TVMScript text, got {type(text).__name__}")
    ctx = ParseContext(text, filename)
    tree = _parse_ast(ctx, text)
    try:
        return parse_tree(ctx, tree, normalize_metadata(metadata))
    except RecursionError:  # the readers recurse on expression depth; a script never nests so
        raise _too_deep(ctx, None) from None


def _too_deep(ctx: ParseContext, err: SyntaxError | None) -> ParseError:
    node = ast.Module(body=[], type_ignores=[])
    node.lineno, node.col_offset = getattr(err, "lineno", None) or 1, 0
    return ctx.error(node, "expression nested too deeply", hint="TVMScript nests a few levels; "
                                                              "is this file a TVMScript text?")


def _parse_ast(ctx: ParseContext, text: str) -> ast.Module:
    try:
        with warnings.catch_warnings():  # the text's own "invalid escape" notes are not ours
            warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
            return ast.parse(text, filename=ctx.filename or "<tvmscript>")
    except SyntaxError as err:
        node = ast.Module(body=[], type_ignores=[])
        node.lineno, node.col_offset = err.lineno or 1, max((err.offset or 1) - 1, 0)
        raise ctx.error(node, f"syntax error: {err.msg}") from None
    except (RecursionError, MemoryError):  # Python's own parser on thousands of nested ops
        raise _too_deep(ctx, None) from None


def parse_object(obj, frame_locals: dict | None = None):
    """Parse a decorated Python class or function from its source (``inspect.getsource``).
    Module-level ``TypeVar``s and namespace aliases are read from the object's globals."""
    try:
        lines, start = inspect.getsourcelines(obj)
    except (OSError, TypeError) as err:
        raise ParseError(f"cannot read the source of {obj!r}: {err}",
                         hint="define it in a file, or use relax.from_script(text)") from None
    filename = inspect.getsourcefile(obj)
    indent = len(lines[0]) - len(lines[0].lstrip())
    snippet = textwrap.dedent("".join(lines))
    full = "".join(linecache.getlines(filename)) if filename else snippet
    ctx = ParseContext(snippet, filename, line_offset=start - 1, col_offset=indent,
                       full_source=full or snippet)
    names = dict(getattr(sys.modules.get(obj.__module__), "__dict__", {}))
    names.update(frame_locals or {})
    _read_python_names(ctx, names)
    tree = _parse_ast(ctx, snippet)
    return parse_tree(ctx, tree, None)


def _read_python_names(ctx: ParseContext, names: dict) -> None:
    for name, value in names.items():
        if isinstance(value, typing.TypeVar):
            ctx.type_vars[name] = tir.Var(name, "int64")
        module_name = getattr(value, "__name__", None)
        if inspect.ismodule(value) and module_name == "msc":  # import msc as tvm
            ctx.aliases[name] = "TVM"
        if inspect.ismodule(value) and module_name and ".script" in module_name:
            short = module_name.rsplit(".", 1)[-1]
            if short in NAMESPACE_MODULES:
                ctx.aliases[name] = NAMESPACE_MODULES[short]
