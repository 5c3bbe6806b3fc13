"""msc inside Model Explorer (issue #29 goal 3): the adapter extension on the real
``ai-edge-model-explorer`` package, its convert called directly and through Model Explorer's
own server (started headless on a free local port), which a headless Chromium opens.

One server serves the module; it runs as Model Explorer's own command line would start it.
"""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import model_explorer  # a test dependency (pyproject.toml): the real package, never a stand-in
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from msc.cli.loaders import load_model
from msc.errors import SerializationError
from msc.viewer.me_adapter import ADAPTER_ID, PROVIDER_ID, overlay_beside, overlay_node_data
from msc.viewer.me_adapter.main import MSCAdapter, MSCOverlayProvider
from msc.viewer.model_explorer import graph_collection
from msc.viewer.overlay import GRADIENT
from msc.viewer.scene import Scene
from tests.helpers.browser import browser_missing, start_chromium

EXTENSION = "msc.viewer.me_adapter"
# torch's exporter names nodes by module path: the scopes the adapter turns into namespaces
BLOCKS = ("layer1/layer1.0", "layer1/layer1.1", "layer2/layer2.0")


def _scoped_onnx(path) -> str:
    """Three conv blocks (Conv -> Relu -> Add residual) named the way torch's exporter names
    the nodes of a ResNet (``/layer1/layer1.0/conv1/Conv``)."""
    rng, nodes, inits, x = np.random.default_rng(0), [], [], "x"
    for k, block in enumerate(BLOCKS):
        w = numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype("float32"), f"w{k}")
        inits.append(w)
        nodes += [helper.make_node("Conv", [x, w.name], [f"c{k}"], pads=[1, 1, 1, 1],
                                   name=f"/{block}/conv1/Conv"),
                  helper.make_node("Relu", [f"c{k}"], [f"r{k}"], name=f"/{block}/relu/Relu"),
                  helper.make_node("Add", [x, f"r{k}"], [f"y{k}"], name=f"/{block}/Add")]
        x = f"y{k}"
    graph = helper.make_graph(
        nodes, "scoped", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 4, 8, 8])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                ir_version=8), str(path))
    return str(path)


# TVMScript as TVM prints it, with msc's scope attr: the adapter parses it (never executes it)
SCRIPT = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 8), "float32")) -> R.Tensor((1, 8), "float32"):
        R.func_attr({"msc_scopes": {"lv": "encoder/mlp", "lv1": "encoder/mlp", "gv": "head"}})
        with R.dataflow():
            lv = R.nn.relu(x)
            lv1 = R.add(lv, lv)
            gv = R.multiply(lv1, lv1)
            R.output(gv)
        return gv
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory, resnet50):
    out = tmp_path_factory.mktemp("me")
    scoped = _scoped_onnx(out / "scoped.onnx")
    graph, _ = resnet50
    graph.to_json(str(out / "resnet50.json"))
    (out / "scoped.py").write_text(SCRIPT)
    return {"onnx": scoped, "json": str(out / "resnet50.json"), "py": str(out / "scoped.py")}


def _expected(path):
    """Joint name -> (optype, namespace, producers) of msc's own graph of ``path``."""
    graph, weights = load_model(path)
    scene = Scene.of(graph, weights)
    owners = scene.joint_groups()
    # "/" separates Model Explorer's layers: a merged group label "layer2/layer2.0" stays one
    return {rec["name"]: (rec["optype"], "/".join(label.replace("/", ".") for label in
                                                  scene.namespace(i, owners)),
                          [scene.joints[p]["name"] for p, _ in rec["in_edges"]])
            for i, rec in enumerate(scene.joints)}


def _seen(graph: dict):
    return {n["id"]: (n["label"], n["namespace"], [e["sourceNodeId"] for e in n["incomingEdges"]])
            for n in graph["nodes"]}


def test_convert_onnx_with_scopes_gives_msc_graph_and_module_namespaces(models):
    result = MSCAdapter().convert(models["onnx"], {})
    graphs = result["graphs"]
    assert len(graphs) == 1 and isinstance(graphs[0], model_explorer.graph_builder.Graph)
    data = model_explorer.utils.convert_adapter_response(result)["graphs"][0]
    assert _seen(data) == _expected(models["onnx"])
    spaces = {n["namespace"] for n in data["nodes"] if n["label"] == "nn.conv2d"}
    # layer2 holds one block only: its level merges into one group "layer2/layer2.0"
    assert spaces == {"layer1/layer1.0", "layer1/layer1.1", "layer2.layer2.0"}
    conv = next(n for n in graphs[0].nodes if n.namespace == "layer2.layer2.0")
    meta = {kv.key: kv.value for kv in conv.outputsMetadata[0].attrs}
    assert meta["shape"] == "float32[1, 4, 8, 8]" and meta["layout"] == "NCHW"


def test_convert_msc_json_matches_the_graph(models):
    data = model_explorer.utils.convert_adapter_response(
        MSCAdapter().convert(models["json"], {}))["graphs"][0]
    expected = _expected(models["json"])
    assert _seen(data) == expected and len(expected) == 230
    # field by field what the exporter writes (Model Explorer's unset fields aside)
    graph, weights = load_model(models["json"])
    assert model_explorer.utils.remove_none(data) == \
        graph_collection(Scene.of(graph, weights))["graphs"][0]
    attrs = {kv["key"]: kv["value"] for kv in
             next(n for n in data["nodes"] if n["id"] == "conv2d_1")["attrs"]}
    joint = load_model(models["json"])[0].find_node("conv2d_1")
    assert attrs["optype"] == "nn.conv2d" and len(joint.attrs) > 3
    assert {k: attrs[k] for k in joint.attrs} == {k: str(v) for k, v in joint.attrs.items()}


def test_convert_tvmscript_namespaces_from_msc_scopes(models):
    data = model_explorer.utils.convert_adapter_response(
        MSCAdapter().convert(models["py"], {}))["graphs"][0]
    assert _seen(data) == _expected(models["py"])
    assert {n["id"]: n["namespace"] for n in data["nodes"]} == \
        {"x": "", "relu": "encoder.mlp", "add": "encoder.mlp", "multiply": ""}


def test_overlay_beside_the_model_becomes_node_data(models, tmp_path):
    path = str(tmp_path / "scoped.onnx")
    _scoped_onnx(path)
    graph, _ = load_model(path)
    # keys: one joint name and one ONNX node name (found through graph.sources)
    values = {graph.node_names[1]: 1e-6, "/layer2/layer2.0/Add": 0.1}
    with open(overlay_beside(path), "w") as f:
        json.dump({"title": "err", "values": values}, f)
    provider = MSCOverlayProvider()
    editors = provider.get_config_editors(PROVIDER_ID).configEditors
    assert [e.id for e in editors] == ["overlay"]
    out = provider.run(PROVIDER_ID, path, graph.name, {}, None)
    assert out.error == "" and isinstance(out.result, model_explorer.node_data_builder.GraphNodeData)
    results = {k: (r.value, r.bgColor) for k, r in out.result.results.items()}
    add = graph.sources["/layer2/layer2.0/Add"]
    assert results == {graph.node_names[1]: (1e-6, GRADIENT[0]), add: (0.1, GRADIENT[-1])}
    missing = provider.run(PROVIDER_ID, path, graph.name, {"overlay": str(tmp_path / "no.json")},
                           None)
    assert missing.result is None and "no.json" in missing.error
    with pytest.raises(SerializationError, match="beside the model"):
        overlay_node_data(str(tmp_path / "other.onnx"))


# --------------------------------------------------------------------------------------------
# Model Explorer's own server with msc's extension, as `model-explorer --extensions=...`


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    """``http://127.0.0.1:PORT`` of Model Explorer's server, started by its command line."""
    port = _free_port()
    exe = os.path.join(os.path.dirname(sys.executable), "model-explorer")
    proc = subprocess.Popen([exe, f"--extensions={EXTENSION}", "--host=127.0.0.1",
                             f"--port={port}", "--no_open_in_browser"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:  # it prints the loaded extensions, then its address
        lines.append(line)
        if "http://127.0.0.1" in line:
            break
    if proc.poll() is not None:
        raise RuntimeError("model-explorer did not start:\n" + "".join(lines))
    yield f"http://127.0.0.1:{port}", "".join(lines)
    proc.terminate()
    proc.wait(timeout=10)


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def test_server_loads_the_extension_and_converts_with_msc(server, models):
    base, log = server
    assert "msc adapter" in log and "Failed to load" not in log
    with urllib.request.urlopen(base + "/api/v1/get_extensions", timeout=30) as resp:
        exts = {e["id"]: e for e in json.loads(resp.read())}
    assert exts[ADAPTER_ID]["type"] == "adapter" and "onnx" in exts[ADAPTER_ID]["fileExts"]
    assert exts[PROVIDER_ID]["type"] == "node_data_provider"
    # the command Model Explorer's page sends to convert a model with a chosen adapter
    resp = _post(base + "/apipost/v1/send_command",
                 {"extensionId": ADAPTER_ID, "cmdId": "convert", "modelPath": models["onnx"],
                  "settings": {}, "deleteAfterConversion": False})
    assert "error" not in resp, resp
    assert _seen(resp["graphs"][0]) == _expected(models["onnx"])
    bad = _post(base + "/apipost/v1/send_command",
                {"extensionId": ADAPTER_ID, "cmdId": "convert", "modelPath": "/no/such.onnx",
                 "settings": {}, "deleteAfterConversion": False})
    assert "such.onnx" in bad["error"]  # msc's error, naming the file, shown by the page


_MISSING = browser_missing()
if _MISSING and os.environ.get("CI"):
    raise RuntimeError(f"the Model Explorer browser test needs a browser under CI: {_MISSING}")


@pytest.mark.skipif(bool(_MISSING), reason=str(_MISSING))
def test_page_draws_msc_graph_through_the_adapter(server, models):
    """The page asks the server to convert the model with msc's adapter and draws it."""
    base, _ = server
    config = model_explorer.config()
    config.add_model_from_path(models["onnx"], adapterId=ADAPTER_ID)
    joints = len(_expected(models["onnx"]))
    driver = start_chromium()
    try:
        driver.get(f"{base}/?data={config.to_url_param_value()}")
        text, end = "", time.monotonic() + 60
        while time.monotonic() < end and f"{joints} nodes" not in text:
            time.sleep(0.1)
            text = driver.execute_script("return document.body ? document.body.innerText : ''")
        assert f"{joints} nodes" in text, text[:500]
        assert driver.execute_script("return document.querySelectorAll('canvas').length") > 0
        errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    finally:
        driver.quit()
    # offline, only the web fonts Model Explorer links from Google's servers fail to load
    assert [e for e in errors if urllib.parse.urlsplit(e.split()[0]).hostname
            in (None, "127.0.0.1", "localhost")] == []
