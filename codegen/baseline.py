"""Baseline data of a generated folder: the inputs and golden outputs its test script checks.

    to_torch(graph, weights, build_folder="out/torch")
    save_baseline("out/torch", {"inp_0": x}, {"relu": y})    # or lists, in the graph's order
    # $ python out/torch/main.py  ->  relu: max abs err 0, ... -> ok / PASS

Everything goes to ``baseline/baseline.npz``, keyed by alias (inputs and outputs), written
atomically and never pickled. The codegen leaves ``msc_codegen.json`` in the folder, naming the
script and the input/output keys, so lists can be given in order.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from msc.errors import SerializationError, ValidationError
from msc.graph import MSCTensor
from msc.graph.files import write_atomic

from .files import save_npz
from .templates import BASELINE_DIR, BASELINE_FILE

__all__ = ["MANIFEST", "baseline_keys", "baseline_path", "read_config", "read_manifest",
           "save_baseline", "write_manifest"]

MANIFEST = "msc_codegen.json"
# codegen_config: whether the script gets its standalone test, and the test's tolerances.
_CONFIG_KEYS = {"need_test": True, "atol": 1e-5, "rtol": 1e-5}


def read_config(codegen_config: dict | None) -> dict:
    config = dict(_CONFIG_KEYS)
    unknown = sorted(set(codegen_config or {}) - set(config))
    if unknown:
        raise ValidationError(f"unknown codegen_config keys {unknown}",
                              hint=f"known keys: {', '.join(config)}")
    config.update(codegen_config or {})
    return config


def baseline_keys(tensors: list[MSCTensor]) -> list[str]:
    """The baseline key of each tensor: its alias (else name), made unique in order."""
    namer_used: set = set()
    keys = []
    for t in tensors:
        key = t.alias or t.name
        while key in namer_used:
            key += "_"
        namer_used.add(key)
        keys.append(key)
    return keys


def baseline_path(build_folder: str | os.PathLike) -> Path:
    return Path(build_folder) / BASELINE_DIR / BASELINE_FILE


def write_manifest(build_folder: Path, script: str, inputs: list[str], outputs: list[str],
                   framework: str) -> None:
    data = {"script": script, "framework": framework, "inputs": inputs, "outputs": outputs}
    write_atomic(build_folder / MANIFEST, json.dumps(data, indent=2) + "\n")


def read_manifest(build_folder: str | os.PathLike) -> dict:
    path = Path(build_folder) / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise SerializationError(f"no codegen manifest: {err}", file=str(path),
                                 hint="run to_relax / to_torch into this folder first") from None
    return data


def _keyed(values, keys: list[str], what: str) -> dict:
    if isinstance(values, Mapping):
        missing = [k for k in keys if k not in values]
        if missing:
            raise ValidationError(f"{what} lack {missing}", hint=f"{what} are keyed by alias: "
                                  f"{keys}")
        return {k: _array(values[k]) for k in keys}
    if isinstance(values, np.ndarray) or not isinstance(values, Sequence):
        values = [values]
    if len(values) != len(keys):
        raise ValidationError(f"got {len(values)} {what}, the graph has {len(keys)}: {keys}")
    return {k: _array(v) for k, v in zip(keys, values)}


def _array(value) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu().numpy()
    elif hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        value = value.numpy()
    return np.asarray(value)


def save_baseline(build_folder: str | os.PathLike, inputs, golden) -> Path:
    """Write the inputs and golden outputs the folder's test script compares against.

    ``inputs`` / ``golden``: dicts keyed by alias, or sequences in the graph's input / output
    order (arrays or torch tensors). Returns the path of the written ``.npz``.
    """
    manifest = read_manifest(build_folder)
    data = _keyed(inputs, manifest["inputs"], "inputs")
    for key, value in _keyed(golden, manifest["outputs"], "outputs").items():
        if key in data and not np.array_equal(data[key], value):
            raise ValidationError(f"alias {key!r} is both an input and an output with "
                                  "different values")
        data[key] = value
    path = baseline_path(build_folder)
    save_npz(path, data)
    return path
