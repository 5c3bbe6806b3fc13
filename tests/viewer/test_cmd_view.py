"""``msc view``: writes the page (HTML, SVG or Model Explorer JSON), errors name the input."""

import argparse
import json

import pytest

from msc.cli import cmd_view
from msc.errors import MSCError, SerializationError


def _run(argv, monkeypatch):
    opened = []
    monkeypatch.setattr(cmd_view.webbrowser, "open", opened.append)
    help_text, add_arguments, run = cmd_view.COMMAND
    parser = argparse.ArgumentParser(prog="msc view", description=help_text)
    add_arguments(parser)
    return run(parser.parse_args(argv)), opened


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A small MSC graph JSON with its weights beside it (resnet50 takes longer to load)."""
    from msc.graph import testing

    out = tmp_path_factory.mktemp("m")
    graph = testing.conv_relu_graph()
    graph.to_json(str(out / "net.json"))
    return graph, str(out / "net.json")


def test_view_writes_html_and_opens_it(model, tmp_path, monkeypatch, capsys):
    graph, path = model
    out = tmp_path / "v.html"
    code, opened = _run([path, "-o", str(out)], monkeypatch)
    assert code == 0 and opened == [f"file://{out}"]
    text = out.read_text()
    assert '<script type="application/json" id="msc-data">' in text and "dagre" in text
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")  # nothing fetched
    for name in graph.node_names:
        assert f'"name":"{name}"' in text
    assert f"({len(graph.node_names)} joints)" in capsys.readouterr().out


def test_view_svg_with_overlay_no_open(model, tmp_path, monkeypatch):
    graph, path = model
    overlay = tmp_path / "density.json"
    overlay.write_text(json.dumps({graph.node_names[1]: 0.5}))
    out = tmp_path / "v.svg"
    code, opened = _run([path, "-o", str(out), "--overlay", str(overlay), "--no-open"],
                        monkeypatch)
    assert code == 0 and opened == [] and "density=0.5" in out.read_text()


def test_view_model_explorer_writes_json_and_says_how_to_open(model, tmp_path, monkeypatch,
                                                               capsys):
    import sys

    graph, path = model
    out, overlay = tmp_path / "g.json", tmp_path / "t.json"
    overlay.write_text(json.dumps({graph.node_names[-1]: 3}))
    code, _ = _run([path, "--model-explorer", "-o", str(out), "--overlay", str(overlay),
                    "--no-open"], monkeypatch)
    assert code == 0 and json.loads(out.read_text())["graphs"][0]["nodes"]
    data = tmp_path / "g.node_data.json"
    assert f"model-explorer {out} --node_data_paths={data}" in capsys.readouterr().out
    # opening needs the optional package; without it the error says how to install it
    monkeypatch.setitem(sys.modules, "model_explorer", None)
    with pytest.raises(MSCError, match=r"pip install 'msc\[explorer\]'"):
        _run([path, "--model-explorer", "-o", str(out)], monkeypatch)


@pytest.mark.parametrize("extra, words", [
    (["-o", "g.png"], ["g.png", "'.png'"]),
    (["--overlay", "missing.json"], ["missing.json", "no such overlay file"]),
])
def test_view_bad_arguments(model, monkeypatch, tmp_path, extra, words):
    _, path = model
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SerializationError) as err:
        _run([path, "--no-open", *extra], monkeypatch)
    for word in words:
        assert word in str(err.value)


def test_view_missing_model(tmp_path, monkeypatch):
    with pytest.raises(SerializationError, match="no such file"):
        _run([str(tmp_path / "nope.onnx"), "--no-open"], monkeypatch)
