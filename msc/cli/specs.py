"""The small languages of the command line: ``--input-info``, ``--input`` and ``--dim``.

    parse_input_info(["x:1,3,224,224:float32", "ids:batch,seq:int64"])
    # -> [("x", [1, 3, 224, 224], "float32"), ("ids", ["batch", "seq"], "int64")]
    parse_input("x:data.npy")         # -> ("x", ndarray)          (an .npy file)
    parse_input("x:2,3,16,16")        # -> ("x", ([2, 3, 16, 16], None))  (random, graph dtype)
    parse_dims(["N=2"])               # -> {"N": 2}

A bad spec is a ValidationError that quotes the spec and shows the expected form, so the CLI
exits 2 with a message the user can act on.
"""

from __future__ import annotations

import os
import re

import numpy as np

from ..errors import MSCError, SerializationError, ValidationError
from ..graph.tensor import normalize_dtype

__all__ = ["parse_dims", "parse_input", "parse_input_info", "parse_shape"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-/]*")
_DIM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# ASCII digits only: str.isdigit() also takes '²', which int() then refuses
_SIZE = re.compile(r"[0-9]+")
INFO_FORM = "name:dim,dim,...[:dtype], e.g. x:1,3,224,224:float32 (a named dim is dynamic)"
INPUT_FORM = "name:file.npy or name:dim,dim,...[:dtype], e.g. x:1,3,224,224"


def _bad(spec: str, what: str, form: str) -> ValidationError:
    return ValidationError(f"bad {what} {spec!r}", hint=f"write {form}")


def parse_shape(text: str, spec: str, what: str, form: str, named: bool) -> list:
    """``"1,3,h,w"`` -> ``[1, 3, "h", "w"]``; names only when ``named`` (dynamic dims)."""
    dims = []
    for item in text.split(","):
        item = item.strip()
        if _SIZE.fullmatch(item):
            dims.append(int(item))
        elif named and _DIM_NAME.fullmatch(item):
            dims.append(item)
        else:
            kind = "a size or a dim name" if named else "a size >= 0"
            raise ValidationError(f"bad {what} {spec!r}: dim {item!r} is not {kind}",
                                  hint=f"write {form}")
    return dims


def _dtype(text: str, spec: str, what: str, form: str) -> str:
    try:
        return normalize_dtype(text)
    except MSCError:
        raise ValidationError(f"bad {what} {spec!r}: unknown dtype {text!r}",
                              hint=f"write {form}; dtypes: float32, float16, int64, ...") from None


def _split(spec: str, what: str, form: str) -> tuple[str, str]:
    name, sep, rest = spec.partition(":")
    if not sep or not _NAME.fullmatch(name) or not rest:
        raise _bad(spec, what, form)
    return name, rest


def parse_input_info(texts: list[str] | None) -> list[tuple[str, list, str]]:
    """``--input-info`` values (repeated, or ``;``-separated) -> ``[(name, dims, dtype)]``."""
    items = []
    for text in texts or []:
        for spec in filter(None, (s.strip() for s in text.split(";"))):
            name, rest = _split(spec, "--input-info", INFO_FORM)
            shape, _, dtype = rest.partition(":")
            dims = parse_shape(shape, spec, "--input-info", INFO_FORM, named=True)
            items.append((name, dims, _dtype(dtype, spec, "--input-info", INFO_FORM)
                          if dtype else "float32"))
    names = [name for name, _, _ in items]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValidationError(f"--input-info names {dupes} more than once",
                              hint="give each model input once")
    return items


def parse_input(spec: str):
    """``name:file.npy`` -> ``(name, array)``; ``name:dims[:dtype]`` -> ``(name, (dims, dtype))``
    where dtype is None when not given (the model's dtype is used)."""
    name, rest = _split(spec, "--input", INPUT_FORM)
    if rest.lower().endswith(".npy"):
        return name, _load_npy(rest)
    shape, _, dtype = rest.partition(":")
    dims = parse_shape(shape, spec, "--input", INPUT_FORM, named=False)
    return name, (dims, _dtype(dtype, spec, "--input", INPUT_FORM) if dtype else None)


_NPY_HINT = "save each input with numpy.save (one array, no objects)"


def _load_npy(path: str) -> np.ndarray:
    if not os.path.isfile(path):
        raise SerializationError("no such file", file=path, hint="--input takes name:file.npy")
    try:
        array = np.load(path, allow_pickle=False)  # inputs from strangers: never unpickle
    except Exception as err:  # noqa: BLE001 - a stranger's header breaks numpy in many ways
        # (ValueError, EOFError on an empty file, tokenize.TokenError, SyntaxError...)
        raise SerializationError(f"not a readable .npy array: {err or type(err).__name__}",
                                 file=path, hint=_NPY_HINT) from None
    if not isinstance(array, np.ndarray):  # np.load opens an .npz archive whatever its name
        array.close()
        raise SerializationError("an .npz archive, not one .npy array", file=path,
                                 hint=_NPY_HINT)
    return array


def parse_dims(texts: list[str] | None) -> dict[str, int]:
    """``--dim N=2`` values -> ``{"N": 2}``: values of the model's symbolic (named) dims."""
    dims = {}
    for spec in texts or []:
        name, sep, value = spec.partition("=")
        if not sep or not _DIM_NAME.fullmatch(name.strip()) or not _SIZE.fullmatch(value.strip()):
            raise _bad(spec, "--dim", "NAME=SIZE, e.g. --dim batch=4")
        dims[name.strip()] = int(value)
    return dims
