"""Load a model file into an MSCGraph (+ weights), choosing the reader by extension.

``load_model(path) -> (graph, weights)`` is what every subcommand calls; ``load_graph`` keeps the
graph only. Weights of an MSC JSON graph come from a sibling ``.npz`` / ``.safetensors`` file of
the same stem when there is one (``net.json`` + ``net.npz``), else the graph has none.
"""

from __future__ import annotations

import os

from ..errors import SerializationError


def _from_json(path: str):
    from codegen.weight_files import load_weights

    from ..graph import MSCGraph

    graph = MSCGraph.from_json(path)
    stem = os.path.splitext(path)[0]
    for ext in (".npz", ".safetensors"):
        if os.path.exists(stem + ext):
            return graph, load_weights(stem + ext)
    return graph, {}


def _from_onnx(path: str):
    from frontends.translate import from_onnx

    return from_onnx(path)


def _from_tvmscript(path: str):
    from frontends.translate import from_relax

    from ..relax import from_script

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise SerializationError(f"not UTF-8 text (byte {e.start})", file=path,
                                 hint="TVMScript files are UTF-8 Python source") from None
    return from_relax(from_script(text, filename=path))  # parse errors name the file


# Readers by file extension: MSCGraph JSON, ONNX, TVMScript text (parsed, never executed).
LOADERS = {".json": _from_json, ".onnx": _from_onnx, ".py": _from_tvmscript,
           ".tvmscript": _from_tvmscript}


def load_model(path: str):
    """``(graph, weights)`` of a model file; a missing or unknown file is a SerializationError."""
    if not os.path.exists(path):
        raise SerializationError("no such file", file=path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in LOADERS:
        raise SerializationError(f"unsupported model format {ext or '(none)'!r}", file=path,
                                 hint=f"supported: {', '.join(LOADERS)}")
    return LOADERS[ext](path)


def load_graph(path: str):
    return load_model(path)[0]
