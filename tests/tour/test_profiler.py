"""The profiler demo step (msc/tour/profiler.py) runs, checks itself and writes its overlay."""

import json

from msc.tour.profiler import step_profile


def test_step_profile_writes_an_overlay_of_joints(tmp_path, capsys):
    step_profile(str(tmp_path))   # raises SystemExit when keys are not joints or shares are off
    out = capsys.readouterr().out
    assert "hottest joint" in out and "vm (args, plan, results)" in out
    values = json.loads((tmp_path / "profile.json").read_text())
    assert {"conv2d", "conv2d_1", "matmul"} <= set(values) and all(v > 0 for v in values.values())
