"""Reading JSON given as text or path, and writing files atomically.

    >>> load_json('{"name": "main"}')
    ({'name': 'main'}, None)
    >>> write_atomic("out/model.prototxt", text)   # doctest: +SKIP

A write goes to a temp file in the target's folder and is renamed over the target, so a reader
never sees a partial file and a failed write leaves an existing file as it was.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ..errors import MSCError, SerializationError

__all__ = ["load_json", "with_context", "write_atomic"]


def _looks_like_text(source: str) -> bool:
    return source.lstrip()[:1] in ("{", "[")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SerializationError("no such file", file=str(path),
                                 hint="pass a JSON string or an existing file path") from None
    except (OSError, UnicodeDecodeError, ValueError) as err:  # ValueError: a NUL in the path
        raise SerializationError(f"cannot read file: {err}", file=str(path)) from None


def _parse(text: str, file: str | None) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise SerializationError(
            f"malformed JSON at line {err.lineno} column {err.colno}: {err.msg}",
            file=file, line=err.lineno, col=err.colno,
            hint="check the file is a complete JSON document written by msc") from None
    except RecursionError:
        # json's C scanner guards its own recursion; no msc file nests more than a few levels
        raise SerializationError("JSON nested too deeply to be an msc graph", file=file,
                                 hint="the file is not an msc JSON document") from None
    except ValueError as err:  # bytes that are not UTF-8, an int of more than 4300 digits
        raise SerializationError(f"undecodable JSON: {err}", file=file,
                                 hint="msc JSON is UTF-8 text with plain numbers") from None


def load_json(source: Any) -> tuple[Any, str | None]:
    """Return ``(data, file)`` from a dict, a JSON string or a file path (file is None for text).

    A string that starts with ``{`` or ``[`` is JSON text; any other string is a path.
    """
    if isinstance(source, dict):
        return source, None
    if isinstance(source, os.PathLike) or (isinstance(source, str)
                                            and not _looks_like_text(source)):
        file = str(source)
        return _parse(_read(Path(file)), file), file
    if isinstance(source, (str, bytes)):
        return _parse(source, None), None
    raise SerializationError(f"expected a JSON string, a path or a dict, got "
                             f"{type(source).__name__}")


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        return 0o644


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a temp file and ``os.replace``; missing parent
    folders are created."""
    target = Path(path)
    mode = _mode_for(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)  # e.g. a fresh "out/" folder
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                   dir=target.parent)
    except OSError as err:
        raise SerializationError(f"cannot write file: {err}", file=str(target)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as err:
        os.unlink(tmp)
        if isinstance(err, OSError):
            raise SerializationError(f"cannot write file: {err}", file=str(target)) from None
        raise


def with_context(err: MSCError, **context: Any) -> MSCError:
    """A copy of ``err`` (same class) with more context, e.g. the file being loaded."""
    merged = {**context, **err.context}
    copy = type(err)(err.message, hint=err.hint, **merged)
    copy.__cause__ = err.__cause__
    return copy
