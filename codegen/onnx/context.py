"""What an ONNX row sees while it writes one joint: its inputs and weights as ONNX value
names, typed attrs (from the op record), and ``emit`` to add nodes::

    def _relu(ctx):                        # a row of codegen/onnx/table.py
        return ctx.emit("Relu", [ctx.input(0)])

Rows return the value name of each output of the joint (a str, or a list for several); the
writer renames the values they made after the joint (``conv2d``, ``split_0``...).
"""

from __future__ import annotations

import numpy as np

from msc.errors import UnsupportedOpError
from msc.graph import MSCJoint, MSCTensor

from ..joint import JointContext

__all__ = ["OnnxContext", "onnx_dtype"]


def onnx_dtype(dtype: str) -> int:
    """``"float32"`` -> ``TensorProto.FLOAT``."""
    from onnx import helper

    try:
        return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    except (TypeError, KeyError):
        raise UnsupportedOpError(f"dtype {dtype!r} has no ONNX tensor type",
                                 hint="cast the tensor to a numpy dtype first") from None


class OnnxContext(JointContext):
    """One joint being written (``writer``: codegen.onnx.writer.OnnxWriter)."""

    def __init__(self, writer, node: MSCJoint):
        super().__init__(writer.graph, node)
        self.writer = writer

    # ---- values --------------------------------------------------------------------------
    @property
    def opset(self) -> int:
        return self.writer.opset

    def input(self, i: int) -> str:
        producer, idx = self.node.producer_and_idx_of(i)
        return self.writer.value(producer, idx)

    @property
    def inputs(self) -> list[str]:
        return [self.input(i) for i in range(len(self.node.inputs))]

    def in_tensor(self, i: int = 0) -> MSCTensor:
        return self.node.input_at(i)

    @property
    def out(self) -> MSCTensor:
        return self.node.output_at(0)

    def has_weight(self, role: str) -> bool:
        return role in self.node.weights

    def weight(self, role: str) -> str:
        return self.writer.initializer(self.node.weight_at(role))

    def weight_data(self, role: str) -> np.ndarray | None:
        """The weight's numbers (None when the writer has no weights)."""
        return self.writer.data(self.node.weight_at(role))

    def tensor_arg(self, name: str) -> str | None:
        """The op argument ``name`` as an ONNX value (an input or a weight), or None."""
        for arg, source in zip(self.op_def.args, self.bind_args()):
            if arg.name == name and source is not None:
                kind, value = source
                if kind == "input":
                    return self.input(value)
                if kind == "weight":
                    return self.weight(value)
                if kind == "value":
                    return self.const(np.asarray(value), name)
        return None

    def arg_value(self, name: str, default=None):
        """A non-tensor op argument held as a node attr (a prim or tuple value)."""
        for arg, source in zip(self.op_def.args, self.bind_args()):
            if arg.name == name and source is not None and source[0] == "value":
                return source[1]
        return default

    def prim_values(self, key: str) -> str | None:
        """Attr ``key`` as an int64 1-D value computed at run time when it holds symbolic
        values (its ``"<key>.prims"`` attr names their prims), else None."""
        text = self.node.attrs.get(f"{key}.prims", "")
        return self.writer.shapes.elements(self, text) if text else None

    def const_of(self, value: str) -> np.ndarray | None:
        """The numbers of an initializer value (None for a computed value)."""
        return self.writer.const_data.get(value)

    # ---- nodes ---------------------------------------------------------------------------
    def emit(self, op_type: str, inputs: list[str], n_out: int = 1, domain: str = "",
             **attrs):
        """Add one node; its output value name (a list when ``n_out`` > 1)."""
        return self.writer.emit(self.node, op_type, inputs, n_out, domain, attrs)

    def const(self, array, hint: str = "c", dtype: str | None = None) -> str:
        """An initializer holding ``array`` (as ``dtype``)."""
        array = np.asarray(array, dtype=dtype) if dtype else np.asarray(array)
        # "node.hint": onnxruntime's optimizers make initializers named like "squeeze_axes"
        # and fail on a name that is taken
        return self.writer.constant(array, f"{self.name}.{hint}")

    def ints(self, values, hint: str = "i") -> str:
        return self.const(np.asarray(list(values), dtype=np.int64).reshape(-1), hint)

    def scalar(self, value, dtype: str, hint: str = "s") -> str:
        return self.const(np.asarray(value, dtype=dtype), hint)

    def cast(self, value: str, from_dtype: str, to_dtype: str | None) -> str:
        """``value`` as ``to_dtype`` (no node when it already is, a converted initializer
        when it is constant)."""
        if not to_dtype or from_dtype == to_dtype:
            return value
        data = self.const_of(value)
        if data is not None:
            return self.const(data.astype(to_dtype), "cast")
        # Relax's astype does not saturate (out of range is NaN / inf, as ml_dtypes); ONNX's
        # Cast to float8 does unless told (saturate, opset 19)
        extra = {"saturate": 0} if to_dtype.startswith("float8") and "e8m0" not in to_dtype \
            and self.opset >= 19 else {}
        return self.emit("Cast", [value], to=onnx_dtype(to_dtype), **extra)

    def dims(self, tensor: MSCTensor) -> str:
        """``tensor``'s shape as an int64 1-D value (computed from the inputs when symbolic)."""
        return self.writer.shapes.dims(self, tensor)

    def axes_input(self, axes: list[int], since: int = 13) -> dict | list:
        """Axes as the op wants them at this opset: an input from ``since``, else an attr."""
        return [self.ints(axes, "axes")] if self.opset >= since else {"axes": list(axes)}

    def reduce(self, op_type: str, x: str, axes: list[int] | None, keepdims: bool,
               since: int = 18) -> str:
        """``Reduce*`` over ``axes`` (None: all); the axes input came in opset ``since``."""
        if axes is None:
            return self.emit(op_type, [x], keepdims=int(keepdims))
        extra = self.axes_input(axes, since)
        if isinstance(extra, list):
            return self.emit(op_type, [x, *extra], keepdims=int(keepdims))
        return self.emit(op_type, [x], keepdims=int(keepdims), **extra)

    def unsqueeze(self, x: str, axes: list[int]) -> str:
        extra = self.axes_input(axes, 13)
        if isinstance(extra, list):
            return self.emit("Unsqueeze", [x, *extra])
        return self.emit("Unsqueeze", [x], **extra)

    def reshape(self, x: str, tensor: MSCTensor) -> str:
        """``x`` reshaped to ``tensor``'s shape."""
        return self.emit("Reshape", [x, self.dims(tensor)])

    def fail(self, why: str) -> UnsupportedOpError:
        return UnsupportedOpError(why, op=self.node.optype, node=self.name)

    def need(self, opset: int, what: str) -> None:
        """Fail unless the target opset is at least ``opset``."""
        if self.opset < opset:
            raise self.fail(f"{what} needs ONNX opset {opset} (the target is {self.opset})")
