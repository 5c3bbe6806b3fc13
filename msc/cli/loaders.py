"""Load a model file into an MSCGraph, choosing the reader by extension."""

from __future__ import annotations

import os

from ..errors import SerializationError


def _from_json(path: str):
    from ..graph import MSCGraph

    return MSCGraph.from_json(path)


LOADERS = {".json": _from_json}


def load_graph(path: str):
    if not os.path.exists(path):
        raise SerializationError("no such file", file=path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in LOADERS:
        raise SerializationError(f"unsupported model format {ext or '(none)'!r}", file=path,
                                 hint=f"supported: {', '.join(LOADERS)}")
    return LOADERS[ext](path)
