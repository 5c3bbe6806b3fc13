"""benchmarks/int8_formats.py: the table counts what its cells say, and one real cell (the
corpus's resnet in onnxruntime's QOperator format) is msc equal to onnxruntime to the bit."""

from benchmarks import int8_formats as fm


def test_table_counts_equal_cells_and_failures():
    rows = {"a": {"qop": "0.0000", "qdq-u8s8": "0.0124"},
            "b": {"qop": "onnxruntime fails (InvalidArgument)", "qdq-u8s8": "0.0000"}}
    lines = fm.table(rows, ["qdq-u8s8", "qop"])
    assert lines[2] == "| a | 0.0124 | 0.0000 |"
    assert "qdq-u8s8: equal to the bit on 1 of 2 models run by both (0 failed" in lines[-2]
    assert "qop: equal to the bit on 1 of 1 models run by both (1 failed" in lines[-1]


def test_a_real_cell(tmp_path):
    from benchmarks.corpus_speed import batched, export
    from tests.helpers.corpus import MODELS

    module, _, inputs = MODELS["resnet"]()
    inputs = batched(inputs, 1)
    model = export(module, inputs, tmp_path / "resnet.onnx")
    assert fm.cell(model, inputs, tmp_path, "qop") == "0.0000"
