"""Demo step: graphs as pictures (``step_view``, run by ``msc demo``: tour.py)."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

from .shared import banner


def step_view(out: str) -> None:
    """A 2,100-joint decoder as a collapsible HTML page, an SVG and Model Explorer JSON."""
    from ..viewer import write_html, write_svg
    from ..viewer.model_explorer import write_model_explorer
    from ..viewer.overlay import Overlay
    from ..viewer.scene import Scene
    from ..viewer.synthetic import decoder_graph

    graph = decoder_graph(100)
    scene = Scene.of(graph)
    banner(f"msc view: {len(graph.node_names)} joints -> groups by module path")
    top = [item.label for item in scene.root.items if not isinstance(item, int)]
    print(f"{len(scene.groups()) - 1} groups; the page opens on {len(scene.root.items)} boxes: "
          f"{', '.join(top[:4])}, ...")
    # an overlay is any {joint: number}: here, each linear layer's weight count
    params = {j.name: float(j.weight_at("weight").get_size()) for j in graph.get_nodes()
              if j.optype == "msc.linear"}
    overlay = Overlay("params", params)
    html = write_html(graph, {}, os.path.join(out, "decoder.html"), overlay)
    svg = write_svg(graph, {}, os.path.join(out, "decoder.svg"))
    me = write_model_explorer(graph, {}, os.path.join(out, "decoder_me.json"), overlay)
    drawn = sum(1 for g in ET.parse(svg).getroot().iter("{http://www.w3.org/2000/svg}g")
                if g.get("class") == "joint")
    if drawn != len(graph.node_names):
        raise SystemExit(f"the SVG draws {drawn} joints, the graph has {len(graph.node_names)}")
    print(f"wrote {html} (open it in a browser: search, click, expand), {svg} ({drawn} joints), "
          f"{', '.join(me)} (model-explorer {me[0]} --node_data_paths={me[1]})")
