"""The HTML page's data (without a browser): every joint once, edges per group, escaping."""

import json
import re
import xml.etree.ElementTree as ET

from msc.graph import MSCGraph, MSCJoint, MSCTensor
from msc.viewer.html import page_data, render_html
from msc.viewer.scene import Scene
from msc.viewer.svg import render_svg
from msc.viewer.synthetic import decoder_graph

HOSTILE = ["x", '</script><img src=x onerror="alert(1)">', "a&b<!--c", "layer.0.q'\"", "out"]


def _hostile_graph() -> MSCGraph:
    joints = []
    for i, name in enumerate(HOSTILE):
        out = MSCTensor(f"{name}:0", "float32", "NC", [1, 4])
        inputs = [(joints[-1], 0)] if joints else []
        joints.append(MSCJoint(i, name, "", "input" if not i else "nn.relu", {}, inputs, [out]))
    return MSCGraph("g<1>", joints, [f"{HOSTILE[0]}:0"], [f"{HOSTILE[-1]}:0"])


def test_every_joint_is_in_exactly_one_group_and_edges_stay_inside_levels():
    graph = decoder_graph(30)
    data = page_data(Scene.of(graph))
    listed = sorted(i for g in data["groups"] for i in g["items"] if i >= 0)
    assert listed == list(range(len(graph.node_names)))
    for gid, group in enumerate(data["groups"]):
        for a, b in group["edges"]:
            assert 0 <= a < len(group["items"]) and 0 <= b < len(group["items"]) and a != b
        for item in group["items"]:
            if item < 0:
                assert data["groups"][-1 - item]["parent"] == gid
    # a joint edge lands in exactly one level: no more level edges than joint edges
    assert sum(len(g["edges"]) for g in data["groups"]) <= sum(
        len(j.parents) for j in graph.get_nodes())


def test_hostile_names_stay_data():
    graph = _hostile_graph()
    page = render_html(Scene.of(graph))
    assert page.count("</script>") == 3  # data, dagre, viewer: no name closes a script
    assert "<img" not in page and "<!--c" not in page
    raw = re.search(r'id="msc-data">(.*?)</script>', page, re.DOTALL).group(1)
    assert [j["name"] for j in json.loads(raw)["joints"]] == HOSTILE
    assert "<title>msc: g&lt;1&gt;</title>" in page
    svg = ET.fromstring(render_svg(Scene.of(graph)))
    names = [g.get("data-name") for g in svg.iter("{http://www.w3.org/2000/svg}g")
             if g.get("class") == "joint"]
    assert names == HOSTILE
