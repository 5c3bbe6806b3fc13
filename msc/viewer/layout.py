"""Layered top-to-bottom layout of one group level with grandalf (Sugiyama: ranks, median
crossing reduction, Brandes-Koepf coordinates), and of a whole group tree level by level.

grandalf grows superlinearly (about 15 s for 10k flat nodes), but a level holds at most
``groups.MAX_ITEMS`` boxes, so the tree costs a few ms per group: linear in the graph.

    >>> boxes = layout_level([(100, 40), (100, 40), (100, 40)], [(0, 1), (0, 2)])
    >>> [round(y) for _, y in boxes.centers], boxes.height
    ([20, 80, 80], 100.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from grandalf.graphs import Edge, Graph, Vertex
from grandalf.layouts import SugiyamaLayout

__all__ = ["LevelLayout", "layout_level"]

XSPACE, YSPACE, COMPONENT_GAP = 18, 20, 30


class _Box:
    """grandalf's vertex view: a size in, a center ``xy`` out."""

    __slots__ = ("h", "w", "xy")

    def __init__(self, w: float, h: float):
        self.w, self.h, self.xy = w, h, (0.0, 0.0)


class _Path:
    """grandalf's edge view: receives the routed polyline."""

    __slots__ = ("points",)

    def __init__(self):
        self.points: list = []

    def setpath(self, points) -> None:
        self.points = [tuple(p) for p in points]


class LevelLayout:
    """Box centers (origin top-left), edge polylines and the level's size."""

    def __init__(self, centers, paths, width: float, height: float):
        self.centers: list[tuple[float, float]] = centers
        self.paths: list[tuple[int, int, list]] = paths
        self.width, self.height = width, height


def _clip_ends(pts: list, src: _Box, dst: _Box) -> list:
    """Start the line at the bottom of its source box and end it at the top of its target, so
    the arrow head shows (grandalf routes center to center)."""
    if len(pts) < 2:
        return pts
    (x0, y0), (x1, y1) = pts[0], pts[-1]
    return [(x0, y0 + src.h / 2), *pts[1:-1], (x1, y1 - dst.h / 2)]


def _component(core) -> None:
    layout = SugiyamaLayout(core)
    layout.xspace, layout.yspace = XSPACE, YSPACE
    layout.init_all()
    layout.draw(N=2.5)


def layout_level(sizes: Sequence[tuple[float, float]],
                 edges: Sequence[tuple[int, int]]) -> LevelLayout:
    """Layout of boxes ``sizes`` (w, h) linked by ``edges`` (index pairs); components side by
    side, left to right in order of their first box. Big models repeat their blocks (every
    decoder layer is the same level), so equal levels are laid out once (the result is shared:
    read it, do not change it)."""
    return _layout_once(tuple(sizes), tuple(edges))


@lru_cache(maxsize=4096)
def _layout_once(sizes: tuple, edges: tuple) -> LevelLayout:
    verts = [Vertex(i) for i in range(len(sizes))]
    for v, (w, h) in zip(verts, sizes):
        v.view = _Box(w, h)
    links = [Edge(verts[a], verts[b]) for a, b in edges if a != b]
    for e in links:
        e.view = _Path()
    graph = Graph(verts, links)
    centers: list = [None] * len(sizes)
    paths, x0, height = [], 0.0, 0.0
    for comp in graph.C:
        members = sorted(comp.sV, key=lambda v: v.data)
        comp_edges = sorted(comp.sE, key=lambda e: (e.v[0].data, e.v[1].data))
        _component(comp)
        left = min(v.view.xy[0] - v.view.w / 2 for v in members)
        top = min(v.view.xy[1] - v.view.h / 2 for v in members)
        right = max(v.view.xy[0] + v.view.w / 2 for v in members)
        bottom = max(v.view.xy[1] + v.view.h / 2 for v in members)
        for v in members:
            centers[v.data] = (v.view.xy[0] - left + x0, v.view.xy[1] - top)
        for e in comp_edges:
            pts = [(x - left + x0, y - top) for x, y in e.view.points]
            paths.append((e.v[0].data, e.v[1].data, _clip_ends(pts, e.v[0].view, e.v[1].view)))
        x0 += right - left + COMPONENT_GAP
        height = max(height, bottom - top)
    return LevelLayout(centers, paths, max(x0 - COMPONENT_GAP, 0.0), height)
