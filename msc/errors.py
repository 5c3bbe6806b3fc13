"""One error hierarchy for msc.

Every error names the thing it is about (op, node, tensor, file, line) and says what to do.
Raise them with a message plus keyword context; the context is kept on the exception so tools
and tests can read it without parsing text::

    raise ShapeError("input has rank 3, expected 4", node="conv2d", hint="pass an NCHW tensor")
    # -> ShapeError: node 'conv2d': input has rank 3, expected 4 (hint: pass an NCHW tensor)
"""

from __future__ import annotations

__all__ = [
    "BuildError",
    "MSCError",
    "ParseError",
    "ResourceLimitError",
    "RuntimeCallError",
    "ScheduleError",
    "SerializationError",
    "ShapeError",
    "UnsupportedOpError",
    "ValidationError",
]

# Order in which context keys are rendered in front of the message.
_CONTEXT_KEYS = ("file", "line", "op", "node", "tensor", "param", "key")


class MSCError(Exception):
    """Base of every msc error.

    Keyword context (any of file, line, op, node, tensor, param, key) is rendered in front of
    the message; ``hint`` is rendered after it and should say what the user can do.
    """

    def __init__(self, message: str, *, hint: str | None = None, **context):
        self.message = message
        self.hint = hint
        self.context = {k: v for k, v in context.items() if v is not None}
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        ctx = dict(self.context)
        file, line = ctx.pop("file", None), ctx.pop("line", None)
        if file is not None:
            where.append(f"{file}:{line}" if line is not None else str(file))
        elif line is not None:
            where.append(f"line {line}")
        for key in _CONTEXT_KEYS[2:]:
            if key in ctx:
                where.append(f"{key} {ctx.pop(key)!r}")
        where.extend(f"{k} {v!r}" for k, v in ctx.items())
        text = (", ".join(where) + ": " if where else "") + self.message
        if self.hint:
            text += f" (hint: {self.hint})"
        return text


class UnsupportedOpError(MSCError):
    """An op (or several) that msc cannot convert, build or run.

    ``items`` lists every offending op so the user sees all of them at once, e.g.
    ``[{"op": "GridSample", "opset": 16, "count": 2, "node": "gs_1"}]``.
    """

    def __init__(self, message: str, *, items: list[dict] | None = None, **kw):
        self.items = list(items or [])
        if self.items:
            message = message + "\n" + "\n".join("  - " + _format_item(i) for i in self.items)
        super().__init__(message, **kw)


def _format_item(item: dict) -> str:
    head = str(item.get("op", "?"))
    rest = ", ".join(f"{k}={v!r}" for k, v in item.items() if k != "op")
    return f"{head} ({rest})" if rest else head


class ShapeError(MSCError):
    """Shapes, ranks or dtypes that do not fit an op or a function signature."""


class ParseError(MSCError):
    """Text that cannot be parsed (TVMScript, JSON, prototxt).

    When ``source`` and ``line``/``col`` (1-based) are given, the offending source line is shown
    with a caret under the column.
    """

    def __init__(self, message: str, *, source: str | None = None, col: int | None = None,
                 **kw):
        self.col = col
        super().__init__(message, **kw)
        line = self.context.get("line")
        if source is not None and line is not None:
            self.args = (self.args[0] + _caret(source, line, col),)

    def __str__(self) -> str:
        return self.args[0]


def _caret(source: str, line: int, col: int | None) -> str:
    lines = source.splitlines()
    if not 1 <= line <= len(lines):
        return ""
    text = lines[line - 1]
    pointer = " " * max((col or 1) - 1, 0) + "^"
    return f"\n  {text}\n  {pointer}"


class SerializationError(MSCError):
    """A file or string that is not a valid msc serialization (JSON, prototxt, weights)."""


class ValidationError(MSCError):
    """A structure that breaks an invariant (graph order, links, names, missing entry)."""


class ResourceLimitError(ValidationError):
    """A model that declares more than a limit allows (joints, elements), refused before the
    work or the memory is spent; the hint names the setting that raises the limit."""


class BuildError(MSCError):
    """A module that cannot be compiled by the backend."""


class RuntimeCallError(MSCError):
    """A failure while running a compiled function or a registered packed function."""


class ScheduleError(MSCError, RuntimeError):
    """A schedule primitive that does not apply to the given block or loops (TensorIR's
    ``tir.Schedule``); the function is left unchanged. A RuntimeError too, as TVM's is."""
