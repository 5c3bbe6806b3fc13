"""Hugging Face transformers from small random configs (no downloads): fx cannot trace them
(transformers 5 dropped transformers.utils.fx), so from_torch goes through torch.export; the
Relax module computes what the model computes, static and with dynamic batch and sequence,
and the MSCGraph has the fused MSC ops and state_dict aliases."""

import numpy as np
import pytest
import torch

from msc.frontends.torch import translate_torch
from msc.frontends.torch.api import from_torch
from tests.helpers.hf_models import VOCAB, tiny_hf_models
from tests.helpers.torch_tools import run_relax, run_vm, torch_leaves

T = pytest.importorskip("transformers")
T.logging.set_verbosity_error()

MODELS = tiny_hf_models(T, layers=2)


def _model(name):
    torch.manual_seed(0)
    return MODELS[name]().eval()


def _inputs(name, dynamic):
    gen = torch.Generator().manual_seed(1)
    if name == "vit":
        return torch.randn(2, 3, 32, 32, generator=gen), [(["bz" if dynamic else 2, 3, 32, 32],
                                                          "float32")]
    ids = torch.randint(0, VOCAB, (2, 8), generator=gen)
    return ids, [(["bz", "seq"] if dynamic else [2, 8], "int64")]


@pytest.fixture(scope="module")
def translated():
    cache = {}

    def get(name, dynamic):
        if (name, dynamic) not in cache:
            _, info = _inputs(name, dynamic)
            cache[(name, dynamic)] = translate_torch(_model(name), info)
        return cache[(name, dynamic)]

    return get


@pytest.mark.parametrize("evaluator", [run_vm, run_relax], ids=["vm", "numpy"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dyn"])
@pytest.mark.parametrize("name", list(MODELS))
def test_numeric(name, dynamic, evaluator, translated):
    result = translated(name, dynamic)
    assert result.via == "export" and "fx" in result.reasons
    x, _ = _inputs(name, dynamic)
    with torch.no_grad():
        expected = torch_leaves(_model(name)(x))
    got = evaluator(result.mod, [x.numpy()])
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(MODELS))
def test_graph(name):
    model = _model(name)
    _, info = _inputs(name, False)
    graph, weights = from_torch(model, info)
    graph.check()
    nodes = graph.inspect()["nodes"]
    assert nodes.get("msc.attention") == 2
    assert nodes.get("msc.linear_bias", 0) + nodes.get("msc.linear", 0) >= 8
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    owned = [t for t in graph.get_weights() if t.alias in state]
    assert len(owned) >= 15
    for tensor in owned:
        data = weights[tensor.name]
        ref = state[tensor.alias]
        assert np.array_equal(data, ref) or np.array_equal(data, ref.T), tensor.alias
