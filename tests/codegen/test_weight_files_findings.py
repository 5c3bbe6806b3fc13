"""What the atheris campaign (benchmarks/fuzz_atheris.py npz) found in ``load_weights``: each
was a raw library exception, now a SerializationError naming the file."""

import io
import zipfile

import numpy as np
import pytest

from msc.codegen.weight_files import load_weights
from msc.errors import SerializationError


def _npz(members: dict) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buf.getvalue()


def _npy(header: str, payload: bytes = b"\0" * 48) -> bytes:
    text = header.encode("latin1")
    text += b" " * (-(10 + len(text) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + payload


def test_a_header_that_is_not_a_dict_literal(tmp_path):
    """Was tokenize.TokenError (EOF in multi-line statement) from numpy's header filter."""
    path = tmp_path / "w.npz"
    path.write_bytes(_npz({"w.npy": _npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,")}))
    with pytest.raises(SerializationError, match=r"w\.npz: not a readable \.npz archive"):
        load_weights(path)


def test_an_encrypted_member(tmp_path):
    """Was RuntimeError (File 'w.npy' is encrypted, password required for extraction)."""
    buf = io.BytesIO()
    np.savez(buf, w=np.ones(3, "float32"))
    data = bytearray(buf.getvalue())
    for signature, flag_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # local, central
        at = data.find(signature)
        data[at + flag_at] |= 1  # general purpose bit 0: encrypted
    path = tmp_path / "enc.npz"
    path.write_bytes(bytes(data))
    with pytest.raises(SerializationError, match=r"enc\.npz: .*encrypted"):
        load_weights(path)
