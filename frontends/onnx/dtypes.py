"""ONNX element types -> Relax dtype names."""

from __future__ import annotations

import onnx
from onnx import helper

from msc.errors import UnsupportedOpError

__all__ = ["relax_dtype"]


def relax_dtype(elem_type: int) -> str:
    """``onnx.TensorProto.FLOAT`` -> ``"float32"``; string tensors are unsupported."""
    if elem_type == onnx.TensorProto.STRING:
        raise UnsupportedOpError("string tensors are not supported")
    return helper.tensor_dtype_to_np_dtype(elem_type).name
