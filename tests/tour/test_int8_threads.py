"""The demo step for the int8 CNN kernels on native task lists runs and checks its results."""

from msc.tour.int8_threads import step_int8_threads


def test_step_int8_threads_bitwise_equal(tmp_path, capsys):
    step_int8_threads(str(tmp_path))  # raises SystemExit when 2 threads differ from 1
    text = capsys.readouterr().out
    assert text.count("bitwise equal") == 3
    assert "conv plan at 2 threads: 4 blocks" in text
