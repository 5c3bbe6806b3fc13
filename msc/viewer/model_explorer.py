"""Export to Google's Model Explorer: its graph JSON (a GraphCollection) and node data.

Groups become namespaces (``a/b``: one collapsible layer per segment), each output's shape,
dtype and layout become output metadata (``shape`` reads like ``float32[1, 64, 56, 56]``, as
Model Explorer's own adapters write it), attrs and weights become node attributes, and an
overlay becomes per-node data with a gradient. The files load with
``model-explorer graph.json --node_data_paths=graph.node_data.json``; ``open_model_explorer``
starts it from Python when the optional ``ai-edge-model-explorer`` package is installed.

    >>> paths = write_model_explorer(graph, weights, "out/g.json", overlay)  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from ..errors import MSCError
from ..graph.files import write_atomic
from .overlay import GRADIENT, Overlay
from .scene import FAMILY_COLORS, Scene

__all__ = ["command_line", "graph_collection", "node_data", "open_model_explorer",
           "write_model_explorer"]

INSTALL_HINT = "pip install 'msc[explorer]'  (or: pip install ai-edge-model-explorer)"


def _kv(key: str, value: Any) -> dict:
    return {"key": key, "value": value if isinstance(value, (str, dict)) else str(value)}


def _outputs(rec: dict) -> list[dict]:
    items = []
    for k, t in enumerate(rec["tensors"]):
        dims = ", ".join(str(d) for d in t["shape"])
        items.append({"id": str(k), "attrs": [
            _kv("tensor_name", t["name"]), _kv("shape", f"{t['dtype']}[{dims}]"),
            _kv("dtype", t["dtype"]), _kv("layout", t["layout"] or "-")]})
    return items


def _attrs(rec: dict, joints: list[dict]) -> list[dict]:
    attrs = [_kv("optype", rec["optype"]), _kv("family", rec["family"])]
    attrs += [_kv(k, v) for k, v in rec["attrs"].items()]
    for w in rec["weights"]:
        stats = "".join(f" {k} {w[k]:.4g}" for k in ("min", "max", "mean", "std") if k in w)
        attrs.append(_kv(f"weight.{w['role']}", f"{w['name']} {w['shape']}{stats}"))
    producers = [joints[p]["name"] for p in rec["parents"]]
    if producers:
        attrs.append(_kv("producers", {"type": "node_ids", "nodeIds": producers}))
    return attrs


def _node(scene: Scene, index: int, owners) -> dict:
    rec = scene.joints[index]
    return {
        "id": rec["name"], "label": rec["optype"],
        # "/" separates Model Explorer layers; inside one group label it would split the group
        "namespace": "/".join(label.replace("/", ".") for label in
                              scene.namespace(index, owners)),
        "subgraphIds": [],
        "attrs": _attrs(rec, scene.joints),
        "incomingEdges": [{"sourceNodeId": scene.joints[p]["name"],
                           "sourceNodeOutputId": str(out), "targetNodeInputId": str(pos)}
                          for pos, (p, out) in enumerate(rec["in_edges"])],
        "outputsMetadata": _outputs(rec), "inputsMetadata": [],
        "style": {"backgroundColor": FAMILY_COLORS[rec["family"]], "borderColor": "#555555",
                  "hoveredBorderColor": "#e0007a"},
    }


def graph_collection(scene: Scene) -> dict:
    """``{label, graphs: [Graph]}``: the form Model Explorer's JSON loader accepts."""
    owners = scene.joint_groups()
    nodes = [_node(scene, i, owners) for i in range(len(scene.joints))]
    graph = {"id": scene.name, "nodes": nodes,
             "groupNodeAttributes": {"": {"joints": str(len(nodes)), "source": "msc"}},
             "layoutConfigs": {"nodeSep": 20, "rankSep": 50, "edgeSep": 20}}
    return {"label": scene.name, "graphs": [graph]}


def node_data(scene: Scene, overlay: Overlay) -> dict:
    """Model Explorer node data ``{graph id: GraphNodeData}``: results by node id, a gradient
    with the same colors as the HTML view. Model Explorer spreads its gradient linearly over
    the values, so on a log scale each result carries its color (``bgColor`` takes precedence
    over the gradient)."""
    stops = [{"stop": k / (len(GRADIENT) - 1), "bgColor": c} for k, c in enumerate(GRADIENT)]
    log = overlay.scale == "log"
    results = {name: {"value": v, "bgColor": overlay.color(name)} if log else {"value": v}
               for name, v in overlay.values.items()}
    return {scene.name: {"results": results, "gradient": stops}}


def write_model_explorer(graph, weights: Mapping[str, Any] | None, path: str,
                         overlay: Overlay | None = None) -> list[str]:
    """Write the graph JSON to ``path`` (and ``<stem>.node_data.json`` with an overlay);
    returns the paths written."""
    scene = Scene.of(graph, weights)
    write_atomic(path, json.dumps(graph_collection(scene)))
    written = [path]
    if overlay is not None:
        data_path = os.path.splitext(path)[0] + ".node_data.json"
        write_atomic(data_path, json.dumps(node_data(scene, overlay)))
        written.append(data_path)
    return written


def command_line(paths: list[str]) -> str:
    """The shell command that opens the files of ``write_model_explorer`` in Model Explorer."""
    data = f" --node_data_paths={','.join(paths[1:])}" if len(paths) > 1 else ""
    return f"model-explorer {paths[0]}{data}"


def open_model_explorer(paths: list[str], open_browser: bool = True) -> None:
    """Start Model Explorer (a local server; blocks until Ctrl+C) on the files written by
    ``write_model_explorer``."""
    try:
        import model_explorer
    except ImportError:
        raise MSCError("Model Explorer is not installed (package ai-edge-model-explorer)",
                       hint=INSTALL_HINT) from None
    config = model_explorer.config()
    config.add_model_from_path(os.path.abspath(paths[0]))
    for data_path in paths[1:]:
        config.add_node_data_from_path(os.path.abspath(data_path))
    model_explorer.visualize_from_config(config, no_open_in_browser=not open_browser)
