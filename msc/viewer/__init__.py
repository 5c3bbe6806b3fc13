"""Pictures of an MSCGraph: a layered SVG, a self-contained HTML viewer with collapsible
groups and overlays, and Model Explorer's graph JSON (plus ``me_adapter``, msc's extension
for Model Explorer: ``model-explorer --extensions=msc.viewer.me_adapter``; imported only by
Model Explorer, so ``import msc`` never needs it).

    >>> from msc.viewer import EXPORTERS
    >>> sorted(EXPORTERS)
    ['.html', '.svg']

``EXPORTERS[ext](graph, weights, path)`` is the table ``msc export`` merges into its own.
"""

from __future__ import annotations

from .html import write_html
from .svg import write_svg

__all__ = ["EXPORTERS", "write_html", "write_svg"]

EXPORTERS = {".svg": write_svg, ".html": write_html}
