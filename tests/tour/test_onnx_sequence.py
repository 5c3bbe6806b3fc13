"""The demo step for ONNX sequences and an unrolled Loop runs and checks its results."""

from msc.tour.onnx_sequence import step_onnx_sequence


def test_step_onnx_sequence_prints_both_results(tmp_path, capsys):
    step_onnx_sequence(str(tmp_path))  # raises SystemExit on a wrong result
    text = capsys.readouterr().out
    assert "concat (3, 3)" in text and "4 * s[0]" in text
