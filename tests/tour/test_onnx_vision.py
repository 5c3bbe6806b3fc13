"""The demo step for ONNX NonMaxSuppression / run-time-scale Resize runs and checks itself."""

from msc.tour.onnx_vision import step_onnx_vision


def test_step_onnx_vision_prints_every_run(tmp_path, capsys):
    step_onnx_vision(str(tmp_path))  # raises SystemExit on a result the ONNX reference rejects
    printed = capsys.readouterr().out
    assert printed.count("boxes kept") == 2
    assert "(1, 1, 4, 4)" in printed and "(1, 1, 2, 2)" in printed
