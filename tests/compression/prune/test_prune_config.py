"""The pruning strategy and plan: JSON plan round trip and hand edits, stride, excludes,
per-layer density by name / optype / regex, a user importance, config errors, the report."""

import json

import numpy as np
import pytest
import torch

from msc.compression.prune import load_plan, prune, save_plan
from msc.errors import SerializationError, ValidationError
from msc.frontends.translate import from_torch
from tests.helpers import prune_models as pm

NO_LATENCY = {"latency": False}


@pytest.fixture(scope="module")
def resnet():
    torch.manual_seed(0)
    return from_torch(pm.randomize_norms(pm.ResNet()), [([1, 3, 8, 8], "float32")])


def _widths(graph, plan: dict) -> dict:
    """Kept output channels per torch weight name."""
    return {graph.find_tensor(k).alias: len(v["out_indices"]) for k, v in plan.items()
            if v["out_indices"]}


def _name_of(graph, alias: str) -> str:
    return graph.find_tensor(alias).name


def test_plan_round_trip_gives_the_same_graph_and_weights(resnet, tmp_path):
    graph, weights = resnet
    small, small_w, report = prune(graph, weights, {"density": 0.5, **NO_LATENCY})
    path = save_plan(report["plan"], str(tmp_path / "plan.json"))
    again, again_w, again_report = prune(graph, weights, {"plan": path, **NO_LATENCY})
    assert again.to_dict() == small.to_dict()
    assert again_w.keys() == small_w.keys()
    assert all(np.array_equal(again_w[k], small_w[k]) for k in small_w)
    assert again_report["plan"] == report["plan"] == load_plan(path)
    by_alias = {graph.find_tensor(k).alias: v for k, v in load_plan(path).items()}
    assert by_alias["l1.c2.weight"]["out_indices"] == by_alias["stem.weight"]["out_indices"]
    assert by_alias["fc.weight"]["out_indices"] == []  # the classifier's outputs stay


def test_a_plan_may_name_weights_by_alias(resnet):
    graph, weights = resnet
    _, _, report = prune(graph, weights, {"density": 0.5, **NO_LATENCY})
    by_alias = {graph.find_tensor(k).alias: v for k, v in report["plan"].items()}
    _, _, again = prune(graph, weights, {"plan": by_alias, **NO_LATENCY})
    assert again["plan"] == report["plan"]


def test_an_edited_plan_must_keep_tied_channels_together(resnet):
    graph, weights = resnet
    _, _, report = prune(graph, weights, {"density": 0.5, **NO_LATENCY})
    plan = json.loads(json.dumps(report["plan"]))
    entry = plan[_name_of(graph, "l1.c2.weight")]
    entry["out_indices"] = [i for i in range(16) if i not in entry["out_indices"]]
    with pytest.raises(ValidationError, match="tied"):
        prune(graph, weights, {"plan": plan, **NO_LATENCY})


def test_a_plan_cannot_prune_a_fixed_axis_or_name_a_stranger(resnet):
    graph, weights = resnet
    fc = _name_of(graph, "fc.weight")
    with pytest.raises(ValidationError, match="cannot be pruned") as err:
        prune(graph, weights, {"plan": {fc: {"out_indices": [0, 1]}}, **NO_LATENCY})
    assert fc in str(err.value)
    with pytest.raises(ValidationError, match="no weight"):
        prune(graph, weights, {"plan": {"nope": {"out_indices": [0]}}, **NO_LATENCY})
    with pytest.raises(SerializationError, match="no such plan file"):
        prune(graph, weights, {"plan": "missing_plan.json", **NO_LATENCY})


@pytest.mark.parametrize("density, stride, want", [
    (0.5, 8, {"stem.weight": 8, "l1.c1.weight": 8, "l2.c1.weight": 16, "l2.c2.weight": 16}),
    (0.3, 8, {"stem.weight": 8, "l1.c1.weight": 8, "l2.c1.weight": 8, "l2.c2.weight": 8}),
    (0.3, 1, {"stem.weight": 4, "l1.c1.weight": 4, "l2.c1.weight": 9, "l2.c2.weight": 9}),
    (0.5, 16, {"l2.c1.weight": 16, "l2.c2.weight": 16}),  # 16-wide groups stay whole
])
def test_stride_rounds_kept_channels_down_to_a_multiple(resnet, density, stride, want):
    graph, weights = resnet
    _, _, report = prune(graph, weights, {"density": density, "stride": stride, **NO_LATENCY})
    widths = _widths(graph, report["plan"])
    assert {k: widths[k] for k in want} == want
    assert all(n % stride == 0 for n in widths.values()) or stride == 1
    if stride == 16:  # groups of one stride keep it (at least one stride is kept)
        assert "stem.weight" not in widths and "l1.c1.weight" not in widths


def test_excludes_by_regex_and_name_keep_those_outputs(resnet):
    graph, weights = resnet
    _, _, report = prune(graph, weights, {"density": 0.5, "excludes": ["re:^l2\\."],
                                          **NO_LATENCY})
    widths = _widths(graph, report["plan"])
    assert widths["stem.weight"] == 8 and "l2.c1.weight" not in widths
    assert "l2.c2.weight" not in widths
    _, _, report = prune(graph, weights, {"density": 0.5, "excludes": ["conv2d_1"],
                                          **NO_LATENCY})
    assert "l1.c1.weight" not in _widths(graph, report["plan"])


def test_density_per_layer_by_name_optype_and_regex(resnet):
    graph, weights = resnet
    density = {"default": 0.5, "l1.c1.weight": 0.25, "re:^l2\\.c1": 1.0,
               "optype:msc.conv2d_bias": 0.75}
    _, _, report = prune(graph, weights, {"density": density, "stride": 1, **NO_LATENCY})
    widths = _widths(graph, report["plan"])
    assert widths["l1.c1.weight"] == 4 and "l2.c1.weight" not in widths
    assert widths["stem.weight"] == 12 and widths["l2.c2.weight"] == 16


def test_a_user_importance_decides(resnet):
    graph, weights = resnet
    _, _, l1 = prune(graph, weights, {"density": 0.5, "importance": "l1", **NO_LATENCY})

    def weakest_first(array, axis):
        other = tuple(k for k in range(array.ndim) if k != axis)
        return -np.abs(array).sum(axis=other)

    _, _, user = prune(graph, weights, {"density": 0.5, "importance": weakest_first,
                                        **NO_LATENCY})
    name = _name_of(graph, "stem.weight")
    assert set(user["plan"][name]["out_indices"]) == \
        set(range(16)) - set(l1["plan"][name]["out_indices"])
    with pytest.raises(ValidationError, match="one score per position"):
        prune(graph, weights, {"density": 0.5, "importance": lambda a, axis: np.ones(3),
                               **NO_LATENCY})


@pytest.mark.parametrize("config, match", [
    ({"density": 1.5}, "density must be in"),
    ({"density": 0.5, "stride": 0}, "stride"),
    ({"density": 0.5, "importance": "l3"}, "unknown importance"),
    ({"density": 0.5, "excludes": ["no_such_layer"]}, "matches no node"),
    ({"densty": 0.5}, "unknown prune config"),
    ({}, "give a density or a plan"),
])
def test_config_errors_name_the_key(resnet, config, match):
    graph, weights = resnet
    with pytest.raises(ValidationError, match=match):
        prune(graph, weights, {**config, **NO_LATENCY})


def test_report_counts_and_latency(resnet):
    graph, weights = resnet
    _, small_w, report = prune(graph, weights, {"density": 0.5, "latency_repeat": 3})
    params = report["total"]["params"]
    assert params[1] == sum(a.size for a in small_w.values()) and params[1] < params[0]
    assert report["total"]["bytes"][1] == 4 * params[1]
    stem = next(r for r in report["layers"] if r["node"] == "conv2d")
    assert stem["params"] == [16 * 27 + 16, 8 * 27 + 8]
    assert stem["flops"] == [2 * 16 * 64 * 27, 2 * 8 * 64 * 27]
    lat = report["latency"]
    assert lat["before_ms"] > 0 and lat["after_ms"] > 0 and lat["repeat"] == 3
    assert any(r["node"] == "matmul" for r in report["not_prunable"])
