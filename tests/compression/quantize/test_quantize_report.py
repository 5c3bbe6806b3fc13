"""compression.quantize end to end: excludes keep layers float, the report points at a
damaged layer and its suggested excludes meet the target (checked by an independent run),
plans and QDQ graphs survive JSON, and bad input fails with typed errors."""

import json

import numpy as np
import pytest
import torch

from msc.compression.quantize import apply_plan, calibrate, load_plan, quantize, save_plan
from msc.compression.quantize.runner import make_runner
from msc.errors import SerializationError, ValidationError
from msc.frontends import translate
from msc.graph import MSCGraph

DEAD = 5  # hidden unit of fc1 that never fires: fc2's garbage weights on it cost nothing


def _mlp(damaged: bool):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 8)).eval()
    with torch.no_grad():
        model[0].bias[DEAD] = -100.0
        if damaged:  # outliers in every row of fc2: per-channel int8 crushes the other weights
            model[2].weight[:, DEAD] = 50.0
    graph, weights = translate.from_torch(model, [([4, 16], "float32")])
    rng = np.random.default_rng(0)
    data = [{"inp_0": rng.standard_normal((4, 16)).astype("float32")} for _ in range(6)]
    return model, graph, weights, data


def _holder(graph: MSCGraph, alias: str) -> str:
    return next(n.name for n in graph.get_nodes()
                if any(w.alias == alias for w in n.weights.values()))


def _sqnr(ref: np.ndarray, got: np.ndarray) -> float:
    return 10 * np.log10(np.sum(ref.astype(np.float64) ** 2) / np.sum((ref - got) ** 2.0))


@pytest.fixture(scope="module")
def damaged():
    model, graph, weights, data = _mlp(damaged=True)
    qgraph, qweights, report = quantize(graph, weights, data, {"target_sqnr": 30.0})
    return model, graph, weights, data, qgraph, qweights, report


def test_report_ranks_the_damaged_layer_first(damaged):
    _, graph, _, _, _, _, report = damaged
    fc2 = _holder(graph, "2.weight")
    d = report.to_dict()
    assert d["layers"][0]["node"] == fc2
    assert d["layers"][0]["sqnr_db"] < 20 < d["layers"][1]["sqnr_db"]
    assert d["output"]["sqnr_db"] < 30
    # The worst tensor is fc2's (relu'd) output: a large cumulative error with a small local
    # one, so the error comes from upstream, from fc2, not from this tensor's quantizer.
    worst = d["tensors"][0]
    assert graph.find_node(worst["producer"]).parents[0].name == fc2
    assert worst["sqnr_db"] < 10 and worst["local_sqnr_db"] > 30
    assert report.overlays["layer_sqnr_db"] == {r["node"]: r["sqnr_db"] for r in d["layers"]}
    assert set(report.overlays["layer_sqnr_db"]) <= set(graph.node_names)
    json.dumps(d)  # plain JSON: no infinities, no numpy scalars
    assert fc2 in report.table() and "suggested excludes" in report.table()


def test_suggested_excludes_meet_the_target_when_measured_again(damaged):
    model, graph, weights, data, _, _, report = damaged
    assert report.suggested_excludes == [_holder(graph, "2.weight")]
    assert report.to_dict()["target_met"]
    plan = calibrate(graph, weights, data, {"exclude": report.suggested_excludes})
    qgraph, qweights = apply_plan(graph, weights, plan)
    run = make_runner(qgraph, qweights, "relax")  # another executor than the search used
    x = np.concatenate([d["inp_0"] for d in data])
    ref = model(torch.from_numpy(x)).detach().numpy()
    got = np.concatenate([run([d["inp_0"]])[graph.output_names[0]] for d in data])
    assert _sqnr(ref, got) >= 30.0


def test_an_excluded_layer_stays_float():
    _, graph, weights, data = _mlp(damaged=False)
    fc2 = _holder(graph, "2.weight")
    plan = calibrate(graph, weights, data, {"exclude": {"names": [fc2]}, "per_layer": False,
                                            "quantize_outputs": False})
    qgraph, qweights = apply_plan(graph, weights, plan)
    qgraph.check()
    node = qgraph.find_node(fc2)
    assert [p.optype for p in node.parents] == ["nn.relu"]
    np.testing.assert_array_equal(qweights[node.weights["weight"].name],
                                  weights[node.weights["weight"].name])
    others = [n for n in qgraph.get_nodes() if n.optype == "msc.linear_bias" and n.name != fc2]
    assert all(n.parents[0].optype == "dequantize" for n in others)
    # onnxruntime's placement too: the excluded joint reads the float relu output (between a
    # DQ and a Q onnxruntime would quantize its float weights itself)
    plan = calibrate(graph, weights, data, {"exclude": [fc2]})
    qgraph, _ = apply_plan(graph, weights, plan)
    assert [p.optype for p in qgraph.find_node(fc2).parents] == ["nn.relu"]

    assert all(not np.array_equal(qweights[n.weights["weight"].name],
                                  weights[n.weights["weight"].name]) for n in others)
    by_type = calibrate(graph, weights, data, {"exclude": {"optypes": ["msc.linear_bias"]}})
    assert by_type == {}
    by_regex = calibrate(graph, weights, data, {"exclude": {"regex": "^matmul$"}})
    assert _holder(graph, "0.weight") not in {c for e in by_regex.values()
                                              for c in e.get("consumers", [])}


def test_plan_and_qdq_graph_survive_json(tmp_path):
    _, graph, weights, data = _mlp(damaged=False)
    plan = calibrate(graph, weights, data, {"method": "percentile"})
    save_plan(plan, str(tmp_path / "plan.json"))
    loaded = load_plan(str(tmp_path / "plan.json"))
    assert loaded == json.loads(json.dumps(plan))
    g1, w1 = apply_plan(graph, weights, plan)
    g2, w2 = apply_plan(graph, weights, str(tmp_path / "plan.json"))
    assert g1.to_dict() == g2.to_dict()
    assert all(np.array_equal(w1[k], w2[k]) for k in w1)
    g1.to_json(str(tmp_path / "q.json"))
    back = MSCGraph.from_json(str(tmp_path / "q.json"))
    back.check()
    x = [data[0]["inp_0"]]
    out = graph.output_names[0]
    np.testing.assert_array_equal(make_runner(back, w1)(x)[out], make_runner(g1, w1)(x)[out])
    del loaded["relu:0"]  # an edited plan: that activation stays float
    g3, _ = apply_plan(graph, weights, loaded)
    assert "relu_0_q" not in g3.node_names and "relu_1_0_q" in g3.node_names


def test_bad_input_names_what_to_fix(tmp_path):
    _, graph, weights, data = _mlp(damaged=False)
    with pytest.raises(ValidationError, match="unknown quantization setting"):
        calibrate(graph, weights, data, {"methd": "minmax"})
    with pytest.raises(ValidationError, match="not nodes of the graph"):
        calibrate(graph, weights, data, {"exclude": ["nope"]})
    with pytest.raises(ValidationError, match="method='kl'"):
        calibrate(graph, weights, data, {"method": "kl"})
    with pytest.raises(ValidationError, match="names no tensor"):
        apply_plan(graph, weights, {"conv9:0": {"scale": 1.0, "zero_point": 0, "axis": -1,
                                                "dtype": "int8"}})
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SerializationError, match="bad.json"):
        load_plan(str(tmp_path / "bad.json"))
    with pytest.raises(ValidationError, match="no value for this input"):
        calibrate(graph, weights, [{"x": data[0]["inp_0"]}])
    with pytest.raises(ValidationError, match="no batch"):
        calibrate(graph, weights, [])


def test_quantize_outputs_places_qdq_after_the_chosen_joints_too():
    _, graph, weights, data = _mlp(damaged=False)
    plan = calibrate(graph, weights, data)  # the default: onnxruntime's placement
    qgraph, _ = apply_plan(graph, weights, plan)
    relus = [n for n in qgraph.get_nodes() if n.optype == "nn.relu"]
    # linear -> relu -> Q/DQ (the relu carries the linear's output QDQ, as onnxruntime)
    assert [r.parents[0].optype for r in relus] == ["msc.linear_bias", "msc.linear_bias"]
    assert [[c.optype for c in r.children] for r in relus] == [["quantize"], ["quantize"]]
    assert graph.output_names[0] not in plan  # the graph output stays float
    assert qgraph.find_producer(qgraph.output_names[0]).optype == "msc.linear_bias"
