"""Initializers stored in external data files, memory-mapped instead of read.

A model above protobuf's 2 GB limit keeps its weights in files next to it; each initializer
names its file (``location``, relative to the model's folder), where its bytes start
(``offset``) and how many there are (``length``). ``external_array`` checks all of them
against the file before mapping it, so a hostile model cannot read outside its folder, past
the end of a file, or make numpy allocate what it declares::

    array = external_array(tensor, "/models/llm")   # np.memmap over /models/llm/weights.bin

The returned array is read-only and shares the page cache: translating a model costs about
the weights' size in (reclaimable) file-backed memory, not a second copy
(benchmarks/large_model.py).
"""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import numpy_helper

from msc.errors import ValidationError

from . import tensor_check

__all__ = ["external_array"]

_HINT = "the model file is corrupted or was edited by hand; re-export it"


def external_array(tensor: onnx.TensorProto, base_dir: str) -> np.ndarray:
    """The data of an initializer whose ``data_location`` is EXTERNAL, memory-mapped."""
    info = _entries(tensor)
    path = _data_path(tensor, info.get("location", ""), base_dir)
    offset, length = _int_entry(tensor, info, "offset"), _int_entry(tensor, info, "length")
    dtype = tensor_check.np_dtype(tensor)
    shape = tuple(tensor.dims)
    _check_span(tensor, path, offset, length, dtype)
    if dtype.kind not in "biuf" or dtype.itemsize * 8 < 8:  # packed or exotic types: read
        return numpy_helper.to_array(tensor, base_dir)
    return np.memmap(path, dtype=dtype.newbyteorder("<"), mode="r", offset=offset,
                     shape=shape)


def _entries(tensor: onnx.TensorProto) -> dict:
    return {entry.key: entry.value for entry in tensor.external_data}


def _data_path(tensor: onnx.TensorProto, location: str, base_dir: str) -> str:
    """The data file's real path; it must lie inside the model's folder (no ``..``, no
    absolute path, no symbolic link leading out)."""
    if not location or "\0" in location:  # a NUL byte: os.path raises ValueError
        raise ValidationError(f"external data location {location!r} is not a file name",
                              tensor=tensor.name, hint=_HINT)
    root = os.path.realpath(base_dir or os.curdir)
    path = os.path.realpath(os.path.join(root, location))
    if os.path.isabs(location) or not path.startswith(root + os.sep):
        raise ValidationError(f"external data location {location!r} lies outside the model's "
                              f"folder {root!r} (refused)", tensor=tensor.name,
                              hint="data files are named relative to the model, inside its "
                                   "folder")
    if not os.path.isfile(path):
        raise ValidationError(f"external data file {path!r} is missing", tensor=tensor.name,
                              hint="keep the data files next to the model (paths are relative)")
    return path


def _int_entry(tensor: onnx.TensorProto, info: dict, key: str) -> int | None:
    if key not in info:
        return 0 if key == "offset" else None
    text = info[key]
    if not text.isascii() or not text.isdigit():
        raise ValidationError(f"external data {key} {text!r} is not a non-negative integer",
                              tensor=tensor.name, hint=_HINT)
    return int(text)


def _check_span(tensor: onnx.TensorProto, path: str, offset: int, length: int | None,
                dtype: np.dtype) -> None:
    """offset, length and the declared dims all fit inside the file."""
    size = os.path.getsize(path)
    if offset > size or (length is not None and offset + length > size):
        end = offset if length is None else offset + length
        raise ValidationError(f"external data ends at byte {end} but the file holds {size} "
                              f"bytes (offset {offset}, length {length})", file=path,
                              tensor=tensor.name, hint=_HINT)
    want = tensor_check.stored_bytes(tensor, dtype)
    if length is not None and length < want:
        raise ValidationError(f"external data length {length} is less than the {want} bytes "
                              f"dims {list(tensor.dims)} need", file=path, tensor=tensor.name,
                              hint=_HINT)
    tensor_check.check_external(tensor, tuple(tensor.dims), dtype, size - offset, file=path)
