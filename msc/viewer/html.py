"""The self-contained HTML view: one file, no server, no network.

The page holds the joints and groups as JSON, the vendored dagre layout library and the viewer
script (msc/viewer/assets/). Only the levels the user opened are laid out, one level at a time,
so a 10,000-joint graph opens as a few dozen group boxes.

    >>> write_html(graph, weights, "out/resnet50.html")  # doctest: +SKIP
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from importlib import resources
from string import Template
from typing import Any

from ..graph.base import bulk_objects
from ..graph.files import write_atomic
from .groups import Group
from .overlay import Overlay
from .scene import FAMILY_COLORS, Scene

__all__ = ["page_data", "render_html", "write_html"]

DAGRE_VERSION = "3.1.3"  # assets/dagre.min.js, from the npm package @dagrejs/dagre
_KEYS = ("name", "optype", "family", "outputs", "parents")
# left out when empty (most joints of a big model have no attrs or weights; the script fills
# them in): a 100,000-joint page is a third smaller and opens that much sooner
_OPTIONAL_KEYS = ("scope", "attrs", "weights")


def _asset(name: str) -> str:
    return resources.files("msc.viewer").joinpath("assets", name).read_text(encoding="utf-8")


def _joint(rec: dict) -> dict:
    """A joint's row of the page (its shape is the first output's: the script copies it)."""
    row = {k: rec[k] for k in _KEYS}
    row.update((k, rec[k]) for k in _OPTIONAL_KEYS if rec[k])
    return row


def page_data(scene: Scene, overlay: Overlay | None = None) -> dict:
    """The JSON the viewer script reads: joints, groups (items: joint index, or -1-gid for a
    sub-group), family colors and the overlay."""
    groups = scene.groups()
    edges = scene.level_edges()
    rows = [{"label": g.label, "size": g.size,
             "parent": g.parent.gid if g.parent is not None else -1,
             "items": [-1 - i.gid if isinstance(i, Group) else i for i in g.items],
             "edges": sorted(edges.get(g.gid, ()))} for g in groups]
    joints = [_joint(rec) for rec in scene.joints]
    return {"name": scene.name, "joints": joints, "groups": rows, "colors": FAMILY_COLORS,
            "overlay": overlay.to_json() if overlay is not None else None}


def render_html(scene: Scene, overlay: Overlay | None = None) -> str:
    """The page's text."""
    data = json.dumps(page_data(scene, overlay), separators=(",", ":"))
    # no "<" inside the <script> element: a joint name like "</script>" or "<!--" stays data
    data = data.replace("<", "\\u003c")
    stats = f"{len(scene.joints)} joints, {len(scene.groups()) - 1} groups"
    if overlay is not None:
        stats += f", overlay {overlay.title!r} on {len(overlay.values)}"
    return Template(_asset("page.html")).substitute(
        TITLE=html.escape(scene.name), CSS=_asset("viewer.css"), STATS=html.escape(stats),
        DATA=data, DAGRE=_asset("dagre.min.js"), DAGRE_VERSION=DAGRE_VERSION,
        VIEWER=_asset("viewer.js"))


def write_html(graph, weights: Mapping[str, Any] | None, path: str,
               overlay: Overlay | None = None) -> str:
    """Write the HTML view of ``graph`` to ``path``; returns ``path``."""
    with bulk_objects():  # no GC passes over the records of a big graph (none is garbage)
        write_atomic(path, render_html(Scene.of(graph, weights), overlay))
    return path
