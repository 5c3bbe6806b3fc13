"""The extension classes Model Explorer loads with ``--extensions=msc.viewer.me_adapter``
(it imports this ``main`` module; importing it registers both classes). Graph objects are
built from the exporter's JSON with dacite, Model Explorer's own dependency, so the adapter
and the exported file cannot drift apart.
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
        data = convert_json(model_path)
        return {"graphs": [from_dict(graph_builder.Graph, g) for g in data["graphs"]]}


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
