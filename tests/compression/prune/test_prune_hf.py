"""Hugging Face transformers pruned by whole heads and FFN width: GPT-2 (q/k/v packed in one
Conv1D, cut by ``split``) and T5 (a relative position bias added to the scores). The pruned
graph on the msc backend computes what the *unpruned* torch model computes with the pruned
channels' consumer columns zeroed (a removed head or hidden unit only reaches the output
through them): an independent reference that needs no narrow model. float32, atol 1e-5.
"""

import copy

import numpy as np
import pytest
import torch

from msc.codegen import to_relax
from msc.compression.prune import prune
from msc.frontends.translate import from_torch
from tests.helpers.codegen import relax_build_and_run

T = pytest.importorskip("transformers")
T.logging.set_verbosity_error()

MODELS = {
    "gpt2": lambda: T.GPT2Model(T.GPT2Config(vocab_size=100, n_embd=32, n_layer=1, n_head=4,
                                             n_positions=16, use_cache=False)),
    "t5_encoder": lambda: T.T5EncoderModel(T.T5Config(
        vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4,
        use_cache=False)),
}


def _zero_pruned_columns(model, graph, plan: dict) -> int:
    """Zero, in the torch model, the input columns the plan drops from consumers (weights
    pruned on their input side only); returns how many weights were touched."""
    params, touched = dict(model.named_parameters()), 0
    for name, entry in plan.items():
        alias = graph.find_tensor(name).alias
        if not entry["in_indices"] or entry["out_indices"] or alias not in params:
            continue
        layer = model.get_submodule(alias.rsplit(".", 1)[0])
        axis = 0 if type(layer).__name__ == "Conv1D" else 1  # GPT-2 stores [in, out]
        param = params[alias]
        drop = sorted(set(range(param.shape[axis])) - set(entry["in_indices"]))
        with torch.no_grad():
            param.index_fill_(axis, torch.tensor(drop), 0.0)
        touched += 1
    return touched


@pytest.mark.parametrize("name", MODELS)
def test_heads_and_ffn_pruned_equal_the_zeroed_model(name, tmp_path):
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    ids = torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(1))
    graph, weights = from_torch(copy.deepcopy(model), [([2, 8], "int64")])
    small, small_w, report = prune(graph, weights, {"density": 0.5, "stride": 1,
                                                    "latency": False})
    hidden = {"gpt2": 128, "t5_encoder": 64}[name]
    assert [g["channels"] for g in report["groups"]] == [[4, 2], [hidden, hidden // 2]]
    assert _zero_pruned_columns(model, graph, report["plan"]) == 2
    with torch.no_grad():
        want = model(ids)[0].numpy()
    got = relax_build_and_run(to_relax(small, small_w, build_folder=tmp_path), [ids.numpy()])
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-5)
