"""The int8 attention demo step (msc/tour/int8_attention.py): onnxruntime's QDQ attention +
GELU folds into int8 kernels, with an SQNR no worse than onnxruntime's (checked by the step)."""

import pytest

pytest.importorskip("onnxruntime")

from msc.tour.int8_attention import step_int8_attention


def test_step_int8_attention_runs_int8(tmp_path, capsys):
    step_int8_attention(str(tmp_path))  # raises SystemExit on a float fallback or a worse SQNR
    out = capsys.readouterr().out
    assert "int8.batch_matmul" in out and "int8.lut" in out and "SQNR vs float" in out
