"""Joint attributes are strings; this module encodes values to them and parses them back.

The encoding is MSC's, so attrs read the same as in TVM's MSC JSON:

    >>> encode_attr(None), encode_attr(True), encode_attr(3), encode_attr(1e-5)
    ('', '1', '3', '0.000010')
    >>> encode_attr([1, 1]), encode_attr([5]), encode_attr("NCHW")
    ('1,1', '5,', 'NCHW')
    >>> parse_attr("1,1", int, key="strides", array=True)
    [1, 1]

Typed parsing is strict where MSC's C++ getters are: a scalar int must not contain ``,``, an
array must contain one (hence the trailing comma of 1-element arrays), a bool is an int != 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..errors import ValidationError

__all__ = ["encode_attr", "encode_attrs", "get_type_attr", "parse_attr"]

MISSING: Any = object()


def _encode_float(value: float) -> str:
    # std::to_string(double) is printf("%f"): 6 decimals, "inf"/"nan" as is.
    return f"{float(value):.6f}"


def _encode_array(values: Any) -> str:
    items = [encode_attr(v) for v in values]
    return ",".join(items) + ("," if len(items) == 1 else "")


# Checked in order: bool before int (bool is an int), numpy scalars with their Python kin.
_ENCODERS: tuple[tuple[type | tuple[type, ...], Callable[[Any], str]], ...] = (
    (type(None), lambda v: ""),
    ((bool, np.bool_), lambda v: "1" if v else "0"),
    ((int, np.integer), lambda v: str(int(v))),
    ((float, np.floating), _encode_float),
    (str, lambda v: v),
    (np.dtype, lambda v: v.name),
    ((list, tuple, np.ndarray), _encode_array),
)


def encode_attr(value: Any) -> str:
    """Encode one attribute value as MSC does (see the module docstring)."""
    for types, encode in _ENCODERS:
        if isinstance(value, types):
            return encode(value)
    raise ValidationError(
        f"cannot encode attribute value {value!r} of type {type(value).__name__}",
        hint="use None, bool, int, float, str, a dtype or a list of these",
    )


def encode_attrs(attrs: Mapping[str, Any] | None, node: str | None = None) -> dict[str, str]:
    """Encode every value of ``attrs``; keys must be strings.

    >>> encode_attrs({"axis": 1, "keepdims": False})
    {'axis': '1', 'keepdims': '0'}
    """
    encoded = {}
    for key, value in (attrs or {}).items():
        if not isinstance(key, str):
            raise ValidationError(f"attribute key {key!r} is not a string", node=node)
        try:
            encoded[key] = value if isinstance(value, str) else encode_attr(value)
        except ValidationError as err:
            raise ValidationError(err.message, node=node, key=key, hint=err.hint) from None
    return encoded


def _to_int(text: str) -> int:
    if "," in text:
        raise ValueError("an int attribute must not contain ','")
    return int(text)


def _to_bool(text: str) -> bool:
    return _to_int(text) != 0


_PARSERS: dict[type, Callable[[str], Any]] = {int: _to_int, float: float, bool: _to_bool, str: str}


def _split_array(text: str) -> list[str]:
    if "," not in text:
        raise ValueError("an array attribute must contain ',' (a 1-element array is 'v,')")
    items = text.split(",")
    return items[:-1] if items[-1] == "" else items


def parse_attr(text: str, kind: type = str, key: str | None = None, array: bool = False) -> Any:
    """Parse an attr string as ``kind`` (int, float, bool or str), or as a list of them.

    >>> parse_attr("0", bool), parse_attr("5,", int, array=True)
    (False, [5])
    """
    if kind not in _PARSERS:
        raise ValidationError(f"unsupported attribute kind {kind!r}", key=key,
                              hint=f"use one of {', '.join(t.__name__ for t in _PARSERS)}")
    parse = _PARSERS[kind]
    try:
        return [parse(s) for s in _split_array(text)] if array else parse(text)
    except ValueError as err:
        what = f"list of {kind.__name__}" if array else kind.__name__
        raise ValidationError(f"attribute value {text!r} is not a {what}: {err}", key=key) from None


def get_type_attr(attrs: Mapping[str, str], key: str, kind: type = str, default: Any = MISSING,
                  array: bool = False, node: str | None = None) -> Any:
    """Typed lookup: ``default`` when the attr is missing or empty, else ``parse_attr``.

    >>> get_type_attr({"groups": "1"}, "groups", int), get_type_attr({}, "axis", int, -1)
    (1, -1)
    """
    text = attrs.get(key, "")
    if text == "":
        if default is MISSING:
            raise ValidationError("missing attribute", node=node, key=key)
        return default
    try:
        return parse_attr(text, kind, key=key, array=array)
    except ValidationError as err:
        raise ValidationError(err.message, node=node, key=key, hint=err.hint) from None
