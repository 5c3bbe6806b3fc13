"""ONNX -> Relax frontend: ``OnnxImporter`` and the converter tables (see importer.py)."""

from .context import Context, OnnxNode
from .importer import OnnxImporter, load_model

__all__ = ["Context", "OnnxImporter", "OnnxNode", "load_model"]
