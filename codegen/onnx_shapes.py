"""Shapes as ONNX values: a static shape is one int64 initializer; a symbolic dim (a prim,
conventions 1.3) is computed from the graph inputs' ``Shape`` with the prim's arithmetic, once
per prim and graph."""

from __future__ import annotations

import numpy as np

from msc.errors import UnsupportedOpError
from msc.graph import MSCGraph, MSCTensor

__all__ = ["ShapeValues"]

# Prim optype -> ONNX op on two int64 1-element values (dims are never negative, so the
# truncating Div / Mod of ONNX agree with the floor forms).
_PRIM_OPS = {"Add": "Add", "Sub": "Sub", "Mul": "Mul", "FloorDiv": "Div", "Div": "Div",
             "FloorMod": "Mod", "Mod": "Mod", "Min": "Min", "Max": "Max",
             "LT": "Less", "LE": "LessOrEqual", "GT": "Greater", "GE": "GreaterOrEqual",
             "EQ": "Equal", "if_then_else": "Where"}


class ShapeValues:
    """Per graph: prim name -> the ONNX value (int64 [1]) computing it."""

    def __init__(self, graph: MSCGraph):
        self.graph = graph
        self.prims: dict[str, str] = {}
        self.shapes: dict[str, str] = {}  # input value -> its Shape value

    @staticmethod
    def static_dims(tensor: MSCTensor) -> list[int] | None:
        prims = tensor.prims
        if prims and not all(p.lstrip("-").isdigit() for p in prims):
            return None
        dims = [int(p) for p in prims] if prims else list(tensor.shape)
        return None if any(d < 0 for d in dims) else dims

    def dims(self, ctx, tensor: MSCTensor) -> str:
        static = self.static_dims(tensor)
        if static is not None:
            return ctx.ints(static, "shape")
        parts = [self.dim(ctx, tensor, i) for i in range(tensor.ndim)]
        return ctx.emit("Concat", parts, axis=0)

    def dim(self, ctx, tensor: MSCTensor, i: int) -> str:
        prims = tensor.prims
        if prims and not prims[i].lstrip("-").isdigit():
            return self.prim(ctx, prims[i])
        value = int(prims[i]) if prims else tensor.shape[i]
        if value < 0:
            raise ctx.fail(f"dim {i} of {tensor.name} is dynamic but has no prim")
        return ctx.ints([value], "dim")

    def prim(self, ctx, name: str) -> str:
        if name in self.prims:
            return self.prims[name]
        prim = self.graph.find_prim(name)
        if prim.optype == "shape":
            value = self._input_dim(ctx, prim.attrs)
        elif prim.optype == "Int":
            value = ctx.ints([int(prim.attrs["value"])], "dim")
        elif prim.optype in _PRIM_OPS:
            args = [self.prim(ctx, p.name) for p in prim.parents]
            value = ctx.emit(_PRIM_OPS[prim.optype], args)
        elif prim.optype == "NE":
            value = ctx.emit("Not", [ctx.emit("Equal", [self.prim(ctx, p.name)
                                                        for p in prim.parents])])
        else:
            raise UnsupportedOpError(f"shape prim {name!r} of optype {prim.optype!r} has no "
                                     "ONNX form", node=ctx.name,
                                     hint="supported: shape, Int, NE, " + ", ".join(_PRIM_OPS))
        self.prims[name] = value
        return value

    def _input_dim(self, ctx, attrs: dict) -> str:
        producer = self.graph.find_node(attrs["producer"])
        source = ctx.writer.value(producer, int(attrs.get("out_idx", "0")))
        if source not in self.shapes:
            self.shapes[source] = ctx.emit("Shape", [source])
        index = ctx.const(np.asarray([int(attrs["dim"])], dtype=np.int64), "dim")
        return ctx.emit("Gather", [self.shapes[source], index], axis=0)
