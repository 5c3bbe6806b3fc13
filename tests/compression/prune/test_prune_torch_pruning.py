"""msc keeps the same channels as Torch-Pruning (the reference pruner, ``torch-pruning`` on
PyPI) on the models it covers, with the same importance (group L1 / L2 magnitude, Torch-Pruning's
GroupMagnitudeImportance) and density (its pruning_ratio = 1 - density, round_to = stride).

ResNet-style (residual chains across blocks, downsample, BN, the classifier's input): every
group. DenseNet-style: the concat branches (Torch-Pruning mis-handles the split + swapped
concat after them, see benchmarks/prune.py, so those weights are not compared).
"""

import copy

import pytest
import torch

from msc.compression.prune import prune
from msc.frontends.translate import from_torch
from tests.helpers import prune_models as pm

tp = pytest.importorskip("torch_pruning")


def _tp_kept(model, shape, p: int, density: float, stride: int) -> dict[str, list[int]]:
    """Kept output channels per conv/linear weight, from Torch-Pruning's interactive step."""
    pruner = tp.pruner.BasePruner(
        model, torch.randn(*shape), importance=tp.importance.GroupMagnitudeImportance(p=p),
        pruning_ratio=1 - density, ignored_layers=[model.fc],
        round_to=stride if stride > 1 else None)
    names = {m: n for n, m in model.named_modules()}
    kept = {}
    out_fns = (tp.prune_conv_out_channels, tp.prune_linear_out_channels)
    for group in pruner.step(interactive=True):
        for dep, idxs in group:
            if dep.handler in out_fns:
                layer = dep.target.module
                pruned = {int(i) for i in idxs}
                kept[f"{names[layer]}.weight"] = sorted(set(range(layer.out_channels if hasattr(
                    layer, "out_channels") else layer.out_features)) - pruned)
        group.prune()
    return kept


def _msc_kept(full, shape, p: int, density: float, stride: int) -> dict[str, list[int]]:
    graph, weights = from_torch(copy.deepcopy(full), [(list(shape), "float32")])
    _, _, report = prune(graph, weights, {"density": density, "stride": stride,
                                          "importance": f"l{p}", "latency": False})
    return {graph.find_tensor(k).alias: v["out_indices"] for k, v in report["plan"].items()}


@pytest.mark.parametrize("p, density, stride", [(1, 0.5, 1), (2, 0.5, 1), (2, 0.4, 4)])
def test_resnet_keeps_the_channels_torch_pruning_keeps(p, density, stride):
    torch.manual_seed(p)
    full = pm.randomize_norms(pm.ResNet())
    want = _tp_kept(copy.deepcopy(full), (1, 3, 8, 8), p, density, stride)
    got = _msc_kept(full, (1, 3, 8, 8), p, density, stride)
    assert sorted(want) == ["l1.c1.weight", "l1.c2.weight", "l2.c1.weight", "l2.c2.weight",
                            "l2.down.0.weight", "stem.weight"]
    assert {k: got[k] for k in want} == want
    assert len(want["stem.weight"]) == (4 if stride == 4 else 8)


@pytest.mark.parametrize("p", [1, 2])
def test_densenet_concat_branches_keep_the_same_channels(p):
    torch.manual_seed(3)
    full = pm.randomize_norms(pm.Dense())
    want = _tp_kept(copy.deepcopy(full), (1, 3, 8, 8), p, 0.5, 1)
    got = _msc_kept(full, (1, 3, 8, 8), p, 0.5, 1)
    names = ("stem.weight", "c1.weight", "c2.weight")
    assert {k: got[k] for k in names} == {k: want[k] for k in names}
