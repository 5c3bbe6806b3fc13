import pytest

pytest.importorskip("transformers")

from msc.tour.transformer import step_transformer


def test_step_transformer_builds_bert_equal_to_torch(tmp_path, capsys):
    step_transformer(str(tmp_path))  # raises SystemExit when msc differs from torch
    text = capsys.readouterr().out
    assert "max |msc - torch|" in text
    assert "attention x2" in text and "add+layer_norm x4" in text and "dense+act x2" in text
