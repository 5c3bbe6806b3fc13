"""`msc inspect` / `export` / `diff` on real models: the onnx light zoo (squeezenet, resnet50),
a torch model file and a TVMScript file."""

import json

import numpy as np
import pytest

from msc.cli.main import main
from tests.helpers.cli_models import light, onnx_weight_count, torch_file, tvmscript_file


def _json_out(capsys, argv) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name, convs", [("squeezenet", 26), ("resnet50", 53)])
def test_inspect_light_zoo(capsys, name, convs):
    summary = _json_out(capsys, ["inspect", light(name), "--json"])
    count = onnx_weight_count(light(name))  # counted on the ONNX file, not by msc
    assert summary["params"]["count"] == count
    assert summary["params"]["bytes"] == 4 * count  # all float32
    assert summary["inputs"][0]["shape"] == [1, 3, 224, 224]
    assert summary["layouts"]["tensors"]["NCHW"] > 10
    assert summary["layouts"]["weights"]["OIHW"] == convs
    nodes = summary["nodes"]
    assert nodes.get("msc.conv2d_bias", 0) + nodes.get("nn.conv2d", 0) == convs


def test_inspect_text_resnet50(capsys):
    assert main(["inspect", light("resnet50")]) == 0
    out = capsys.readouterr().out
    assert "params   25,610,152 in 267 weights, 97.7 MB (float32)" in out
    assert "input    gpu_0_data_0  [1, 3, 224, 224]  float32  NCHW" in out
    assert "nn.conv2d 53" in out


def test_export_resnet50_prototxt_and_dot(tmp_path, capsys):
    for ext, marker in ((".prototxt", "layer {"), (".dot", "digraph")):
        out = tmp_path / f"resnet50{ext}"
        assert main(["export", light("resnet50"), "-o", str(out)]) == 0
        text = out.read_text()
        assert marker in text and "gpu_0_data_0" in text
    assert "(230 joints)" in capsys.readouterr().out


def test_export_json_writes_weights_and_round_trips(tmp_path, capsys):
    out = tmp_path / "squeezenet.json"
    assert main(["export", light("squeezenet"), "-o", str(out)]) == 0
    assert "squeezenet.npz" in capsys.readouterr().out
    with np.load(tmp_path / "squeezenet.npz") as data:
        assert sum(data[k].size for k in data.files) == onnx_weight_count(light("squeezenet"))
    # the exported graph is the ONNX import, joint for joint
    assert main(["diff", light("squeezenet"), str(out)]) == 0
    assert "identical structure: 0 added, 0 removed, 0 changed" in capsys.readouterr().out
    # the .npz is an output too: never replaced without --force
    (tmp_path / "other.npz").write_text("keep")
    assert main(["export", light("squeezenet"), "-o", str(tmp_path / "other.json")]) == 2
    assert "other.npz: output file exists" in capsys.readouterr().err
    assert (tmp_path / "other.npz").read_text() == "keep"


def test_torch_model_file(tmp_path, capsys):
    spec = torch_file(tmp_path) + ":make_model"
    summary = _json_out(capsys, ["inspect", spec, "--input-info", "x:N,3,16,16:float32",
                                  "--json"])
    assert summary["inputs"] == [{"name": "x", "shape": ["N", 3, 16, 16], "dtype": "float32",
                                  "layout": "NCHW"}]
    assert summary["params"]["count"] == 8 * 3 * 9 + 8 + 4 * 8 + 10 * 8 + 10  # torch's numel
    assert summary["nodes"]["msc.conv2d_bias"] == 1
    out = tmp_path / "net.prototxt"
    assert main(["export", spec, "--input-info", "x:1,3,16,16", "-o", str(out)]) == 0
    assert "conv.weight" in out.read_text()  # torch state_dict keys name the weights


def test_tvmscript_file_inspect_and_export(tmp_path, capsys):
    script = tvmscript_file(tmp_path)
    summary = _json_out(capsys, ["inspect", script, "--json"])
    assert summary["nodes"] == {"total": 2, "input": 1, "nn.relu": 1}
    assert summary["params"] == {"weights": 0, "count": 0, "bytes": 0, "dtypes": {}}
    assert main(["export", script, "-o", str(tmp_path / "relu.json")]) == 0
    assert not (tmp_path / "relu.npz").exists()  # no weights, no weights file
    assert main(["diff", script, str(tmp_path / "relu.json")]) == 0


def test_diff_onnx_and_torch_import_of_the_same_net(tmp_path, capsys):
    """Names differ between the two imports (x / inp_0, mean / adaptive_avg_pool2d): the joints
    still pair by place, and the real differences are named."""
    from tests.helpers.cli_models import cnn_onnx

    onnx_path = cnn_onnx(tmp_path / "cnn.onnx")
    spec = torch_file(tmp_path) + ":make_cnn"
    result = _json_diff(capsys, ["diff", onnx_path, spec, "--input-info-b", "x:N,3,8,8",
                                 "--json"])
    assert result["summary"] == {"matched": 7, "added": 0, "removed": 0, "changed": 5,
                                 "renamed": 2}
    assert {"a": "x", "b": "inp_0"} in result["renamed"]
    pool = next(c for c in result["changed"] if c["a"] == "mean")
    assert pool["b"] == "adaptive_avg_pool2d"
    assert {"what": "optype", "a": "mean", "b": "nn.adaptive_avg_pool2d"} in pool["changes"]
    # the same torch net against itself (names and all): identical, exit 0
    assert main(["diff", spec, spec, "--input-info-a", "x:N,3,8,8", "--input-info-b",
                 "x:N,3,8,8", "--brief"]) == 0
    assert capsys.readouterr().out == ("identical structure: 0 added, 0 removed, 0 changed, "
                                       "0 renamed (7 joints paired)\n")


def _json_diff(capsys, argv) -> dict:
    assert main(argv) == 1  # the graphs differ
    return json.loads(capsys.readouterr().out)


def test_prune_and_view_take_a_torch_model_file(tmp_path, capsys):
    # every command that reads a MODEL takes the torch form, with --input-info
    spec = torch_file(tmp_path) + ":make_cnn"
    info = ["--input-info", "x:1,3,16,16:float32"]
    small = tmp_path / "small.json"
    assert main(["prune", spec, *info, "--density", "0.5", "--stride", "2", "--no-latency",
                 "-o", str(small), "-q"]) == 0
    assert "report" in capsys.readouterr().out.lower()
    before = _json_out(capsys, ["inspect", spec, *info, "--json"])["params"]["count"]
    after = _json_out(capsys, ["inspect", str(small), "--json"])["params"]["count"]
    assert after < before
    page = tmp_path / "net.html"
    assert main(["view", spec, *info, "--no-open", "-o", str(page)]) == 0
    assert page.read_text().count("conv2d") >= 2
    assert main(["view", spec, "--no-open", "-o", str(tmp_path / "x.html")]) == 2
    assert "input-info" in capsys.readouterr().err
