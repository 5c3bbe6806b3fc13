"""msc inside Google's Model Explorer: an adapter extension that opens what msc reads (ONNX
through from_onnx, MSC graph JSON, TVMScript) as msc's graph, and a node data provider that
shows an msc overlay as Model Explorer node data.

    model-explorer model.onnx --extensions=msc.viewer.me_adapter

Model Explorer imports ``msc.viewer.me_adapter.main`` (its ``--extensions`` loads a package's
``main``), which defines the two extension classes on top of this module. This module needs
no Model Explorer: it builds the JSON the exporter (model_explorer.py) writes, so the adapter,
``msc view --model-explorer`` and the tests share one converter.

An overlay (``{joint: number}`` or the settings form, see overlay.py) found beside the model as
``<stem>.overlay.json`` is what the "msc overlay" provider shows unless its config names
another file.

    >>> sorted(FILE_EXTS)
    ['json', 'onnx', 'py', 'tvmscript']
    >>> overlay_beside("/models/resnet50.onnx")
    '/models/resnet50.overlay.json'
"""

from __future__ import annotations

import os
from typing import Any

from ...cli.loaders import LOADERS, load_model
from ...errors import SerializationError
from ..model_explorer import graph_collection, node_data
from ..overlay import Overlay, load_overlay
from ..scene import Scene

__all__ = ["ADAPTER_ID", "FILE_EXTS", "OVERLAY_SUFFIX", "PROVIDER_ID", "convert_json",
           "overlay_beside", "overlay_node_data"]

ADAPTER_ID = "msc_adapter"
PROVIDER_ID = "msc_overlay"
FILE_EXTS = tuple(ext.lstrip(".") for ext in LOADERS)
OVERLAY_SUFFIX = ".overlay.json"


def overlay_beside(model_path: str) -> str:
    """Where the overlay of ``model_path`` sits by convention: ``<stem>.overlay.json``."""
    return os.path.splitext(model_path)[0] + OVERLAY_SUFFIX


def _scene(model_path: str) -> tuple[Scene, Any]:
    graph, weights = load_model(model_path)
    return Scene.of(graph, weights), graph


def convert_json(model_path: str) -> dict:
    """``{"graphs": [graph JSON]}`` of the model at ``model_path``, as the exporter writes it:
    namespaces from the joints' scopes (else cut blocks), attrs, output metadata."""
    scene, _ = _scene(model_path)
    return {"graphs": graph_collection(scene)["graphs"]}


def overlay_node_data(model_path: str, overlay_path: str | None = None) -> dict:
    """``{graph id: GraphNodeData JSON}`` of an overlay on the model at ``model_path`` (keys:
    joint names or the source model's node names); ``overlay_path`` defaults to the file
    beside the model."""
    path = overlay_path or overlay_beside(model_path)
    if not os.path.exists(path):
        raise SerializationError("no overlay file", file=path,
                                 hint=f"write {{joint: number}} to {os.path.basename(path)} "
                                      "beside the model, or name the file in the config")
    scene, graph = _scene(model_path)
    overlay: Overlay = load_overlay(path, graph.node_names, graph.sources)
    return node_data(scene, overlay)
