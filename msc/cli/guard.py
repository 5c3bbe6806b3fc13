"""Where commands may write: never over an input, never over a file without --force."""

from __future__ import annotations

import os

from ..errors import SerializationError
from .loaders import split_torch_spec

__all__ = ["check_writable", "input_files"]


def input_files(spec: str) -> list[str]:
    """The files a model spec reads: the model and (for JSON) its sibling weights."""
    torch_spec = split_torch_spec(spec)
    path = torch_spec[0] if torch_spec else spec
    stem = os.path.splitext(path)[0]
    return [path, stem + ".npz", stem + ".safetensors"]


def check_writable(outputs: list[str], inputs: list[str], force: bool) -> None:
    """Refuse to replace an input (even with --force) or an existing file (without it)."""
    for out in outputs:
        if not os.path.exists(out):
            continue
        if any(os.path.exists(i) and os.path.samefile(out, i) for i in inputs):
            raise SerializationError("this output is an input of the command; not overwriting "
                                     "it", file=out, hint="write to another file")
        if not force:
            raise SerializationError("output file exists; not overwriting it", file=out,
                                     hint="pass --force to replace it")
