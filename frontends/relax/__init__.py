"""Relax frontend: Relax functions -> MSCGraph (layout inference in ``layout``)."""

from .layout import infer_layouts

__all__ = ["infer_layouts"]
