"""The demo step for large models and limits runs and checks its results."""

from msc.tour.limits import step_limits


def test_step_limits_maps_weights_and_refuses(tmp_path, capsys):
    step_limits(str(tmp_path))  # raises SystemExit on a wrong result
    text = capsys.readouterr().out
    assert text.count("mapped from weights.bin") == 2
    assert "outside the model's folder" in text
    assert "over the limit of 1000000" in text
