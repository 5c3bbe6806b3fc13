"""GPT-2 written by torch's legacy ONNX exporter (Gemm with [in, out] weights after reshapes)
through the whole graph path: from_onnx -> MSCGraph -> to_relax -> build equals onnxruntime.
Two layers: the second layer's projections are where a bias constant's 1-D layout once became
the layout of the 2-D sum it was added to, and the next linear lost its ``OI`` weight.
The export (random weights, no download) is checked in as data/gpt2_legacy.onnx because
exporting takes seconds; regenerate it with ``python -m tests.codegen.test_codegen_gpt2_onnx``."""

import io
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from msc import relax
from msc.codegen import to_relax
from msc.frontends.translate import from_onnx
from tests.helpers.hf_models import VOCAB

ort = pytest.importorskip("onnxruntime")
DATA = Path(__file__).parent / "data" / "gpt2_legacy.onnx"


def _gpt2_onnx() -> onnx.ModelProto:
    import transformers as T

    T.logging.set_verbosity_error()
    torch.manual_seed(0)
    model = T.GPT2Model(T.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4,
                                     n_positions=64, use_cache=False)).eval()

    class Hidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, ids):
            return self.model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Hidden(), (torch.zeros(1, 8, dtype=torch.int64),), buffer,
                          input_names=["ids"], output_names=["hidden"], dynamo=False,
                          opset_version=17)
    return onnx.load_from_string(buffer.getvalue())


def test_gpt2_legacy_export_through_the_graph_equals_onnxruntime(tmp_path):
    model = onnx.load(DATA)
    graph, weights = from_onnx(model)
    for node in graph.get_nodes():
        if node.optype == "constant":
            continue
        for t in node.get_outputs():
            assert str(t.layout) == "" or len(str(t.layout)) == len(t.shape), (node.name, t)
    mod = to_relax(graph, weights, build_folder=tmp_path)
    vm = relax.VirtualMachine(relax.build(mod), relax.cpu())
    ids = np.random.default_rng(0).integers(0, VOCAB, (1, 8))
    got = vm["main"](ids)
    got = (got[0] if isinstance(got, (list, tuple)) else got).numpy()
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"ids": ids})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


if __name__ == "__main__":
    onnx.save(_gpt2_onnx(), DATA)
