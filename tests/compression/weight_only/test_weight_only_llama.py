"""Weight-only quantization of a small transformers Llama (tests/helpers/corpus.py, random
weights): every linear joint becomes a matmul_nbits on packed weights, the three paths (msc's
backend on the packed kernel, onnxruntime on MatMulNBits, torch dequantizing) agree, and the
logits stay within the stated SQNR of the float model on held-out inputs.

Thresholds (measured 2026-12-02 on this model, with margin): int8 per channel 42.8 dB and
top-1 1.0 -> >= 38 dB and >= 0.95; int4 g32 18.0 dB (sym) / 19.6 dB (asym) -> >= 15 dB."""

import numpy as np
import onnxruntime as ort
import pytest
import torch

from msc import relax
from msc.codegen import to_onnx, to_relax, to_torch
from msc.compression.weight_only import quantize_weights
from msc.errors import ValidationError
from msc.frontends import translate
from tests.helpers.corpus import MODELS, VOCAB

RNG = np.random.default_rng(5)
CALIB = [RNG.integers(0, VOCAB, (1, 12)).astype(np.int64) for _ in range(4)]
HELD_OUT = [RNG.integers(0, VOCAB, (1, 12)).astype(np.int64) for _ in range(3)]


@pytest.fixture(scope="module")
def llama():
    model, info, _ = MODELS["llama"]()
    return translate.from_torch(model, info)


@pytest.mark.parametrize("config,min_db,min_top1", [
    ({"bits": 8, "group_size": None}, 38.0, 0.95),
    ({"bits": 4, "group_size": 32}, 15.0, 0.6),
    ({"bits": 4, "group_size": 32, "symmetric": False, "method": "awq"}, 15.0, 0.6),
])
def test_logits_sqnr_on_held_out_inputs(llama, config, min_db, min_top1):
    qgraph, _, report = quantize_weights(*llama, CALIB, config, eval_data=HELD_OUT)
    out = report.output
    assert out["items"] == 3 and out["sqnr_db"] >= min_db and out["top1_agreement"] >= min_top1
    linear = sum(n.optype.startswith("msc.linear") for n in llama[0].get_nodes())
    assert qgraph.inspect()["nodes"]["matmul_nbits"] == linear == len(report.layers) == 15
    for row in report.layers:  # the search starts from RTN: never worse on its own rows
        assert row["sqnr_db"] >= row["rtn_sqnr_db"] - 1e-9


def test_backend_onnxruntime_and_torch_agree(llama, tmp_path):
    config = {"bits": 4, "group_size": 32, "symmetric": False, "method": "awq"}
    qgraph, qweights, _ = quantize_weights(*llama, CALIB, config)
    x = HELD_OUT[0]
    mod = to_relax(qgraph, qweights, build_folder=str(tmp_path / "relax"))
    ex = relax.build(mod, target="llvm")
    assert ex.stats["ops"]["matmul_nbits"] == {"native": 15}  # the packed kernel, not numpy
    ours = np.asarray(relax.VirtualMachine(ex, relax.cpu())["main"](x).numpy())
    with torch.no_grad():
        theirs = to_torch(qgraph, qweights, build_folder=str(tmp_path / "torch"))(
            torch.from_numpy(x)).numpy()
    model = to_onnx(qgraph, qweights)
    assert sum(n.op_type == "MatMulNBits" for n in model.graph.node) == 15
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ort_out = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    scale = np.abs(theirs).max()
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5 * scale)
    np.testing.assert_allclose(ort_out, theirs, rtol=0, atol=1e-5 * scale)


def test_awq_needs_calibration_inputs(llama):
    with pytest.raises(ValidationError, match="calibration"):
        quantize_weights(*llama, None, {"method": "awq"})


def test_excluded_layers_stay_float(llama):
    qgraph, _, report = quantize_weights(*llama, None, {"exclude": {"regex": "^matmul_18$"}})
    assert qgraph.find_node("matmul_18").optype == "msc.linear" and len(report.layers) == 14
    assert report.output is None and report.layers[0]["rtn_sqnr_db"] is None
