"""Reading weight files from strangers: ``.npz`` and ``.safetensors`` -> {name: ndarray}.

Nothing is ever unpickled (``np.load(allow_pickle=False)``; safetensors is raw bytes plus a JSON
header), and every header field is checked against the file before a byte is used: a file that
lies about its sizes, offsets, dtypes or shapes is a SerializationError naming it.

    >>> weights = load_weights("model_weights.safetensors")   # doctest: +SKIP
    >>> mod = to_relax(graph, weights)                        # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path

import numpy as np

from msc.errors import MSCError, SerializationError

from .qweight import unpack_weights

__all__ = ["SAFETENSORS_DTYPES", "load_weights"]

# safetensors dtype codes numpy reads natively (BF16 / F8 need ml_dtypes: not read here).
SAFETENSORS_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "I64": "int64",
                      "I32": "int32", "I16": "int16", "I8": "int8", "U64": "uint64",
                      "U32": "uint32", "U16": "uint16", "U8": "uint8", "BOOL": "bool"}
_MAX_HEADER = 100 * 2 ** 20  # the safetensors format's own limit on the JSON header


def load_weights(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The arrays of a ``.npz`` or ``.safetensors`` file, by name."""
    path = Path(path)
    readers = {".npz": _read_npz, ".safetensors": _read_safetensors}
    if path.suffix not in readers:
        raise SerializationError(f"unsupported weight file {path.suffix or '(no suffix)'!r}",
                                 file=str(path), hint=f"use one of {', '.join(readers)}")
    if not path.is_file():
        raise SerializationError("no such file", file=str(path))
    return readers[path.suffix](path)


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as data:
            # int8 weights saved with their scales come back as QuantizedWeight records
            return unpack_weights({key: data[key] for key in data.files})
    except ValueError as err:  # numpy refuses object arrays: they would need unpickling
        what = "pickled objects (refused)" if "pickle" in str(err) else f"a bad array: {err}"
        raise SerializationError(f"the file holds {what}", file=str(path),
                                 hint="weights are plain numeric arrays") from None
    except MSCError:
        raise
    except Exception as err:  # noqa: BLE001 - a stranger's archive breaks zipfile and numpy in
        # many ways: BadZipFile, EOFError, zlib.error, RuntimeError (an encrypted member),
        # tokenize.TokenError and SyntaxError (a .npy header that is not a dict), ...
        raise SerializationError(f"not a readable .npz archive: {type(err).__name__}: {err}",
                                 file=str(path)) from None


def _read_safetensors(path: Path) -> dict[str, np.ndarray]:
    try:
        blob = path.read_bytes()
    except OSError as err:
        raise SerializationError(f"cannot read file: {err}", file=str(path)) from None
    header, data = _split_header(blob, str(path))
    return {key: _tensor(key, info, data, str(path))
            for key, info in header.items() if key != "__metadata__"}


def _split_header(blob: bytes, file: str) -> tuple[dict, memoryview]:
    if len(blob) < 8:
        raise SerializationError("file is shorter than the 8-byte header size", file=file)
    (size,) = struct.unpack("<Q", blob[:8])
    if size > min(_MAX_HEADER, len(blob) - 8):
        raise SerializationError(f"header size {size} is larger than the file", file=file)
    try:
        header = json.loads(blob[8:8 + size].decode("utf-8"))
    except (ValueError, RecursionError) as err:  # bad UTF-8, bad JSON, absurd nesting
        raise SerializationError(f"header is not JSON: {err}", file=file) from None
    if not isinstance(header, dict):
        raise SerializationError("header must be a JSON object", file=file)
    return header, memoryview(blob)[8 + size:]


def _tensor(key: str, info, data: memoryview, file: str) -> np.ndarray:
    if not isinstance(info, dict):
        raise SerializationError("entry must be a JSON object", file=file, tensor=key)
    dtype = SAFETENSORS_DTYPES.get(info.get("dtype")) if isinstance(info.get("dtype"),
                                                                      str) else None
    if dtype is None:
        raise SerializationError(f"unsupported dtype {info.get('dtype')!r:.40}", file=file,
                                 tensor=key, hint=f"use one of {', '.join(SAFETENSORS_DTYPES)}")
    shape = info.get("shape")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise SerializationError(f"shape must be a list of ints >= 0, got {shape!r:.60}",
                                 file=file, tensor=key)
    offsets = info.get("data_offsets")
    if not (isinstance(offsets, list) and len(offsets) == 2
            and all(type(o) is int for o in offsets)
            and 0 <= offsets[0] <= offsets[1] <= len(data)):
        raise SerializationError(f"data_offsets {offsets!r:.60} are not inside the data "
                                 f"({len(data)} bytes)", file=file, tensor=key)
    begin, end = offsets
    need = math.prod(shape) * np.dtype(dtype).itemsize
    if need != end - begin:
        raise SerializationError(f"shape {shape} of {dtype} needs {need} bytes, the offsets "
                                 f"give {end - begin}", file=file, tensor=key)
    return np.frombuffer(data[begin:end], dtype=dtype).reshape(shape).copy()
