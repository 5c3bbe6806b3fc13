"""Global pruning threshold (Torch-Pruning's global pruning) on a hand-made model."""

import numpy as np
import torch

from msc.compression.prune import prune
from msc.compression.quantize.runner import make_runner
from msc.frontends import translate


def _mlp():
    """fc1 (2->4), fc2 (4->4), fc3 (4->1); scores worked out by hand below."""
    model = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4),
                                torch.nn.ReLU(), torch.nn.Linear(4, 1)).eval()
    with torch.no_grad():
        for layer in (model[0], model[2], model[4]):
            layer.bias.zero_()
        model[0].weight.copy_(torch.tensor([[1.0, 0], [2, 0], [3, 0], [10, 0]]))
        model[2].weight.fill_(1.0)
        model[4].weight.copy_(torch.tensor([[1.0, 1, 1, 3]]))
    return model


def test_global_threshold_keeps_the_hand_computed_channels():
    # L2 group scores (mean over the voting weights): the fc1/fc2 space ([1,4,9,100] rows of
    # fc1 + 4 per fc2 column) / 2 = [2.5, 4, 6.5, 52], mean-normalized [.15, .25, .4, 3.2];
    # the fc2/fc3 space (4 per fc2 row + [1,1,1,9]) / 2 = [2.5, 2.5, 2.5, 6.5] -> [.71 x3,
    # 1.86]. Density 0.5 prunes 4 of the 8: the threshold is the 4th smallest, .71, so each
    # space keeps only channel 3, where per-layer density keeps 2 in each.
    graph, weights = translate.from_torch(_mlp(), [([3, 2], "float32")])
    config = {"density": 0.5, "stride": 1, "latency": False}
    small, small_w, report = prune(graph, weights, {**config, "global_threshold": True})
    small.check()
    alias = {w.name: w.alias for w in graph.get_weights()}
    plan = {alias[name]: entry for name, entry in report["plan"].items()}
    assert plan["0.weight"] == {"in_indices": [], "out_indices": [3]}
    assert plan["2.weight"] == {"in_indices": [3], "out_indices": [3]}
    assert plan["4.weight"] == {"in_indices": [3], "out_indices": []}
    assert sorted(g["channels"] for g in report["groups"]) == [[4, 1], [4, 1]]
    per_layer = prune(graph, weights, config)[2]
    assert sorted(g["channels"] for g in per_layer["groups"]) == [[4, 2], [4, 2]]
    # the pruned model computes the unpruned one's output through channel 3 alone
    x = np.random.default_rng(0).standard_normal((3, 2)).astype("float32")
    model = _mlp()
    with torch.no_grad():
        model[0].weight[:3] = 0
        model[2].weight[:3] = 0
        want = model(torch.from_numpy(x)).numpy()
    got = make_runner(small, small_w)([x])[small.output_names[0]]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
