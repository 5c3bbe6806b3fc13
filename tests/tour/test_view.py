"""The demo step of the viewer runs and writes its three files."""

import json

from msc.tour.view import step_view


def test_step_view_writes_html_svg_and_model_explorer(tmp_path, capsys):
    step_view(str(tmp_path))
    out = capsys.readouterr().out
    assert "2104 joints" in out and "groups" in out
    assert (tmp_path / "decoder.html").stat().st_size > 0
    assert (tmp_path / "decoder.svg").read_text().count('class="joint"') == 2104
    data = json.loads((tmp_path / "decoder_me.node_data.json").read_text())
    assert len(data["decoder"]["results"]) == 100 * 7 + 1  # every linear layer's weight count
