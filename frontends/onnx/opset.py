"""Converter selection by opset range.

Each family module declares ``CONVERTERS = {op_type: {since_opset: converter}}``; a converter
applies from its opset up to the next one listed. A model's opset picks the nearest lower::

    table = converter_table()                   # all families merged
    select(table, "Softmax", 12)                 # the converter listed at 1 (13 starts later)
    select(table, "Softmax", 18)                 # the one listed at 13

Ops of other domains are keyed ``"<domain>:<op_type>"``. A ``custom_convert_map`` adds or
overrides rows: ``{"MyOp": fn}`` (every opset) or ``{"MyOp": {11: fn_v11, 13: fn_v13}}``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from msc.errors import ValidationError

__all__ = ["converter_table", "key_of", "select", "with_custom"]


def key_of(op_type: str, domain: str = "") -> str:
    return op_type if domain in ("", "ai.onnx") else f"{domain}:{op_type}"


@lru_cache(maxsize=1)
def converter_table() -> dict:
    """Every family's converters merged (an op is declared by one family only)."""
    from . import (
        converters_attention,
        converters_control,
        converters_elementwise,
        converters_image,
        converters_manipulate,
        converters_math,
        converters_ms_quant,
        converters_nn,
        converters_quant,
        converters_rnn,
        converters_sequence,
    )

    table: dict = {}
    families = (converters_attention, converters_control, converters_elementwise,
                converters_image, converters_manipulate, converters_math, converters_nn,
                converters_quant, converters_ms_quant, converters_rnn, converters_sequence)
    for family in families:
        for op_type, versions in family.CONVERTERS.items():
            if op_type in table:
                raise ValidationError(f"ONNX op {op_type!r} has converters in two families",
                                      op=op_type)
            table[op_type] = dict(versions)
    return table


def with_custom(table: dict, custom: dict | None) -> dict:
    """``table`` with the rows of a user's ``custom_convert_map`` added (they win)."""
    if not custom:
        return table
    merged = dict(table)
    for op_type, row in custom.items():
        merged[op_type] = dict(row) if isinstance(row, dict) else {1: row}
        if not all(callable(f) for f in merged[op_type].values()):
            raise ValidationError(f"custom converter for {op_type!r} is not callable",
                                  op=op_type, hint="map an op type to fn(ctx, node) or to "
                                                   "{since_opset: fn}")
    return merged


def select(table: dict, key: str, opset: int) -> Callable | None:
    """The converter for ``key`` at ``opset``: the one listed at the nearest lower opset."""
    versions = table.get(key)
    if not versions:
        return None
    usable = [v for v in versions if v <= opset]
    return versions[max(usable)] if usable else None


def opsets_of(table: dict, key: str) -> list[int]:
    """The opsets at which ``key``'s converters start (for error messages)."""
    return sorted(table.get(key, {}))
