"""The extension classes Model Explorer loads with ``--extensions=msc.viewer.me_adapter``
(it imports this ``main`` module; importing it registers both classes). Graph objects are
built from the exporter's JSON, so the adapter and the exported file cannot drift apart: the
nodes field by field (dacite, Model Explorer's own dependency, type-checks every field and
took 2.3 s of CPU on 10,000 joints, three times the conversion), node data with dacite.
"""

from __future__ import annotations

from dacite import from_dict
from model_explorer import Adapter, AdapterMetadata, graph_builder, node_data_builder
from model_explorer.config_editor import TextInputConfigEditor
from model_explorer.node_data_provider import (
    GetConfigEditorsResult,
    NodeDataProvider,
    NodeDataProviderMetadata,
    NodeDataProviderResult,
)

from ...errors import MSCError
from . import ADAPTER_ID, FILE_EXTS, OVERLAY_SUFFIX, PROVIDER_ID, convert_json, overlay_node_data

__all__ = ["MSCAdapter", "MSCOverlayProvider"]


class MSCAdapter(Adapter):
    """Opens .onnx (through from_onnx), MSC graph .json and TVMScript .py as msc's graph."""

    metadata = AdapterMetadata(
        id=ADAPTER_ID, name="msc adapter",
        description="msc's graph of ONNX, MSC JSON or TVMScript: joints grouped by module",
        fileExts=list(FILE_EXTS))

    def convert(self, model_path: str, settings: dict) -> dict:
        return {"graphs": [_graph(g) for g in convert_json(model_path)["graphs"]]}


def _graph(g: dict) -> graph_builder.Graph:
    return graph_builder.Graph(
        id=g["id"], nodes=[_node(n) for n in g["nodes"]],
        groupNodeAttributes=g["groupNodeAttributes"],
        layoutConfigs=graph_builder.LayoutConfigs(**g["layoutConfigs"]))


def _node(n: dict) -> graph_builder.GraphNode:
    return graph_builder.GraphNode(
        id=n["id"], label=n["label"], namespace=n["namespace"],
        subgraphIds=n["subgraphIds"], attrs=[_kv(kv) for kv in n["attrs"]],
        incomingEdges=[graph_builder.IncomingEdge(**e) for e in n["incomingEdges"]],
        outputsMetadata=[_metadata(m) for m in n["outputsMetadata"]],
        inputsMetadata=[_metadata(m) for m in n["inputsMetadata"]],
        style=graph_builder.GraphNodeStyle(**n["style"]))


def _metadata(m: dict) -> graph_builder.MetadataItem:
    return graph_builder.MetadataItem(id=m["id"], attrs=[_kv(kv) for kv in m["attrs"]])


def _kv(kv: dict) -> graph_builder.KeyValue:
    value = kv["value"]  # a string, or {type: node_ids, nodeIds} (links to other nodes)
    if isinstance(value, dict):
        value = graph_builder.NodeIdsNodeAttributeValue(nodeIds=value["nodeIds"])
    return graph_builder.KeyValue(key=kv["key"], value=value)


class MSCOverlayProvider(NodeDataProvider):
    """msc's overlay (``<model stem>.overlay.json`` by default) as node data."""

    metadata = NodeDataProviderMetadata(
        id=PROVIDER_ID, name="msc overlay",
        description="per-joint values of an msc overlay file (errors, times, SQNR) as colors",
        icon="palette")

    def get_config_editors(self, provider_id: str) -> GetConfigEditorsResult:
        return GetConfigEditorsResult(configEditors=[TextInputConfigEditor(
            id="overlay", label="overlay file",
            description=f"default: <model stem>{OVERLAY_SUFFIX} beside the model")])

    def run(self, provider_id: str, model_path: str, graph_id: str, config_values: dict,
            graph=None) -> NodeDataProviderResult:
        try:
            data = overlay_node_data(model_path, (config_values or {}).get("overlay") or None)
        except MSCError as err:  # shown by Model Explorer's UI, not a crash of its server
            return NodeDataProviderResult(error=str(err))
        graph_data = data.get(graph_id) or next(iter(data.values()))
        return NodeDataProviderResult(
            result=from_dict(node_data_builder.GraphNodeData, graph_data))
