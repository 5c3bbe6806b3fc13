"""Files the CLI fuzz (tests/cli/test_cli_fuzz.py) points its random command lines at: two tiny
models that run in milliseconds, and hostile files of every extension a command reads.

``make_corpus(folder)`` writes them all into ``folder`` and returns ``{role: path}``; every
path is inside ``folder`` (the fuzz checks that nothing is written anywhere else).
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

# Parts of odd file names: spaces, quotes, unicode, shell characters, an undecodable byte as
# Linux hands it to Python (surrogateescape), a leading dash (argparse takes it for a flag).
ODD_NAMES = ["a b", "quo'te\"", "ünï-名", "$(x)`y`;|&", "\udcff\udcfe", "-dash", "new\nline",
             "tab\there", "..", "dot.", "%s%n{}"]
EXTENSIONS = [".json", ".onnx", ".py", ".tvmscript", ".npz", ".npy", ".safetensors",
              ".prototxt", ".html", ".svg", ".dot", ".tflite", ""]


def tiny_onnx(path: Path) -> str:
    """y = relu(x + w), x float32 [N, 4] (a named dim), w an initializer: a model every
    command can load, build and run in milliseconds."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.linspace(-1, 1, 4, dtype="float32"), "w")
    nodes = [helper.make_node("Add", ["x", "w"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                ir_version=8), str(path))
    return str(path)


def gather_onnx(path: Path) -> str:
    """y = table[ids] (Gather, axis 0), ids int64 [N]: random ids (0..9) index a 5-row table,
    so running it with random inputs meets the native index check."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    table = numpy_helper.from_array(np.arange(15, dtype="float32").reshape(5, 3), "table")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["y"], axis=0)], "gather",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["N"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], [table])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                ir_version=8), str(path))
    return str(path)


def _write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def _hostile_models(folder: Path, good: dict) -> dict:
    """Empty, garbage and truncated files under every model extension."""
    files = {}
    for ext in (".json", ".onnx", ".py", ".tvmscript"):
        files[f"empty{ext}"] = _write(folder / f"empty{ext}", b"")
        files[f"garbage{ext}"] = _write(folder / f"garbage{ext}", b"\x00\xff\x13garbage{[(\n")
    for role in ("onnx", "json"):
        data = Path(good[role]).read_bytes()
        files[f"truncated.{role}"] = _write(folder / f"truncated.{role}", data[:len(data) // 2])
    files["not_utf8.py"] = _write(folder / "not_utf8.py", b"\xff\xfe@R.function\n")
    files["folder.onnx"] = str(folder / "folder.onnx")
    (folder / "folder.onnx").mkdir()
    return files


def _torch_files(folder: Path) -> dict:
    files = {"torch_ok.py": folder / "torch_ok.py", "torch_raises.py": folder / "torch_raises.py",
             "torch_exit.py": folder / "torch_exit.py"}
    files["torch_ok.py"].write_text("import torch\n\ndef make():\n    return torch.nn.ReLU()\n\n"
                                    "def not_a_module():\n    return 3\n")
    files["torch_raises.py"].write_text("def make():\n    raise KeyError('boom')\n")
    files["torch_exit.py"].write_text("raise SystemExit(0)\n")
    return {k: str(v) for k, v in files.items()}


def _arrays(folder: Path) -> dict:
    """--input / --calib / weight files: good, pickled, garbage, empty, lying headers."""
    files = {"good.npy": folder / "good.npy", "int.npy": folder / "int.npy",
             "pickled.npy": folder / "pickled.npy", "npz_as.npy": folder / "npz_as.npy",
             "calib.npz": folder / "calib.npz", "pickled.npz": folder / "pickled.npz"}
    np.save(files["good.npy"], np.ones((2, 4), "float32"))
    np.save(files["int.npy"], np.arange(3, dtype="int64"))
    files["pickled.npy"].write_bytes(b"\x93NUMPY\x01\x00v\x00{'descr': '|O', 'fortran_order': "
                                     b"False, 'shape': (1,), }" + b" " * 49 + b"\n"
                                     + pickle.dumps([{"x": 1}]))
    with open(files["npz_as.npy"], "wb") as f:
        np.savez(f, a=np.ones(2))
    np.savez(files["calib.npz"], x=np.ones((4, 4), "float32"))
    np.savez(files["pickled.npz"], x=np.array([None, {}], dtype=object))
    out = {k: str(v) for k, v in files.items()}
    out["empty.npy"] = _write(folder / "empty.npy", b"")
    out["garbage.npy"] = _write(folder / "garbage.npy", b"\x93NUMPY\x01\x00\xff\xffgarbage")
    out["header_lies.npy"] = _write(folder / "header_lies.npy", b"\x93NUMPY\x01\x00F\x00{'descr'"
                                    b": '<f4', 'fortran_order': False, 'shape': (99999999999,"
                                    b" 9999999), }" + b" " * 8 + b"\n")
    out["garbage.npz"] = _write(folder / "garbage.npz", b"PK\x03\x04broken zip")
    out["bad_overlay.json"] = _write(folder / "bad_overlay.json", b'{"relu": "high", "x": []}')
    out["list.json"] = _write(folder / "list.json", b"[1, 2, 3]")
    return out


def make_corpus(folder: Path) -> dict[str, str]:
    """Every file of the fuzz, by role, inside ``folder``."""
    from msc.cli.main import main

    folder.mkdir(parents=True, exist_ok=True)
    good = {"onnx": tiny_onnx(folder / "tiny.onnx"), "gather": gather_onnx(folder / "gather.onnx")}
    good["json"] = str(folder / "tiny.json")  # with its weights, tiny.npz
    assert main(["export", good["onnx"], "-o", good["json"], "-q"]) == 0
    files = {**good, **_hostile_models(folder, good), **_torch_files(folder), **_arrays(folder)}
    files["missing.onnx"] = str(folder / "missing.onnx")
    for i, odd in enumerate(ODD_NAMES):  # copies of the tiny model under odd names
        path = folder / f"{odd}{i}.onnx"
        path.write_bytes(Path(good["onnx"]).read_bytes())
        files[f"odd{i}.onnx"] = str(path)
    return files
