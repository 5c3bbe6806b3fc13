"""Initializer sanity before any array is built: the declared dims must be non-negative and
agree with the data the tensor stores (inline or in its external file).

A model is free to declare ``dims=[10**6, 10**6]``; numpy would try to allocate the product
(or fail with a bare ValueError). Checking the count against the stored bytes first turns that
into one clear error naming the tensor, whatever the declared size::

    check_stored(tensor)    # ValidationError: tensor 'w': declares 1000000000000 elements ...
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper

from msc.errors import SerializationError, ValidationError

__all__ = ["check_external", "check_stored", "np_dtype", "stored_bytes"]

# Element types packed two to a byte (and two to an int32_data entry).
_PACKED = {getattr(TensorProto, n) for n in ("INT4", "UINT4", "FLOAT4E2M1") if hasattr(
    TensorProto, n)}
_COMPLEX = {TensorProto.COMPLEX64, TensorProto.COMPLEX128}
# The typed field each element type stores its values in (ONNX's TensorProto comments).
_FIELDS = ("float_data", "int32_data", "int64_data", "double_data", "uint64_data",
           "string_data")
_HINT = "the model file is corrupted or was edited by hand; re-export it"
_NP_DTYPES: dict = {}  # ONNX element type -> numpy dtype


def np_dtype(tensor: onnx.TensorProto) -> np.dtype:
    known = _NP_DTYPES.get(tensor.data_type)  # once per element type, not per initializer
    if known is not None:
        return known
    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type))
        _NP_DTYPES[tensor.data_type] = dtype
        return dtype
    except (KeyError, TypeError, ValueError):
        raise SerializationError(f"unknown ONNX element type {tensor.data_type}",
                                 tensor=tensor.name, hint=_HINT) from None


def element_count(tensor: onnx.TensorProto) -> int:
    dims = list(tensor.dims)
    if dims and min(dims) < 0:
        raise ValidationError(f"initializer has negative dims {dims}", tensor=tensor.name,
                              hint=_HINT)
    return math.prod(dims)


def _stored_bytes(count: int, tensor: onnx.TensorProto, dtype: np.dtype) -> int:
    return (count + 1) // 2 if tensor.data_type in _PACKED else count * dtype.itemsize


def stored_bytes(tensor: onnx.TensorProto, dtype: np.dtype) -> int:
    """The bytes the tensor's declared dims take in raw (or external) form."""
    return _stored_bytes(element_count(tensor), tensor, dtype)


def _stored_values(count: int, tensor: onnx.TensorProto) -> int:
    if tensor.data_type in _PACKED:
        return (count + 1) // 2
    return 2 * count if tensor.data_type in _COMPLEX else count


def check_stored(tensor: onnx.TensorProto) -> None:
    """Inline data: the declared element count matches what is stored."""
    dtype = np_dtype(tensor)
    count = element_count(tensor)
    if tensor.data_type == TensorProto.STRING:
        have, want = len(tensor.string_data), count
    elif tensor.HasField("raw_data"):
        have, want = len(tensor.raw_data), _stored_bytes(count, tensor, dtype)
    else:
        have = max(len(getattr(tensor, f)) for f in _FIELDS)
        want = _stored_values(count, tensor)
    if have != want:
        raise ValidationError(f"initializer declares dims {list(tensor.dims)} ({count} "
                              f"elements) but stores data for a different size",
                              tensor=tensor.name, hint=_HINT)


def check_external(tensor: onnx.TensorProto, shape: tuple, dtype: np.dtype,
                   available: int, file: str | None = None) -> None:
    """External data: the file holds at least the declared bytes."""
    count = element_count(tensor)
    want = _stored_bytes(count, tensor, dtype)
    if want > available:
        raise ValidationError(f"initializer declares dims {list(shape)} ({count} elements, "
                              f"{want} bytes) but its data file holds {available} bytes",
                              file=file, tensor=tensor.name, hint=_HINT)
