"""Shapes as ONNX values: a static shape is one int64 initializer; a symbolic dim (a prim,
conventions 1.3) is computed from the graph inputs' ``Shape`` with the prim's arithmetic, once
per prim and graph."""

from __future__ import annotations

import numpy as np

from msc.errors import UnsupportedOpError
from msc.graph import MSCGraph, MSCTensor

__all__ = ["ShapeValues"]

_INT64 = 7  # TensorProto.INT64
# Shape values whose ONNX form is int64 already (the MSCGraph says int32 for shape values).
_INT64_SHAPES = {"tensor_to_shape", "shape_of"}

# Prim optype -> ONNX op on int64 1-element values. Run-time values (an axis, a slice start
# read from a tensor) may be negative: FloorDiv / FloorMod keep their floor meaning (below),
# TIR's Div / Mod truncate as ONNX's integer Div and Mod(fmod=1) do.
_ARITH = {"Add": "Add", "Sub": "Sub", "Mul": "Mul", "Div": "Div", "Min": "Min", "Max": "Max"}
_COMPARE = {"LT": "Less", "LE": "LessOrEqual", "GT": "Greater", "GE": "GreaterOrEqual",
            "EQ": "Equal"}
_LOGIC = {"And": "And", "Or": "Or"}


class ShapeValues:
    """Per graph: prim name -> the ONNX value (int64 [1]) computing it."""

    def __init__(self, graph: MSCGraph):
        self.graph = graph
        self.prims: dict[str, str] = {}
        self.shapes: dict[str, str] = {}  # input value -> its Shape value
        self.bools: set[str] = set()  # prim values of ONNX type bool (comparisons)

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
            return self.int_prim(ctx, prims[i])
        value = int(prims[i]) if prims else tensor.shape[i]
        if value < 0:
            raise ctx.fail(f"dim {i} of {tensor.name} is dynamic but has no prim")
        return ctx.ints([value], "dim")

    def prim(self, ctx, name: str) -> str:
        """The int64 ``[1]`` value of prim ``name`` (bool for comparisons)."""
        if name not in self.prims:
            prim = self.graph.find_prim(name)
            self.prims[name] = self._write(ctx, prim, [self.prim(ctx, p.name)
                                                       for p in prim.parents])
        return self.prims[name]

    def int_prim(self, ctx, name: str) -> str:
        """Prim ``name`` as an int64 ``[1]`` value (a comparison as 0 / 1)."""
        return self._as_int(ctx, self.prim(ctx, name))

    def elements(self, ctx, text: str) -> str:
        """An int64 1-D value of the comma-separated numbers and prim names ``text``."""
        parts = [self.int_prim(ctx, p) if not p.lstrip("-").isdigit() else
                 ctx.ints([int(p)], "dim") for p in text.split(",")]
        return parts[0] if len(parts) == 1 else ctx.emit("Concat", parts, axis=0)

    def _write(self, ctx, prim, args: list[str]) -> str:
        kind = prim.optype
        if kind == "shape":
            return self._input_dim(ctx, prim)
        if kind == "Int":
            return ctx.ints([int(prim.attrs["value"])], "dim")
        if kind in _ARITH:
            args = [self._as_int(ctx, a) for a in args]
            if kind == "Div":
                args[1] = self._nonzero(ctx, args[1])
            return ctx.emit(_ARITH[kind], args)
        if kind in _COMPARE or kind == "NE":
            out = ctx.emit(_COMPARE.get(kind, "Equal"), [self._as_int(ctx, a) for a in args])
            return self._bool(ctx.emit("Not", [out]) if kind == "NE" else out)
        if kind in _LOGIC or kind == "Not":
            return self._bool(ctx.emit(_LOGIC.get(kind, "Not"),
                                       [self._as_bool(ctx, a) for a in args]))
        if kind == "if_then_else":
            cond, a, b = args
            return ctx.emit("Where", [self._as_bool(ctx, cond), self._as_int(ctx, a),
                                      self._as_int(ctx, b)])
        if kind in ("FloorDiv", "FloorMod"):
            a, b = (self._as_int(ctx, v) for v in args)
            b = self._nonzero(ctx, b)
            mod = ctx.emit("Mod", [a, b], fmod=0)  # the sign of the divisor: floor's
            return mod if kind == "FloorMod" else ctx.emit("Div", [ctx.emit("Sub", [a, mod]), b])
        if kind == "Mod":
            a, b = (self._as_int(ctx, v) for v in args)
            return ctx.emit("Mod", [a, self._nonzero(ctx, b)], fmod=1)
        if kind == "Cast" and prim.attrs.get("dtype", "").startswith(("int", "uint", "bool")):
            value = args[0]
            return self._as_bool(ctx, value) if prim.attrs["dtype"] == "bool" else \
                self._as_int(ctx, value)
        raise UnsupportedOpError(f"shape prim {prim.name!r} of optype {kind!r} has no ONNX "
                                 "form", node=ctx.name, hint="supported: shape, Int, Cast, "
                                 "if_then_else, Not, " + ", ".join([*_ARITH, *_COMPARE,
                                                                   *_LOGIC]))

    @staticmethod
    def _nonzero(ctx, divisor: str) -> str:
        """A divisor that is never 0: Where computes both of its branches, and the branch a
        0 divisor reaches is the one not taken (an integer division by 0 aborts a run)."""
        data = ctx.const_of(divisor)
        if data is not None and np.all(data != 0):
            return divisor
        zero = ctx.emit("Equal", [divisor, ctx.ints([0], "zero")])
        return ctx.emit("Where", [zero, ctx.ints([1], "one"), divisor])

    def _bool(self, value: str) -> str:
        self.bools.add(value)
        return value

    def _as_bool(self, ctx, value: str) -> str:
        if value in self.bools:
            return value
        return self._bool(ctx.emit("Not", [ctx.emit("Equal", [value, ctx.ints([0], "zero")])]))

    def _as_int(self, ctx, value: str) -> str:
        return ctx.emit("Cast", [value], to=_INT64) if value in self.bools else value

    def _input_dim(self, ctx, prim) -> str:
        attrs = prim.attrs
        if "producer" not in attrs:
            raise UnsupportedOpError(f"shape prim {prim.name!r} is a run-time value the graph "
                                     "does not say how to read", node=ctx.name)
        producer = self.graph.find_node(attrs["producer"])
        source = ctx.writer.value(producer, int(attrs.get("out_idx", "0")))
        index = ctx.const(np.asarray([int(attrs["dim"])], dtype=np.int64), "dim")
        if attrs.get("element") == "1":  # element ``dim`` of a shape value
            dtype = producer.output_at(int(attrs.get("out_idx", "0"))).dtype
            if ctx.writer.dtypes.get(source, dtype) != "int64" and \
                    producer.optype not in _INT64_SHAPES:
                source = ctx.emit("Cast", [source], to=_INT64)
            return ctx.emit("Gather", [source, index], axis=0)
        if source not in self.shapes:
            self.shapes[source] = ctx.emit("Shape", [source])
        return ctx.emit("Gather", [self.shapes[source], index], axis=0)
