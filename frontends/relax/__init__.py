"""Relax frontend: Relax functions -> MSCGraph (``translate.from_relax``; layout inference in
``layout``). The ONNX and torch frontends build Relax and end here."""

from .layout import infer_layouts

__all__ = ["infer_layouts"]
