"""torch -> MSCGraph -> ONNX: every eager case of the from_torch table and small Hugging Face
models (random weights from tiny configs, no downloads) run in onnxruntime and equal torch
eager: rtol 1e-5 for float32, atol the case's own (1e-5 by default; the HF models 1e-5)."""

import numpy as np
import pytest
import torch

from msc.codegen import to_onnx
from msc.frontends.torch.api import from_torch
from tests.helpers.hf_models import VOCAB, tiny_hf_models
from tests.helpers.onnx_conformance import run_onnxruntime
from tests.helpers.torch_cases import CASES
from tests.helpers.torch_tools import torch_leaves

pytest.importorskip("onnxruntime")


def _eager(model, inputs) -> list:
    with torch.no_grad():
        return torch_leaves(model(*inputs))


@pytest.mark.parametrize("name", sorted(CASES))
def test_torch_case_runs_in_onnxruntime(name):
    case = CASES[name]
    model, inputs = case.model(), case.tensors()
    graph, weights = from_torch(model, case.input_info(False))
    got = run_onnxruntime(to_onnx(graph, weights), [x.numpy() for x in inputs])
    want = _eager(model, inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype, name
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=case.atol)


T = pytest.importorskip("transformers")
T.logging.set_verbosity_error()
HF = tiny_hf_models(T, layers=1)


@pytest.mark.parametrize("name", list(HF))
def test_hf_model_runs_in_onnxruntime_with_dynamic_dims(name):
    torch.manual_seed(0)
    model = HF[name]().eval()
    gen = torch.Generator().manual_seed(1)
    if name == "vit":
        info, x = [(["bz", 3, 32, 32], "float32")], torch.randn(2, 3, 32, 32, generator=gen)
    else:
        info, x = [(["bz", "seq"], "int64")], torch.randint(0, VOCAB, (2, 8), generator=gen)
    graph, weights = from_torch(model, info)
    written = to_onnx(graph, weights)
    dims = [d.dim_param or d.dim_value for d in written.graph.input[0].type.tensor_type.shape.dim]
    assert dims[0] == "bz" and (name == "vit" or dims[1] == "seq")
    got = run_onnxruntime(written, [x.numpy()])
    want = _eager(model, [x])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    if name != "vit":  # another batch and length through the same model
        y = torch.randint(0, VOCAB, (3, 5), generator=gen)
        np.testing.assert_allclose(run_onnxruntime(written, [y.numpy()])[0],
                                   _eager(model, [y])[0], rtol=1e-5, atol=1e-5)
