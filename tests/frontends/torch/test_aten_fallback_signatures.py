"""The export path's ATen lookup falls back from ``aten.<op>.<overload>`` to the functional
converter of ``<op>``, binding ATen's positional arguments by position. That is right only
where each position means the same in both signatures; where it does not, the overload needs
its own ATEN row (aten.instance_norm takes weight and bias before the running statistics,
aten.softmax.int its dtype third, aten.var.default ``unbiased`` second). This walks every
overload the fallback reaches and fails on a position whose meaning differs."""

import inspect

import pytest
import torch

from msc.frontends.torch.converters import ATEN, FX_FUNCTIONS

# (ATen's name, the converter's name) for one meaning.
SAME = {("a", "input"), ("b", "other"), ("self", "input"), ("self", "tensor"),
        ("mat2", "other"), ("split_size", "split_size_or_sections"),
        ("split_sizes", "split_size_or_sections"), ("axis0", "dim0"), ("axis1", "dim1"),
        ("t", "data"), ("s", "data")}
# Overloads whose differing position cannot convert silently, and why.
SAFE = {
    "scatter.value": "the converter's src takes the scalar value (convert_scatter.scatter)",
    "scatter.value_reduce": "as scatter.value",
    "repeat_interleave.Tensor": "a tensor of repeats is refused (data-dependent shape)",
    "index.list_Tensor": "a list of tensors: not an export op",
    "sort.Tensor": "sorts a Python list of tensors: not an export op",
}


def _positional(fn) -> list[str] | None:
    params = list(inspect.signature(fn).parameters.values())[1:]  # after ctx
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _fallback_overloads():
    for name, fn in sorted(ATEN.items()):
        if FX_FUNCTIONS.get(name) is not fn:
            continue  # a row written for ATen's own signature
        packet = getattr(torch.ops.aten, name, None)
        if packet is None or _positional(fn) is None:
            continue
        for overload in packet.overloads():
            schema = getattr(packet, overload)._schema
            if f"{name}.{overload}" in ATEN or "out" in overload.split("_") or not any(
                    "Tensor" in str(a.type) for a in schema.arguments):
                continue  # its own row, an out= variant, or a scalar / SymInt overload
            yield f"{name}.{overload}", schema, _positional(fn)


CASES = list(_fallback_overloads())


def test_the_fallback_reaches_many_overloads():
    assert len(CASES) > 200


@pytest.mark.parametrize("key, schema, params", CASES, ids=[c[0] for c in CASES])
def test_each_position_means_the_same(key, schema, params):
    if key in SAFE:
        return
    for i, arg in enumerate(a.name for a in schema.arguments if not a.kwarg_only):
        ours = params[i] if i < len(params) else None  # None: too many args, refused by bind
        assert ours is None or ours == arg or (arg, ours) in SAME or \
            arg.rstrip("_") == ours.rstrip("_"), \
            f"aten.{key} passes {arg!r} at position {i}, the converter reads it as {ours!r}"
