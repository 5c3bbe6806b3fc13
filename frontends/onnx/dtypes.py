"""ONNX element types -> Relax dtype names."""

from __future__ import annotations

import onnx
from onnx import helper

from msc.errors import UnsupportedOpError, ValidationError

__all__ = ["relax_dtype"]


def relax_dtype(elem_type: int) -> str:
    """``onnx.TensorProto.FLOAT`` -> ``"float32"``; string tensors are unsupported."""
    if elem_type == onnx.TensorProto.STRING:
        raise UnsupportedOpError("string tensors are not supported")
    try:
        return helper.tensor_dtype_to_np_dtype(elem_type).name
    except KeyError:
        raise ValidationError(f"unknown ONNX element type {elem_type}",
                              hint="the model is corrupted; re-export it") from None
