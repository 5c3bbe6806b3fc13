"""The pruning step of the tour (msc/tour/prune.py) runs, prints the latency and writes its plan."""

from msc.tour.prune import step_prune


def test_demo_step_runs(tmp_path, capsys):
    step_prune(str(tmp_path))
    text = capsys.readouterr().out
    assert "latency" in text and (tmp_path / "prune_plan.json").exists()
