"""Static SVG of a graph: every joint a labelled box (name, optype, output shape/dtype/layout)
colored by op family (or by an overlay), groups drawn as nested frames, laid out top to bottom
level by level (layout.py).

    >>> write_svg(graph, weights, "out/resnet50.svg")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from ..graph.base import bulk_objects
from ..graph.files import write_atomic
from ..progress import progress
from .groups import Group
from .layout import layout_level
from .overlay import Overlay
from .scene import FAMILY_COLORS, Scene

__all__ = ["render_svg", "write_svg"]

JOINT_H, PAD, HEAD, CHAR_W, MAX_CHARS, WIDTH_STEP = 46, 12, 20, 6.6, 40, 4


def _clip(text: str) -> str:
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS - 1] + "\u2026"


def _joint_width(rec: dict) -> float:
    chars = max(len(_clip(rec["name"])), len(rec["optype"]), len(_clip(rec["shape"])))
    # widths on a grid of WIDTH_STEP characters: the layers of a big model (layers.9.mlp,
    # layers.10.mlp) get equal boxes, so their levels are equal and laid out once
    chars = -(-chars // WIDTH_STEP) * WIDTH_STEP
    return min(max(chars * CHAR_W + 18, 96), 290)


class _Placer:
    """Lays out every group bottom-up; ``size[gid]`` is a group's frame size."""

    def __init__(self, scene: Scene):
        self.scene = scene
        self.levels: dict[int, Any] = {}
        self.size: dict[int, tuple[float, float]] = {}
        self.boxes: dict[int, tuple[float, float, float]] = {}  # joint -> x, y, width drawn
        edges = scene.level_edges()
        groups = list(scene.root.walk())
        for group in progress(reversed(groups), total=len(groups), desc="svg layout"):
            sizes = [self.item_size(i) for i in group.items]
            level = layout_level(sizes, sorted(edges.get(group.gid, ())))
            self.levels[group.gid] = (level, sizes)
            self.size[group.gid] = (level.width + 2 * PAD, level.height + HEAD + PAD)

    def item_size(self, item) -> tuple[float, float]:
        if isinstance(item, Group):
            return self.size[item.gid]
        return _joint_width(self.scene.joints[item]), JOINT_H


def _joint(rec: dict, x: float, y: float, w: float, fill: str, title: str,
           focus: bool = False) -> str:
    texts = [(14, "jn", _clip(rec["name"])), (28, "jo", rec["optype"]),
             (41, "js", _clip(rec["shape"]))]
    body = "".join(f'<text x="{x + 8:.1f}" y="{y + dy:.1f}" class="{c}">{escape(t)}</text>'
                   for dy, c, t in texts)
    cls = "joint focus" if focus else "joint"
    return (f'<g class="{cls}" data-name={quoteattr(rec["name"])} '
            f'data-optype={quoteattr(rec["optype"])}><title>{escape(title)}</title>'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{JOINT_H}" rx="4" '
            f'fill="{fill}"/>{body}</g>')


def _draw(placer: _Placer, group: Group, ox: float, oy: float, overlay, out: list) -> None:
    level, sizes = placer.levels[group.gid]
    for a, b, pts in level.paths:
        if isinstance(group.items[a], Group) or isinstance(group.items[b], Group):
            continue  # drawn joint to joint by _cross_edges
        d = "L".join(f"{x + ox:.1f},{y + oy:.1f}" for x, y in pts)
        out.append(f'<path class="edge" d="M{d}"/>')
    for item, (cx, cy), (w, h) in zip(group.items, level.centers, sizes):
        x, y = ox + cx - w / 2, oy + cy - h / 2
        if isinstance(item, Group):
            out.append(f'<g class="group"><rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" '
                       f'height="{h:.1f}" rx="8"/><text x="{x + 8:.1f}" y="{y + 14:.1f}" '
                       f'class="gl">{escape(item.label)} ({item.size})</text></g>')
            _draw(placer, item, x + PAD, y + HEAD, overlay, out)
            continue
        rec = placer.scene.joints[item]
        fill, title = FAMILY_COLORS[rec["family"]], f"{rec['name']}: {rec['optype']}"
        if overlay is not None:
            fill = overlay.color(rec["name"]) or "#ffffff"
            if rec["name"] in overlay.values:
                title += f" {overlay.title}={overlay.values[rec['name']]:g}"
        focus = overlay is not None and overlay.focus == rec["name"]
        out.append(_joint(rec, x, y, w, fill, title, focus))
        placer.boxes[item] = (x, y, w)


def _cross_edges(scene: Scene, boxes: dict) -> list[str]:
    """Edges between joints of different groups, as curves from box to box."""
    owner, paths = scene.joint_groups(), []
    for src, dst in scene.edges:
        if owner[src] is owner[dst]:
            continue
        (x1, y1, w1), (x2, y2, w2) = boxes[src], boxes[dst]
        a, b, top = (x1 + w1 / 2, y1 + JOINT_H), (x2 + w2 / 2, y2), y2
        dy = max(abs(top - a[1]) / 2, 20)
        paths.append(f'<path class="edge" d="M{a[0]:.1f},{a[1]:.1f}C{a[0]:.1f},{a[1] + dy:.1f} '
                     f'{b[0]:.1f},{b[1] - dy:.1f} {b[0]:.1f},{b[1]:.1f}"/>')
    return paths


_STYLE = """
.joint rect { stroke: #555; stroke-width: 1; }
.joint.focus rect { stroke: #2b59c3; stroke-width: 4; stroke-dasharray: 6 3; }
text { font: 11px sans-serif; fill: #222; }
.jn { font-weight: bold; } .js { font: 10px monospace; fill: #555; }
.group rect { fill: rgba(74, 99, 168, 0.05); stroke: #8fa0cf; }
.gl { font-weight: bold; fill: #233a7a; }
.edge { fill: none; stroke: #888; stroke-width: 1.2; marker-end: url(#arrow); }
"""


def render_svg(scene: Scene, overlay: Overlay | None = None) -> str:
    """The SVG text: one ``<g class="joint">`` per joint."""
    placer = _Placer(scene)
    width, height = placer.size[0]
    body: list[str] = []
    _draw(placer, scene.root, PAD, PAD, overlay, body)
    body = _cross_edges(scene, placer.boxes) + body  # under the boxes
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.1f} {height:.1f}">'
            f'<title>{escape(scene.name)}</title><style>{_STYLE}</style>'
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            'markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" '
            'fill="#888"/></marker></defs><rect width="100%" height="100%" fill="#fff"/>')
    return head + "\n".join(body) + "</svg>\n"


def write_svg(graph, weights: Mapping[str, Any] | None, path: str,
              overlay: Overlay | None = None) -> str:
    """Write the SVG of ``graph`` to ``path``; returns ``path``."""
    with bulk_objects():  # no GC passes over the records and layouts (none is garbage)
        write_atomic(path, render_svg(Scene.of(graph, weights), overlay))
    return path
