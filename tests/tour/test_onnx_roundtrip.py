"""The demo step for ONNX round trips with run-time parameters and custom domains runs and
checks itself."""

import pytest

from msc.tour.onnx_roundtrip import step_onnx_roundtrip

pytest.importorskip("onnxruntime")


def test_step_onnx_roundtrip_prints_every_run(tmp_path, capsys):
    step_onnx_roundtrip(str(tmp_path))  # raises SystemExit on a result unlike the original's
    printed = capsys.readouterr().out
    assert printed.count("as the original") == 2
    assert "ai.msc:nn_gelu" in printed and "functions ['nn_gelu']" in printed
