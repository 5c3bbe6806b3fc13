"""``msc quantize`` (msc/cli/cmd_quantize.py): files written, QDQ graph reloads and runs,
calibration .npz cut into batches, existing outputs kept unless --force."""

import argparse
import json

import numpy as np
import pytest
import torch

from msc.cli.cmd_quantize import COMMAND, calibration_batches
from msc.cli.loaders import load_model
from msc.codegen.files import save_npz
from msc.compression.quantize import load_plan
from msc.compression.quantize.runner import make_runner
from msc.errors import SerializationError, ValidationError
from msc.frontends import translate


def _parse(argv):
    parser = argparse.ArgumentParser()
    COMMAND[1](parser)
    return parser.parse_args(argv)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("quant_cli")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 5)).eval()
    graph, weights = translate.from_torch(model, [([2, 3, 8, 8], "float32")])
    graph.to_json(str(folder / "net.json"))
    save_npz(folder / "net.npz", weights)
    x = np.random.default_rng(0).standard_normal((8, 3, 8, 8)).astype("float32")
    np.savez(folder / "calib.npz", inp_0=x)
    return folder, model, x


def test_quantize_command_writes_a_runnable_qdq_graph(files, capsys):
    folder, model, x = files
    out = folder / "out" / "net_int8.json"
    args = _parse([str(folder / "net.json"), "--calib", str(folder / "calib.npz"),
                   "--method", "percentile", "-o", str(out)])
    assert COMMAND[2](args) == 0
    printed = capsys.readouterr().out
    assert "suggested excludes" in printed and "net_int8.report.json" in printed
    graph, weights = load_model(str(out))
    # the conv's and the linear's inputs, and the conv's output after its relu (default)
    assert graph.inspect()["nodes"]["quantize"] == 3
    got = make_runner(graph, weights)([x[:2]])[graph.output_names[0]]
    ref = model(torch.from_numpy(x[:2])).detach().numpy()
    assert 10 * np.log10((ref ** 2).sum() / ((ref - got) ** 2).sum()) > 30
    report = json.loads((folder / "out" / "net_int8.report.json").read_text())
    assert report["config"]["batches"] == 4 and len(report["layers"]) == 2
    assert set(load_plan(str(folder / "out" / "net_int8.plan.json"))) == set(report["plan"])
    with pytest.raises(SerializationError, match="exists"):
        COMMAND[2](args)


def test_quantize_command_smooths_the_linear(files, capsys):
    folder, model, x = files
    out = folder / "smooth" / "net_int8.json"
    args = _parse([str(folder / "net.json"), "--calib", str(folder / "calib.npz"),
                   "--smooth", "0.5", "--no-per-layer", "-o", str(out)])
    assert COMMAND[2](args) == 0
    assert "SmoothQuant alpha 0.5 on 1 linear input(s)" in capsys.readouterr().out
    graph, weights = load_model(str(out))
    got = make_runner(graph, weights)([x[:2]])[graph.output_names[0]]
    ref = model(torch.from_numpy(x[:2])).detach().numpy()
    assert 10 * np.log10((ref ** 2).sum() / ((ref - got) ** 2).sum()) > 30
    with pytest.raises(SystemExit):
        _parse([str(folder / "net.json"), "--calib", "c.npz", "--smooth", "most", "-o", "o"])


def test_calibration_batches_follow_the_input_batch(files):
    folder, _, x = files
    graph, _ = load_model(str(folder / "net.json"))
    batches = calibration_batches(graph, {"arr_0": x[:7]})
    assert [b["inp_0"].shape[0] for b in batches] == [2, 2, 2]
    np.testing.assert_array_equal(batches[1]["inp_0"], x[2:4])
    with pytest.raises(ValidationError, match="stack samples along axis 0"):
        calibration_batches(graph, {"inp_0": x[:, :2]})


def test_weight_only_int4_writes_packed_weights_and_a_report(files, capsys):
    """--weight-only int4: the linear becomes a matmul_nbits on uint8 codes in the .npz, the
    graph reloads and runs, and the report carries the held-out logits SQNR."""
    folder, model, x = files
    out = folder / "wo" / "net_int4.json"
    args = _parse([str(folder / "net.json"), "--calib", str(folder / "calib.npz"),
                   "--weight-only", "int4", "--group-size", "32", "--asym", "--awq",
                   "--eval", str(folder / "calib.npz"), "-o", str(out)])
    assert COMMAND[2](args) == 0
    assert "top-1 agreement" in capsys.readouterr().out
    graph, weights = load_model(str(out))
    node = next(n for n in graph.get_nodes() if n.optype == "matmul_nbits")
    assert weights[node.weights["weight"].name].dtype == np.uint8
    got = make_runner(graph, weights)([x[:2]])[graph.output_names[0]]
    ref = model(torch.from_numpy(x[:2])).detach().numpy()
    assert 10 * np.log10((ref ** 2).sum() / ((ref - got) ** 2).sum()) > 15
    report = json.loads((folder / "wo" / "net_int4.report.json").read_text())
    assert report["config"]["method"] == "awq" and report["output"]["items"] == 4
    plan = json.loads((folder / "wo" / "net_int4.plan.json").read_text())
    assert plan == report["plan"] and len(plan) == 1  # keyed by the linear joint replaced
