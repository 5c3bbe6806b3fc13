"""Safe spelling of model-supplied names and values in generated Python source.

Nothing a model says (node names, aliases, attrs, dtypes) is pasted into generated code as is:
names become identifiers, strings become ``repr`` literals, and comment text is escaped to
printable ASCII on one line::

    >>> namer = Namer()
    >>> namer('x"); import os #'), namer("class"), namer("x____import_os__")
    ('x____import_os__', 'class_', 'x____import_os___1')
    >>> literal([1, 2.5, None, "a'b"]), comment("a\\nimport os")
    ('[1, 2.5, None, "a\\'b"]', 'a\\\\nimport os')
"""

from __future__ import annotations

import keyword
import math
import re

from msc.errors import ValidationError
from msc.naming import UniqueNamer

__all__ = ["Namer", "comment", "identifier", "literal"]

_NOT_WORD = re.compile(r"[^0-9A-Za-z_]")
_MAX_COMMENT = 300


def identifier(name: str, fallback: str = "v") -> str:
    """A valid Python identifier that reads like ``name`` (not unique, not checked for
    keywords: see Namer)."""
    ident = _NOT_WORD.sub("_", str(name)) or fallback
    return f"_{ident}" if ident[0].isdigit() else ident


class Namer(UniqueNamer):
    """Unique identifiers for one generated scope: ``namer(name)`` gives ``name`` made an
    identifier, suffixed ``_1``, ``_2``... on collision, never a keyword or a reserved name."""

    def exact(self, name: str) -> str | None:
        """Claim ``name`` itself when it is a free, plain identifier; else None."""
        if not name.isidentifier() or keyword.iskeyword(name) or keyword.issoftkeyword(name) \
                or name.startswith("_") or not self.is_free(name):
            return None
        self.claim(name)
        return name

    def __call__(self, name: str, fallback: str = "v") -> str:
        base = identifier(name, fallback)
        if keyword.iskeyword(base) or keyword.issoftkeyword(base) or base.startswith("__"):
            base = f"{base.strip('_') or fallback}_"
        return super().__call__(base)


def literal(value) -> str:
    """Python source for a plain value (None, bool, int, float, str, list/tuple of these)."""
    if value is None or isinstance(value, (bool, str)):
        return repr(value)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, (list, tuple)):
        items = ", ".join(literal(v) for v in value)
        if isinstance(value, tuple):
            return f"({items},)" if len(value) == 1 else f"({items})"
        return f"[{items}]"
    raise ValidationError(f"cannot write {type(value).__name__} {value!r:.60} as a literal",
                          hint="codegen writes None, bool, int, float, str and lists of them")


def _float(value: float) -> str:
    if math.isnan(value):
        return 'float("nan")'
    if math.isinf(value):
        return 'float("inf")' if value > 0 else '-float("inf")'
    return repr(float(value))


def comment(text: str) -> str:
    """``text`` as the body of a one-line comment: printable ASCII, escapes for the rest."""
    escaped = str(text).encode("ascii", "backslashreplace").decode("ascii")
    if not escaped.isprintable():  # (one C-level test first: comments are rarely odd)
        escaped = "".join(c if c.isprintable() else repr(c)[1:-1] for c in escaped)
    return escaped if len(escaped) <= _MAX_COMMENT else escaped[:_MAX_COMMENT] + "..."
