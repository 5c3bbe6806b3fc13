"""int8 on real architectures: a fixed subset of benchmarks/quantize_corpus.py (one timm-style
CNN with relu6 / hard-swish, one transformers encoder). msc's QDQ file reaches onnxruntime's
``quantize_static`` (same calibration, MinMax, per channel) on held-out inputs, and msc's int8
kernels running that file agree with onnxruntime running it."""

import pytest

from tests.helpers.quant_corpus import quantize_model

# msc may trail onnxruntime by this much on a model and still pass: the two round different
# tensors (msc folds BN, absorbs relu / relu6, leaves masks float), so a model can land either
# side by a few tenths of a dB; measured: mobilenetv3 +1.25 dB, distilbert +1.69 dB
MARGIN_DB = 0.5
AGREE_DB = 30.0  # msc's int8 kernels vs onnxruntime on the same file: int8 rounding only


@pytest.mark.parametrize("name", ["mobilenetv3", "distilbert"])
def test_corpus_model_quantizes_at_least_as_onnxruntime(name, tmp_path):
    pytest.importorskip("onnxruntime")
    row = quantize_model(name, calib=4, held_out=2, methods=("MinMax",), folder=tmp_path)
    for key in ("msc", "msc@msc", "qdq_ref", "ort:MinMax"):
        assert row[key]["ran"], (key, row[key]["message"])
    assert row["msc"]["sqnr"] >= row["ort:MinMax"]["sqnr"] - MARGIN_DB
    assert row["msc"]["sqnr"] > 30
    assert row["int8_patterns"] > 0  # the file ran on msc's int8 kernels, not in float
    assert row["agree"] > AGREE_DB and row["agree_ref"] > AGREE_DB
