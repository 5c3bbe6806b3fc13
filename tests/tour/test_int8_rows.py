"""The int8 rows demo step (msc/tour/int8_rows.py): onnxruntime's QDQ split, masked
softmax and layer norm run as kernels on bytes, with an SQNR no worse than onnxruntime's
(checked by the step)."""

import pytest

pytest.importorskip("onnxruntime")

from msc.tour.int8_rows import step_int8_rows


def test_step_int8_rows_runs_on_bytes(tmp_path, capsys):
    step_int8_rows(str(tmp_path))  # raises SystemExit on a float fallback or a worse SQNR
    out = capsys.readouterr().out
    assert "qdq:softmax" in out and "qdq:add->layer_norm" in out and "SQNR vs float" in out
