"""Small helpers the converter families share (building calls, typed scalars, axes)."""

from __future__ import annotations

import numpy as np

from msc import relax
from msc.relax.op.registry import make_call
from msc.tir import expr as tir

from .context import Context, OnnxNode

__all__ = ["call", "elementwise", "first", "norm_axis", "pad_axis", "scalar", "unary"]

call = make_call


def scalar(g: Context, value, like) -> relax.Constant:
    """A 0-d constant of ``like``'s dtype."""
    return relax.const(np.asarray(value).astype(g.dtype(like)))


def norm_axis(axis: int, ndim: int) -> int:
    return axis + ndim if axis < 0 else axis


def first(node: OnnxNode):
    return node.inputs[0]


def unary(op_name: str, **attrs):
    """A converter emitting ``op_name(x, **attrs)`` on the first input."""
    def convert(g: Context, node: OnnxNode):
        return g.emit(call(op_name, node.inputs[0], **attrs))

    convert.__name__ = f"convert_{op_name.replace('.', '_')}"
    return convert


def elementwise(op_name: str):
    """A converter folding ``op_name`` over all inputs (Sum, Max, Min and the binary ops)."""
    def convert(g: Context, node: OnnxNode):
        args = [x for x in node.inputs if x is not None]
        out = args[0]
        for x in args[1:]:
            out = g.emit(call(op_name, out, x))
        return out

    convert.__name__ = f"convert_{op_name}"
    return convert


def pad_axis(g: Context, x, axis: int, before, after, fill):
    """Pad ``axis`` by ``before`` / ``after`` fill values (ints or symbolic; negative amounts
    crop): fill blocks concatenated on both sides, then a slice."""
    dims = list(g.shape(x))
    grow = [tir.max(tir.convert(before), 0), tir.max(tir.convert(after), 0)]
    blocks = [call("full", dims[:axis] + [n] + dims[axis + 1:], fill, g.dtype(x))
              for n in grow]
    x = g.emit(call("concat", [blocks[0], x, blocks[1]], axis))
    size = dims[axis] + grow[0] + grow[1]
    start = tir.max(-tir.convert(before), 0)
    return g.emit(call("strided_slice", x, [axis], [start],
                       [size - tir.max(-tir.convert(after), 0)]))
