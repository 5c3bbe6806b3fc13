"""The kind of each graph output: a tensor, or a sequence / optional whose tensors the graph
lists as consecutive outputs.

MSC's graph keeps a flat list of output tensors; a model whose output is an ONNX sequence (a
list of tensors) holds its elements there one by one, indistinguishable from separate outputs.
``OutputKind(kind, count, dtype)`` records, per model-level output, how many of the flat
outputs it takes and what it is, so a codegen can write the sequence back::

    graph = MSCGraph("main", nodes, ["x:0"], ["split:0", "split:1"],
                     output_kinds=[OutputKind("sequence", 2)])
    [(k.kind, [t.name for t in ts]) for k, ts in graph.output_groups()]
    # [('sequence', ['split:0', 'split:1'])]

A graph with tensor outputs only has no recorded kinds: its JSON stays MSC's (the key
``output_kinds`` is written only when some output is not a plain tensor, and files without it
read as all tensors). ``dtype`` is the element type, needed for an empty sequence or an absent
optional (count 0); ``""`` elsewhere.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..errors import SerializationError, ValidationError

__all__ = ["KINDS", "OutputKind", "is_plain", "kinds_from_json", "kinds_to_json",
           "normalize_kinds"]

# kind -> the counts it allows (None: any)
KINDS: dict[str, tuple[int, ...] | None] = {
    "tensor": (1,),
    "sequence": None,
    "optional": (0, 1),  # an optional tensor, absent (0) or present (1)
    "optional_sequence": None,  # an optional sequence that is present
}


class OutputKind(NamedTuple):
    kind: str
    count: int = 1
    dtype: str = ""


def _check(entry: Any, position: int) -> OutputKind:
    if isinstance(entry, str):
        entry = OutputKind(entry, 1)
    kind = OutputKind(*entry)
    if kind.kind not in KINDS:
        raise ValidationError(f"output kind {kind.kind!r} at {position} is unknown",
                              key="output_kinds", hint=f"kinds: {', '.join(KINDS)}")
    allowed = KINDS[kind.kind]
    if type(kind.count) is not int or kind.count < 0 or \
            (allowed is not None and kind.count not in allowed):
        raise ValidationError(f"output kind {kind.kind!r} at {position} cannot hold "
                              f"{kind.count!r} tensors", key="output_kinds")
    return kind


def normalize_kinds(kinds: Any, n_outputs: int) -> tuple[OutputKind, ...]:
    """Checked kinds covering ``n_outputs`` flat outputs; None -> one tensor each."""
    if kinds is None:
        return tuple(OutputKind("tensor") for _ in range(n_outputs))
    if not isinstance(kinds, (list, tuple)):
        raise ValidationError(f"output_kinds must be a list, got {kinds!r:.60}",
                              key="output_kinds")
    checked = tuple(_check(k, i) for i, k in enumerate(kinds))
    total = sum(k.count for k in checked)
    if total != n_outputs:
        raise ValidationError(f"output_kinds cover {total} tensors, the graph has {n_outputs} "
                              "outputs", key="output_kinds",
                              hint="the counts must add up to len(output_names)")
    return checked


def is_plain(kinds: tuple[OutputKind, ...]) -> bool:
    return all(k.kind == "tensor" for k in kinds)


def kinds_to_json(kinds: tuple[OutputKind, ...]) -> list[dict]:
    return [{"kind": k.kind, "count": k.count, **({"dtype": k.dtype} if k.dtype else {})}
            for k in kinds]


def kinds_from_json(data: Any, n_outputs: int) -> tuple[OutputKind, ...] | None:
    """The ``output_kinds`` of a graph's JSON (``None`` when absent)."""
    if data is None:
        return None
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise SerializationError("graph key must be a list of objects", key="output_kinds")
    try:
        return normalize_kinds([(d.get("kind"), d.get("count", 1), d.get("dtype", ""))
                                for d in data], n_outputs)
    except ValidationError as err:
        raise SerializationError(err.message, key="output_kinds", hint=err.hint) from None
