"""benchmarks/tune_relax.py: one corpus model through the whole run (export, tune with two
trials, tuned build checked against onnxruntime), the TIR share of a model that is all TIR
or all native, and the row a failure makes. No timing is asserted."""

import numpy as np

from benchmarks import tune_relax as tr
from msc import relax
from msc.relax import op as R


def _module(op, x_shape, w_shape):
    x = relax.Var("x", relax.TensorStructInfo(x_shape, "float32"))
    w = relax.Var("w", relax.TensorStructInfo(w_shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        bb.emit_func_output(bb.emit(op(x, w)))
    return bb.get()


def test_tir_share_is_one_for_a_legalized_conv1d_and_zero_for_a_native_matmul():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 8, 24), "float32"), rng.standard_normal((16, 8, 3),
                                                                          "float32")
    conv = relax.build(_module(R.nn.conv1d, x.shape, w.shape))
    assert tr.tir_share(conv, [x, w]) == 1.0
    a, b = x.reshape(8, 24), w.reshape(24, 16)
    dense = relax.build(_module(R.matmul, a.shape, b.shape))
    assert dense.stats["kernels"]["tir"] == 0 and tr.tir_share(dense, [a, b]) == 0.0


def test_a_corpus_model_is_tuned_and_its_output_matches_onnxruntime(capsys):
    assert tr.main(["--models", "whisper_encoder", "--trials", "2", "--rounds", "1",
                    "--min-time", "0.01", "--repeat-ms", "1"]) == 0
    row = capsys.readouterr().out.splitlines()[-1].strip("| ").split(" | ")
    assert row[0] == "whisper_encoder" and row[4] == "2"
    assert row[-1].endswith(" ok")
    tuned, calls = (int(c) for c in row[3].split("/"))
    assert calls >= 2 and 0 <= tuned <= calls


def test_a_failing_model_is_a_row_with_its_error():
    got = tr.cells({"model": "m", "error": "BuildError: boom"})
    assert got[:2] == ["m", "BuildError: boom"] and len(got) == len(tr.COLUMNS)
