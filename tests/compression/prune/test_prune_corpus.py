"""Pruning real architectures: a fixed subset of the corpus (tests/helpers/corpus.py), each
pruned at density 0.5 and run on every path (to_relax + relax.build, to_torch, to_onnx in
onnxruntime) with the unpruned output shapes; benchmarks/prunability.py runs the whole corpus
beside Torch-Pruning.

The subset: GhostNet (concat cut back by a slice, depthwise convs, squeeze-excite, residuals),
ViT (heads and MLP width), BERT (embeddings, heads, MLP) and Llama (grouped-query attention:
query heads go with their KV head). The paths must agree with each other to 1e-4 of the
output's magnitude (one pruned graph, three codegens).
"""

import math

import numpy as np
import pytest
import torch
from torch import nn

from msc.compression.prune import prune
from msc.frontends.translate import from_torch

pytest.importorskip("transformers")
pytest.importorskip("onnxruntime")

from tests.helpers.prunability import PRUNE_PATHS, msc_config, prune_model


@pytest.mark.parametrize("name", ["ghostnet", "vit", "bert", "llama"])
def test_corpus_model_prunes_smaller_and_runs_on_every_path(name, tmp_path):
    row = prune_model(name, 0.5, tmp_path)
    assert {p: r["message"] for p, r in row["paths"].items()} == \
        {p: "" for p in PRUNE_PATHS}
    assert row["pruned"] and row["ran"]
    assert row["params"] < 0.7 and row["flops"] < 0.7
    assert math.isfinite(row["sqnr"])
    assert row["agree"] < 1e-4
    assert all(f["op"] == "output" for f in row["frozen"])  # nothing else stays whole


def _projection(report: dict, graph, alias: str) -> list:
    name = next(w.name for w in graph.get_weights() if w.alias == alias)
    return report["plan"][name]["out_indices"]


def test_gqa_decoder_prunes_query_heads_with_their_kv_head():
    """Llama with 4 query heads over 2 KV heads (head dim 8): KV heads are pruned with the
    query heads that read them, so every kept KV head keeps its 2 query heads."""
    from tests.helpers.corpus import MODELS

    model, info, _ = MODELS["llama"]()
    graph, weights = from_torch(model, info)
    _, _, report = prune(graph, weights, msc_config(0.5))
    prefix = "model.model.layers.0.self_attn."
    q = _projection(report, graph, prefix + "q_proj.weight")
    k = _projection(report, graph, prefix + "k_proj.weight")
    v = _projection(report, graph, prefix + "v_proj.weight")
    assert k == v and len(k) == 8  # one of two KV heads, whole
    kv_head = k[0] // 8
    assert q == list(range(16 * kv_head, 16 * kv_head + 16))  # its two query heads


class MiddleSlice(nn.Module):
    """A conv whose channels are cut from the middle of the axis by a slice: a coupling the
    pruner cannot cut; the rest of the model still prunes."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 16, 3, padding=1), nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc(self.b(torch.relu(self.a(x))[:, 4:12]).relu().mean((2, 3)))


def test_an_unprunable_coupling_is_named_and_frozen():
    torch.manual_seed(0)
    graph, weights = from_torch(MiddleSlice().eval(), [([1, 3, 8, 8], "float32")])
    small, small_w, report = prune(graph, weights, msc_config(0.5))
    frozen = {f["weight"]: f for f in report["not_prunable"]}
    a = next(w.name for w in graph.get_weights() if w.alias == "a.weight")
    assert frozen[a]["op"] == "strided_slice" and frozen[a]["joint"] == "strided_slice"
    assert "strided_slice" in frozen[a]["reason"]
    assert small_w[a].shape == weights[a].shape  # frozen: every channel kept
    b = next(w.name for w in graph.get_weights() if w.alias == "b.weight")
    assert small_w[b].shape == (8, 8, 3, 3)  # the rest prunes
    assert [t.shape for t in small.get_outputs()] == [[1, 4]]
    np.testing.assert_array_equal(small_w[a], weights[a])
