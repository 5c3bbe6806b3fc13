"""Weight files from strangers (issue #20): ``load_weights`` reads ``.npz`` and ``.safetensors``
without ever unpickling; object arrays, truncated zips, and safetensors headers that lie (sizes,
offsets, dtypes, shapes) are SerializationErrors naming the file. Fuzzed with hypothesis.

Long run: ``MSC_FUZZ_EXAMPLES=5000 python -m pytest tests/codegen/test_weight_files_fuzz.py``.
"""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from msc.codegen.files import save_npz
from msc.codegen.weight_files import load_weights
from msc.errors import SerializationError
from tests.helpers.fuzz import FUZZ_SETTINGS, loads_or_refuses

WEIGHTS = {"conv.weight": np.arange(24, dtype="float32").reshape(2, 3, 2, 2),
           "conv.bias": np.array([1, -1], dtype="int64"), "flag": np.array(True)}


def _safetensors(arrays: dict, header_patch: dict | None = None) -> bytes:
    header, blobs, offset = {"__metadata__": {"format": "np"}}, [], 0
    codes = {"float32": "F32", "int64": "I64", "bool": "BOOL"}
    for key, value in arrays.items():
        raw = value.tobytes()
        header[key] = {"dtype": codes[value.dtype.name], "shape": list(value.shape),
                       "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    for key, patch in (header_patch or {}).items():
        header[key].update(patch)
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def _npz(tmp_path, arrays=WEIGHTS) -> bytes:
    save_npz(tmp_path / "w.npz", arrays)
    return (tmp_path / "w.npz").read_bytes()


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_round_trip(tmp_path, suffix):
    path = tmp_path / f"w{suffix}"
    path.write_bytes(_npz(tmp_path) if suffix == ".npz" else _safetensors(WEIGHTS))
    got = load_weights(path)
    assert sorted(got) == sorted(WEIGHTS)
    for key, value in WEIGHTS.items():
        np.testing.assert_array_equal(got[key], value)
        assert got[key].dtype == value.dtype


def test_pickled_object_array_is_refused(tmp_path):
    path = tmp_path / "evil.npz"
    np.savez(path, w=np.array([{"a": 1}, None], dtype=object))  # pickles the objects
    with pytest.raises(SerializationError, match="evil.npz.*pickle"):
        load_weights(path)


@pytest.mark.parametrize("patch, words", [
    ({"dtype": "F99"}, "dtype"), ({"shape": [100, 100]}, "bytes"), ({"shape": [-1]}, "shape"),
    ({"data_offsets": [0, 10 ** 12]}, "offsets"), ({"data_offsets": [8, 4]}, "offsets"),
    ({"shape": "2,3"}, "shape")])
def test_safetensors_header_lies_are_refused(tmp_path, patch, words):
    path = tmp_path / "w.safetensors"
    path.write_bytes(_safetensors(WEIGHTS, {"conv.weight": patch}))
    with pytest.raises(SerializationError, match=words) as info:
        load_weights(path)
    assert "w.safetensors" in str(info.value)


@pytest.mark.parametrize("blob", [b"", b"\x01", struct.pack("<Q", 2 ** 63) + b"{}",
                                  struct.pack("<Q", 2) + b"[]", struct.pack("<Q", 4) + b"\xff{}x"])
def test_safetensors_bad_header_is_refused(tmp_path, blob):
    path = tmp_path / "w.safetensors"
    path.write_bytes(blob)
    with pytest.raises(SerializationError, match="w.safetensors"):
        load_weights(path)


def test_unknown_suffix_and_missing_file(tmp_path):
    with pytest.raises(SerializationError, match="w.bin"):
        load_weights(tmp_path / "w.bin")
    with pytest.raises(SerializationError, match="no such file"):
        load_weights(tmp_path / "none.npz")


@FUZZ_SETTINGS
@given(st.data())
def test_fuzz_weight_files(tmp_path_factory, data):
    """Flipped, cut or inserted bytes in a valid file: it loads, or a SerializationError."""
    folder = tmp_path_factory.mktemp("w")
    suffix = data.draw(st.sampled_from([".npz", ".safetensors"]))
    blob = bytearray(_npz(folder) if suffix == ".npz" else _safetensors(WEIGHTS))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(blob)))
        kind = data.draw(st.sampled_from(["flip", "cut", "insert", "truncate"]))
        if kind == "flip" and at < len(blob):
            blob[at] ^= data.draw(st.integers(1, 255))
        elif kind == "cut":
            del blob[at:at + data.draw(st.integers(1, 16))]
        elif kind == "insert":
            blob[at:at] = data.draw(st.binary(min_size=1, max_size=8))
        else:
            del blob[at:]
    path = folder / f"w{suffix}"
    path.write_bytes(bytes(blob))
    loads_or_refuses(load_weights, path, path.name)
