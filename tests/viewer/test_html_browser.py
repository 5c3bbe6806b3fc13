"""The HTML view of resnet50 in a real browser (headless Chromium): it opens offline, draws
one element per visible joint, expands groups, finds joints and colors overlays.

One browser session serves the whole module; each test reloads the page it needs.
"""

import json
import math
import os

import pytest

from msc.viewer import write_html
from msc.viewer.overlay import gradient_color, load_overlay
from msc.viewer.scene import FAMILY_COLORS, Scene
from msc.viewer.synthetic import decoder_graph
from tests.helpers.browser import browser_missing, open_page, start_chromium

_MISSING = browser_missing()
if _MISSING and os.environ.get("CI"):
    raise RuntimeError(f"the viewer tests need a browser under CI: {_MISSING}")
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=str(_MISSING))


@pytest.fixture(scope="module")
def driver():
    drv = start_chromium()
    yield drv
    drv.quit()


@pytest.fixture(scope="module")
def pages(resnet50, tmp_path_factory):
    """resnet50 as HTML, plain and with an overlay on three joints."""
    graph, weights = resnet50
    out = tmp_path_factory.mktemp("view")
    values = {"conv2d": 1.0, "conv2d_1": 4.0, "relu_3": 9.0}
    (out / "latency.json").write_text(json.dumps(values))
    overlay = load_overlay(str(out / "latency.json"), graph.node_names)
    return {"plain": write_html(graph, weights, str(out / "r50.html")),
            "overlay": write_html(graph, weights, str(out / "r50_ov.html"), overlay),
            "values": values, "scene": Scene.of(graph, weights)}


def _root_joints(scene):
    return sum(1 for item in scene.root.items if isinstance(item, int))


def _group_of(scene, name):
    index = next(i for i, rec in enumerate(scene.joints) if rec["name"] == name)
    return scene.joint_groups()[index]


def _fills(driver):
    return driver.execute_script(
        "const o = {}; document.querySelectorAll('g.joint').forEach(g => "
        "o[g.dataset.name] = g.querySelector('rect').getAttribute('fill')); return o;")


def test_page_opens_offline_and_draws(driver, pages):
    load_ms = open_page(driver, pages["plain"])
    assert load_ms > 0  # the page reports its draw; how fast is benchmarks/viewer.py's job
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    # everything is inline: the page fetched nothing, not even from disk
    assert driver.execute_script("return performance.getEntriesByType('resource').length") == 0
    shot = driver.get_screenshot_as_png()
    driver.get("data:text/html,<body></body>")
    blank = driver.get_screenshot_as_png()
    assert len(shot) > 5 * len(blank)  # boxes and text, not an empty page (PNG sizes)
    open_page(driver, pages["plain"])
    groups = driver.find_elements("css selector", "g.group")
    assert len(groups) == len([i for i in pages["scene"].root.items if not isinstance(i, int)])


def test_one_element_per_visible_joint_and_group_expands(driver, pages):
    open_page(driver, pages["plain"])
    scene = pages["scene"]
    joints = driver.find_elements("css selector", "g.joint")
    assert len(joints) == _root_joints(scene)
    group = _group_of(scene, "conv2d_1")
    assert driver.find_elements("css selector", "path.edge.x") == []  # one level: no curves
    box = driver.find_element("css selector", f'g.group[data-g="{group.gid}"]')
    box.click()
    # max_pool2d's block -> conv2d_1 and conv2d_4, relu_3 -> the next block: curves
    assert len(driver.find_elements("css selector", "path.edge.x")) == 3
    names = {e.get_attribute("data-name") for e in driver.find_elements("css selector", "g.joint")}
    inside = {scene.joints[i]["name"] for i in group.items if isinstance(i, int)}
    assert inside <= names and "conv2d_1" in names
    assert len(names) == _root_joints(scene) + len(inside)
    # the toggle redrew and timed itself (its speed is measured in benchmarks/viewer.py, not here)
    assert driver.execute_script("return mscView.lastToggleMs") >= 0
    # family colors: a conv joint is drawn in the conv color
    assert _fills(driver)["conv2d_1"] == FAMILY_COLORS["conv"]
    # clicking the frame's header collapses it again
    driver.find_element("css selector", f'g.cluster[data-g="{group.gid}"] text').click()
    assert len(driver.find_elements("css selector", "g.joint")) == _root_joints(scene)


def test_search_finds_a_joint_and_shows_its_details(driver, pages):
    open_page(driver, pages["plain"])
    box = driver.find_element("id", "search")
    box.send_keys("conv2d_52\n")
    hit = driver.find_elements("css selector", "g.joint.hit")
    assert [h.get_attribute("data-name") for h in hit] == ["conv2d_52"]
    panel = driver.find_element("id", "panel").text
    assert "conv2d_52" in panel and "nn.conv2d" in panel and "batch_norm_52" in panel
    assert "min" in panel  # weight statistics of its kernel
    view = driver.execute_script("return document.getElementById('canvas').getAttribute('viewBox')")
    x, y, w, h = map(float, view.split())
    cx, cy = driver.execute_script(
        "const r = document.querySelector('g.joint.hit rect').getBBox();"
        "const t = document.querySelector('g.joint.hit').transform.baseVal[0].matrix;"
        "return [t.e + r.width / 2, t.f + r.height / 2];")
    assert x < cx < x + w and y < cy < y + h  # the view moved onto the hit


def test_overlay_colors_the_joints_it_names(driver, pages):
    open_page(driver, pages["overlay"])
    for name in pages["values"]:
        driver.execute_script("mscView.reveal(mscView.search(arguments[0])[0]);", name)
    fills = _fills(driver)
    lo, hi = min(pages["values"].values()), max(pages["values"].values())
    for name, value in pages["values"].items():
        assert fills[name] == gradient_color((value - lo) / (hi - lo)), name
    others = {n: f for n, f in fills.items() if n not in pages["values"]}
    assert others and set(others.values()) == {"#ffffff"}
    assert "latency" in driver.find_element("id", "legend").text


def test_search_opens_nested_groups_of_a_big_graph(driver, tmp_path):
    graph = decoder_graph(120)  # 2,524 joints: layers/k inside blocks of layers
    page = write_html(graph, {}, str(tmp_path / "decoder.html"))
    assert open_page(driver, page) < 2000
    before = driver.execute_script("return mscView.visibleJoints()")
    driver.execute_script("mscView.search('layers.77.mlp.act')")
    hit = driver.find_elements("css selector", "g.joint.hit")
    assert [h.get_attribute("data-name") for h in hit] == ["layers.77.mlp.act"]
    # its block, its layer and its mlp scope are open: three nested frames around it
    frames = driver.execute_script("return document.querySelectorAll('g.cluster').length")
    assert frames == 3 and driver.execute_script("return mscView.visibleJoints()") > before
    assert driver.execute_script("return mscView.lastRenderMs") >= 0


@pytest.fixture(scope="module")
def vit_page(tmp_path_factory):
    """A transformers ViT (small config, random weights) from from_torch, as HTML."""
    from msc.frontends.translate import from_torch
    from tests.helpers.corpus import MODELS

    model, info, _ = MODELS["vit"]()
    graph, weights = from_torch(model, info, via="export")
    page = write_html(graph, weights, str(tmp_path_factory.mktemp("vit") / "vit.html"))
    return page, Scene.of(graph, weights)


def _texts(driver, css):
    return [e.get_attribute("textContent") for e in driver.find_elements("css selector", css)]


def test_vit_opens_grouped_by_its_modules(driver, vit_page):
    page, scene = vit_page
    assert open_page(driver, page) < 5000
    assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []
    titles = [t.split(" (")[0] for t in _texts(driver, "g.group title")]
    assert titles == [i.label for i in scene.root.items if not isinstance(i, int)]
    assert {"model/embeddings", "model/layers.0", "model/layers.1"} <= set(titles)


def test_search_into_a_nested_module_opens_its_groups(driver, vit_page):
    page, scene = vit_page
    open_page(driver, page)
    hits = driver.execute_script("return mscView.search('layers.1/attention/q_proj')")
    assert [scene.joints[i]["scope"] for i in hits] == ["model/layers.1/attention/q_proj"]
    hit = driver.find_elements("css selector", "g.joint.hit")
    assert [h.get_attribute("data-name") for h in hit] == [scene.joints[hits[0]]["name"]]
    # the layer and its attention are open around the hit: two frames, labelled by module
    frames = [t.rsplit(" (", 1)[0].lstrip("\u25BE ") for t in _texts(driver, "g.cluster text")]
    assert frames == ["model/layers.1", "attention"]
    assert "model/layers.1/attention/q_proj" in driver.find_element("id", "panel").text


@pytest.fixture(scope="module")
def error_page(tmp_path_factory):
    """A transformers EfficientNet exported to ONNX, with msc's Sigmoid converter broken on
    purpose inside the squeeze-excite gates (a ReLU there): `msc run --check --layerwise`
    writes the error overlay, `msc view --overlay` the page."""
    import warnings

    import torch

    from msc.cli.main import main
    from msc.frontends.onnx.common import unary
    from msc.frontends.onnx.opset import converter_table
    from msc.frontends.translate import from_onnx
    from tests.helpers.corpus import MODELS

    out = tmp_path_factory.mktemp("errors")
    model, _, inputs = MODELS["efficientnet"]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.from_numpy(inputs[0]),), str(out / "e.onnx"),
                          dynamo=False, input_names=["x"])
    table = converter_table()
    sigmoid, relu = table["Sigmoid"], unary("nn.relu")

    def broken(g, node):
        wrong = "squeeze_excite/act_expand" in node.name
        return (relu if wrong else sigmoid[max(sigmoid)])(g, node)

    table["Sigmoid"] = {1: broken}
    try:
        # the gates are near 0.5 either way on random weights: the logits still pass the
        # check (exit 0), and only the layer-wise compare sees the wrong gate
        main(["run", str(out / "e.onnx"), "--check", "--layerwise", str(out / "err.json")])
        assert main(["view", str(out / "e.onnx"), "--overlay", str(out / "err.json"), "-o",
                     str(out / "e.html"), "--no-open"]) == 0
        graph, _ = from_onnx(str(out / "e.onnx"))  # the graph the page shows
    finally:
        table["Sigmoid"] = sigmoid
    return str(out / "e.html"), graph, load_overlay(str(out / "err.json"), graph.node_names)


def test_the_first_divergence_opens_ringed_in_its_module(driver, error_page):
    page, graph, overlay = error_page
    assert overlay.focus == graph.sources[
        "/model/efficientnet/encoder/blocks.0/squeeze_excite/act_expand/Sigmoid"]
    assert open_page(driver, page) < 5000
    assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []
    ring = driver.find_elements("css selector", "g.joint.focus")
    assert [r.get_attribute("data-name") for r in ring] == [overlay.focus]
    # opened in its module: the frames around it are the modules of the squeeze
    frames = [t.rsplit(" (", 1)[0].lstrip("\u25BE ") for t in _texts(driver, "g.cluster text")]
    assert any("blocks.0" in f for f in frames) and any("squeeze_excite" in f for f in frames)
    panel = driver.find_element("id", "panel").text
    assert overlay.focus in panel and "max abs error vs onnxruntime" in panel
    fill = ring[0].find_element("css selector", "rect").get_attribute("fill")
    assert fill == gradient_color(overlay.position(overlay.focus))
    # errors span decades: a log legend with a tick per decade between its ends
    legend = driver.find_element("id", "legend")
    assert "(log)" in legend.text and overlay.scale == "log"
    ticks = driver.execute_script("return document.querySelectorAll('#legend .bar i').length")
    lo, hi = overlay.floor, overlay.hi
    e0, e1 = math.ceil(math.log10(lo)), math.floor(math.log10(hi))
    assert e1 - e0 >= 2 and ticks == len(range(e0, e1 + 1, math.ceil((e1 - e0 + 1) / 5)))
