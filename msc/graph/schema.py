"""Key tables of the msc JSON objects (conventions 2.1) and the one reader that checks them.

Each table lists ``(key, kind, default)`` in the order msc writes the keys; ``REQUIRED`` marks
the keys a reader insists on. Readers never depend on key order; unknown keys are ignored so
that files from newer writers still load.

    >>> read_fields({"name": "x", "dtype": "float32", "shape": [1]}, TENSOR, "tensor")[:3]
    ['x', '', 'float32']
"""

from __future__ import annotations

from typing import Any

from ..errors import SerializationError

__all__ = [
    "GRAPH",
    "NODE",
    "PRIM",
    "REQUIRED",
    "TENSOR",
    "WEIGHT_GRAPH",
    "WEIGHT_NODE",
    "read_fields",
]

REQUIRED: Any = object()
_ABSENT: Any = object()


# kind -> (JSON type, type of its items or None, description used in errors). JSON decoding
# yields exact types, so ``type(v) is`` suffices, and it rejects a bool where an int belongs.
KINDS: dict[str, tuple[type, type | None, str]] = {
    "str": (str, None, "a string"),
    "int": (int, None, "an integer"),
    "list": (list, None, "a list"),
    "dict": (dict, None, "an object"),
    "str_list": (list, str, "a list of strings"),
    "str_dict": (dict, str, "an object of strings"),
}


def _table(*rows: tuple[str, str, Any]) -> tuple:
    """Rows ``(key, kind, default)`` -> ``(key, type, item type, description, default)``."""
    return tuple((key, *KINDS[kind], default) for key, kind, default in rows)


def _items_are(value: list | dict, item_type: type) -> bool:
    items = value.values() if type(value) is dict else value
    return all(type(x) is item_type for x in items)


# Element checks of shape/prims are the MSCTensor constructor's (it also takes numpy ints).
TENSOR = _table(
    ("name", "str", REQUIRED), ("alias", "str", ""), ("dtype", "str", REQUIRED),
    ("layout", "str", ""), ("shape", "list", REQUIRED), ("prims", "list", ()))
NODE = _table(
    ("index", "int", REQUIRED), ("name", "str", REQUIRED), ("shared_ref", "str", ""),
    ("optype", "str", REQUIRED), ("scope", "str_list", ()), ("parents", "str_list", ()),
    ("inputs", "str_list", ()), ("outputs", "list", REQUIRED), ("attrs", "str_dict", {}),
    ("weights", "dict", {}))
PRIM = _table(
    ("index", "int", REQUIRED), ("name", "str", REQUIRED), ("optype", "str", REQUIRED),
    ("parents", "str_list", ()), ("attrs", "str_dict", {}))
GRAPH = _table(
    ("name", "str", REQUIRED), ("inputs", "str_list", REQUIRED),
    ("outputs", "str_list", REQUIRED), ("nodes", "list", REQUIRED), ("prims", "list", ()))
WEIGHT_NODE = _table(
    ("index", "int", REQUIRED), ("name", "str", REQUIRED), ("shared_ref", "str", ""),
    ("weight_type", "str", REQUIRED), ("weight", "dict", REQUIRED),
    ("parents", "str_list", ()), ("friends", "str_list", ()), ("attrs", "str_dict", {}))
WEIGHT_GRAPH = _table(("name", "str", REQUIRED), ("nodes", "list", REQUIRED))


def read_fields(obj: Any, table: tuple, what: str, **context: Any) -> list[Any]:
    """Values of ``obj`` for each key of ``table``, checked; raises SerializationError.

    ``context`` (node=, tensor=, file=) is attached to the error so it names the culprit.
    """
    if not isinstance(obj, dict):
        raise SerializationError(f"{what} must be a JSON object, got {type(obj).__name__}",
                                 **context)
    values = []
    for key, kind, item_type, description, default in table:
        value = obj.get(key, _ABSENT)
        if value is _ABSENT:
            if default is REQUIRED:
                raise SerializationError(f"{what} is missing the required key", key=key,
                                         **context)
            value = default
        elif type(value) is not kind or (item_type and not _items_are(value, item_type)):
            raise SerializationError(f"{what} key must be {description}, got {value!r:.60}",
                                     key=key, **context)
        values.append(value)
    return values
