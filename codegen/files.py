"""Files a codegen writes and reads back: written atomically (never half a file), arrays never
pickled, and the generated script imported as a fresh module."""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import os
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from msc.errors import SerializationError

from .naming import Namer

__all__ = ["load_script", "save_npz", "script_stem", "write_binary_atomic"]

_SCRIPTS = itertools.count()  # fresh module names for load_script
# Room for "<stem>_weights.safetensors" and the atomic writer's ".<name>.XXXX.tmp" within
# the usual 255-byte limit on a file name.
_MAX_STEM = 80


def script_stem(graph_name: str) -> str:
    """The file stem of a graph's generated files: an identifier (so no ``/``, ``..`` or
    NUL can lead outside the build folder), cut to a length every file system accepts."""
    stem = Namer()(graph_name, "main")
    if len(stem) <= _MAX_STEM:
        return stem
    digest = hashlib.sha1(stem.encode()).hexdigest()[:8]  # long names stay distinct
    return f"{stem[:_MAX_STEM - 9]}_{digest}"


def write_binary_atomic(path: str | os.PathLike, write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)`` then move the file into place (never a half-written file)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException as err:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(err, OSError):
            raise SerializationError(f"cannot write file: {err}", file=str(target)) from None
        raise


def save_npz(path: str | os.PathLike, arrays: dict) -> None:
    """``np.savez`` of plain arrays (object arrays are refused: the files never pickle)."""
    data = {k: np.asarray(v) for k, v in arrays.items()}
    for key, value in data.items():
        if value.dtype.hasobject:
            raise SerializationError(f"array {key!r} has dtype object", file=str(path),
                                     hint="weights and baselines are numeric arrays")

    def write(tmp: str) -> None:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as archive:
            for key, value in data.items():
                with archive.open(key + ".npy", "w", force_zip64=True) as handle:
                    np.lib.format.write_array(handle, value, allow_pickle=False)

    write_binary_atomic(path, write)


def load_script(path: Path):
    """Import a generated script (our own output, from its build folder) as a fresh module."""
    spec = importlib.util.spec_from_file_location(f"msc_codegen_{next(_SCRIPTS)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
