"""`msc run --check --layerwise`: every intermediate tensor of an ONNX model against
onnxruntime, and the first node whose outputs differ while its inputs agree."""

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from msc.cli.main import main
from msc.frontends.onnx.converters_elementwise import unary
from msc.frontends.onnx.opset import converter_table


def _model(path) -> str:
    """x -> Conv -> Sigmoid (node "gate") -> Mul x -> Relu -> Add: every value is compared."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c"], ["s"], name="gate"),
             helper.make_node("Mul", ["s", "x"], ["m"], name="mul"),
             helper.make_node("Relu", ["m"], ["r"], name="relu"),
             helper.make_node("Add", ["r", "c"], ["y"], name="add")]
    info = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "gated", [info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [info("y", TensorProto.FLOAT, [1, 4, 8, 8])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


def test_every_node_agrees_on_a_correct_conversion(tmp_path, capsys):
    errors = tmp_path / "errors.json"
    assert main(["run", _model(tmp_path / "m.onnx"), "--check", "--layerwise", str(errors)]) == 0
    out = capsys.readouterr().out
    assert "layerwise: 5 nodes compared" in out and "every node agrees" in out
    written = json.loads(errors.read_text())  # an overlay of the graph `msc view` shows
    assert written["group"] == "max" and "focus" not in written
    assert set(written["values"]) == {"conv2d", "sigmoid", "multiply", "relu", "add"}
    assert max(written["values"].values()) < 1e-4


def test_the_errors_file_is_an_overlay_that_rings_the_first_divergence(tmp_path, capsys,
                                                                       monkeypatch):
    from msc.frontends.translate import from_onnx
    from msc.viewer.overlay import load_overlay

    monkeypatch.setitem(converter_table(), "Sigmoid", {1: unary("nn.relu")})
    model, errors = _model(tmp_path / "m.onnx"), tmp_path / "errors.json"
    assert main(["run", model, "--check", "--layerwise", str(errors)]) == 1
    graph, _ = from_onnx(model)
    overlay = load_overlay(str(errors), graph.node_names)
    assert overlay.focus == graph.sources["gate"] == "relu"  # the broken Sigmoid's joint
    assert overlay.scale == "log" and overlay.title == "max abs error vs onnxruntime"
    assert overlay.values["conv2d"] < 1e-4 and overlay.values["relu"] > 0.1
    assert overlay.position("conv2d") < 0.5 < overlay.position("relu")
    page = tmp_path / "m.html"
    assert main(["view", model, "--overlay", str(errors), "-o", str(page), "--no-open"]) == 0
    assert '"focus":"relu"' in page.read_text()


def test_a_wrong_converter_is_named_as_the_first_divergence(tmp_path, capsys, monkeypatch):
    # Sigmoid converted as ReLU: every later node differs too, but only "gate" has inputs
    # that agree
    monkeypatch.setitem(converter_table(), "Sigmoid", {1: unary("nn.relu")})
    model = _model(tmp_path / "m.onnx")
    assert main(["run", model, "--check", "--layerwise", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)["layerwise"]
    assert report["first"]["node"] == "gate" and report["first"]["op"] == "Sigmoid"
    assert report["first"]["inputs_ok"] and not report["first"]["ok"]
    assert [r["node"] for r in report["nodes"] if not r["ok"]] == ["gate", "mul", "relu", "add"]
    assert report["errors"]["c"] < 1e-4 and report["errors"]["s"] > 0.1
    assert main(["run", model, "--check", "--layerwise"]) == 1
    assert "first divergence: node 'gate' (Sigmoid)" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--layerwise"], ["--check", "--layerwise", "x.json"]])
def test_layerwise_needs_check_and_an_onnx_model(tmp_path, capsys, argv):
    model = _model(tmp_path / "m.onnx")
    if "x.json" in argv:
        json_model = tmp_path / "g.json"
        assert main(["export", model, "-o", str(json_model)]) == 0
        model = str(json_model)
    assert main(["run", model, *argv]) == 2
    assert "--layerwise compares an ONNX model" in capsys.readouterr().err


TORCH_NET = '''
import torch
from torch import nn


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 4, 1)).eval()
'''


def test_torch_layerwise_names_the_fx_node_of_a_wrong_converter(tmp_path, capsys, monkeypatch):
    from torch import nn

    from msc.frontends.torch import convert_elementwise
    from msc.frontends.torch.converters import MODULES

    path = tmp_path / "net.py"
    path.write_text(TORCH_NET)
    argv = ["run", f"{path}:make_model", "--input-info", "x:1,3,8,8", "--check", "--layerwise"]
    assert main(argv) == 0
    assert "4 nodes compared with torch" in capsys.readouterr().out
    monkeypatch.setitem(MODULES, nn.ReLU, (convert_elementwise.FUNCTIONS["sigmoid"], None))
    assert main([*argv, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)["layerwise"]
    assert report["reference"] == "torch" and report["first"]["op"] == "module 2"
    assert [r["ok"] for r in report["nodes"]] == [True, True, False, False]
