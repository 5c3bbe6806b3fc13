"""The demo step for ONNX parameters known only at run time runs and checks its results."""

from msc.tour.onnx_runtime import step_onnx_runtime_values


def test_step_onnx_runtime_values_prints_both_runs(tmp_path, capsys):
    step_onnx_runtime_values(str(tmp_path))  # raises SystemExit on a wrong result
    text = capsys.readouterr().out
    assert "sum (3, 4)" in text and "reshape (12, 2)" in text
