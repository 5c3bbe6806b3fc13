"""`msc bench --profile`: the per-joint table, and a JSON overlay `msc view` draws."""

import json

import pytest

from msc.cli.main import main
from msc.frontends import translate
from msc.viewer.overlay import load_overlay
from tests.helpers.cli_models import cnn_onnx


def test_bench_profile_table_and_overlay_json(tmp_path, capsys):
    model = cnn_onnx(tmp_path / "cnn.onnx")
    out_json = tmp_path / "out" / "profile.json"
    assert main(["bench", model, "--dim", "N=1", "--repeat", "2", "--min-time", "0",
                 "--profile-json", str(out_json)]) == 0
    text = capsys.readouterr().out
    table = text[text.index("profile of msc"):].splitlines()
    assert table[1].split()[:3] == ["joint", "ms", "share"]
    written = json.loads(out_json.read_text())
    values = written["values"]
    assert (written["title"], written["group"]) == ("ms per run", "sum")
    graph, _ = translate.from_onnx(model)
    assert set(values) <= set(graph.node_names) and {"conv2d", "matmul"} <= set(values)
    rows = [line.split() for line in table[2:2 + len(values)]]
    assert [r[0] for r in rows] == sorted(values, key=values.get, reverse=True)
    assert sum(float(r[2].rstrip("%")) for r in rows) == pytest.approx(100, abs=1)
    assert load_overlay(str(out_json), graph.node_names).values == values
    assert main(["view", model, "--overlay", str(out_json), "--no-open",
                 "-o", str(tmp_path / "v.html")]) == 0
    assert "wrote" in capsys.readouterr().out
