"""The command-line step of the tour (msc/tour/command_line.py) runs ``msc`` as a user types it:
inspect, run --check, export, diff, and a bad input that exits 2."""

from msc.tour.command_line import step_cli


def test_demo_step(tmp_path, capsys):
    step_cli(str(tmp_path))
    out = capsys.readouterr().out
    assert "PASS" in out and "# exit 2" in out and "identical structure" in out
