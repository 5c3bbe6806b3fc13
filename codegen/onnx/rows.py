"""The shape of an ONNX row and the small helpers the row tables share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Row", "axes_of", "axis_of", "plain"]


@dataclass(frozen=True)
class Row:
    """How one op is written as ONNX: ``write(ctx)`` (ctx: onnx.context.OnnxContext) returns
    the value name(s) of the joint's output(s); ``since`` is the first opset that has it."""

    write_fn: Callable
    since: int = 13

    def write(self, ctx):
        ctx.need(self.since, f"{ctx.node.optype} as ONNX")
        return self.write_fn(ctx)


def plain(op_type: str, attrs: dict | None = None, since: int = 13, **fixed) -> Row:
    """``op_type(<inputs>, <renamed attrs>)``: ``attrs`` maps a Relax attr to an ONNX attr."""
    def write(ctx):
        values = {onnx: ctx.attr(name) for name, onnx in (attrs or {}).items()}
        return ctx.emit(op_type, ctx.inputs, **fixed, **values)
    return Row(write, since)


def axis_of(axis: int, ndim: int) -> int:
    return axis + ndim if axis < 0 else axis


def axes_of(axes, ndim: int) -> list[int] | None:
    """Normalized axes (None: every axis)."""
    if axes is None:
        return None
    axes = [axes] if isinstance(axes, int) else list(axes)
    return [axis_of(int(a), ndim) for a in axes]
