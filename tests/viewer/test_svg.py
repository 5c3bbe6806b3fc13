"""The SVG: valid XML, one node element per joint, labels and family colors."""

import xml.etree.ElementTree as ET

from msc.viewer import EXPORTERS, write_svg
from msc.viewer.overlay import Overlay
from msc.viewer.scene import FAMILY_COLORS

NS = "{http://www.w3.org/2000/svg}"


def _joints(path):
    root = ET.parse(path).getroot()
    return {g.get("data-name"): g for g in root.iter(NS + "g")
            if g.get("class", "").split()[:1] == ["joint"]}


def test_resnet50_svg_has_one_node_per_joint(resnet50, tmp_path):
    graph, weights = resnet50
    path = EXPORTERS[".svg"](graph, weights, str(tmp_path / "r50.svg"))
    joints = _joints(path)
    assert sorted(joints) == sorted(graph.node_names)
    conv = joints["conv2d"]
    texts = [t.text for t in conv.iter(NS + "text")]
    assert texts == ["conv2d", "nn.conv2d", "1x64x112x112 float32 NCHW"]
    assert conv.find(NS + "rect").get("fill") == FAMILY_COLORS["conv"]
    assert joints["add"].find(NS + "rect").get("fill") == FAMILY_COLORS["binary"]
    # every producer -> consumer link is drawn once (inside a group or from group to group)
    root = ET.parse(path).getroot()
    edges = [e for e in root.iter(NS + "path") if e.get("class") == "edge"]
    assert len(edges) == len({(p.name, j.name) for j in graph.get_nodes() for p in j.parents})
    # top to bottom: a consumer is drawn below its producer
    def top(name):
        return float(joints[name].find(NS + "rect").get("y"))
    assert top("gpu_0_data_0") < top("conv2d") < top("relu") < top("conv2d_1")


def test_svg_overlay_colors(resnet50, tmp_path):
    graph, weights = resnet50
    overlay = Overlay("density", {"conv2d": 0.25, "conv2d_1": 0.75})
    joints = _joints(write_svg(graph, weights, str(tmp_path / "o.svg"), overlay))
    assert joints["conv2d"].find(NS + "rect").get("fill") == overlay.color("conv2d")
    assert joints["conv2d_1"].find(NS + "rect").get("fill") == overlay.color("conv2d_1")
    assert joints["relu"].find(NS + "rect").get("fill") == "#ffffff"
    assert "density=0.75" in joints["conv2d_1"].find(NS + "title").text


def test_svg_rings_the_overlay_focus(resnet50, tmp_path):
    graph, weights = resnet50
    overlay = Overlay("err", {"conv2d": 1e-7, "relu": 0.2}, group="max", focus="relu")
    joints = _joints(write_svg(graph, weights, str(tmp_path / "f.svg"), overlay))
    assert joints["relu"].get("class") == "joint focus"
    assert {j.get("class") for n, j in joints.items() if n != "relu"} == {"joint"}
