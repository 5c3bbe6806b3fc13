"""The channel-dependency analysis: dim expressions (ties, freezes, products cut at each
other's boundaries), ops without a channel rule, head dims, and a graph from another frontend
(ONNX) checked against onnxruntime on the unpruned model with the pruned channels' consumer
columns zeroed (the same function)."""

import numpy as np
import pytest
import torch
from torch import nn

from msc.codegen import to_relax, to_torch
from msc.compression.prune import Analysis, prune
from msc.compression.prune.dims import Cat, Dims, Fixed, Leaf, Prod
from msc.frontends.translate import from_onnx, from_torch
from tests.helpers import prune_models as pm
from tests.helpers.codegen import relax_build_and_run, torch_run


def test_a_space_bound_to_heads_keeps_whole_heads():
    dims = Dims()
    channels = dims.leaf(32)
    heads, head_dim = dims.leaf(4), dims.leaf(8, inner=True)
    dims.unify(channels, Prod((heads, head_dim)))
    dims.freeze(head_dim)
    keep = {heads.space.id: np.array([1, 3])}
    assert list(dims.kept(channels, keep)) == [*range(8, 16), *range(24, 32)]
    assert dims.leaves(channels) == [heads.space]


def test_concat_positions_and_a_tensor_concatenated_twice():
    dims = Dims()
    a, b = dims.leaf(4), dims.leaf(2)
    keep = {a.space.id: np.array([0, 2]), b.space.id: np.array([1])}
    assert list(dims.kept(Cat((a, b, a)), keep)) == [0, 2, 5, 6, 8]
    maps = dims.index_maps(Cat((a, b, a)))
    assert list(maps[a.space.id]) == [0, 1, 2, 3, -1, -1, 0, 1, 2, 3]


def test_batch_times_heads_merged_then_split_keeps_the_heads_prunable():
    dims = Dims()
    channels = dims.leaf(32)
    merged = dims.reshape(Prod((Fixed(2), channels)), [8, 8])  # [B, 32] -> [B * 4, 8]
    assert merged is not None and len(merged) == 2
    back = dims.reshape(merged[0], [2, 4])  # [B * 4] -> [B, 4]
    assert back[0] == Fixed(2)
    assert isinstance(dims.resolve(back[1]), Leaf) and not dims.resolve(back[1]).space.inner


def test_mismatched_structures_freeze_instead_of_guessing():
    dims = Dims()
    a, b = dims.leaf(6), dims.leaf(6)
    dims.unify(Prod((Fixed(2), a)), Prod((Fixed(3), Fixed(4))))  # 2 x 6 vs 3 x 4
    assert dims.leaves(a) == []
    dims.unify(Cat((b, Fixed(2))), Prod((Fixed(2), Fixed(4))))
    assert dims.leaves(b) == []


class Sliced(nn.Module):
    """A channel slice from the middle of the axis: the sliced conv stays whole (a cut at
    the start or the end of an axis prunes, see test_prune_corpus.py)."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 16, 3, padding=1), nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        y = self.b(torch.relu(self.a(x))[:, 4:12])  # a cut from the middle
        return self.fc(torch.relu(y).mean((2, 3)))


def test_a_coupling_that_cannot_be_pruned_freezes_what_it_touches(tmp_path):
    torch.manual_seed(0)
    model = Sliced().eval()
    graph, weights = from_torch(model, [([1, 3, 8, 8], "float32")])
    analysis = Analysis(graph)
    assert [g.owners[0] for g in analysis.groups] == ["conv2d_1"]
    frozen = {f["node"]: f["reason"] for f in analysis.frozen()}
    assert "strided_slice" in frozen["conv2d"]
    small, small_w, report = prune(graph, weights, {"density": 0.5, "stride": 1,
                                                    "latency": False})
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype("float32")
    got = relax_build_and_run(to_relax(small, small_w, build_folder=tmp_path), [x])[0]
    with torch.no_grad():
        full = model.b(torch.relu(model.a(torch.from_numpy(x)))[:, 4:12]).relu().mean((2, 3))
    kept = report["plan"][graph.find_tensor("fc.weight").name]["in_indices"]
    assert len(kept) == 8
    want = full[:, kept].numpy() @ model.fc.weight[:, kept].detach().numpy().T + \
        model.fc.bias.detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_prune_head_dims_also_cuts_inside_heads(tmp_path):
    torch.manual_seed(0)
    graph, weights = from_torch(pm.Encoder().eval(), [([1, 5, 32], "float32")])
    small, small_w, report = prune(graph, weights, {"density": 0.5, "stride": 1,
                                                    "prune_head_dims": True, "latency": False})
    q = graph.find_tensor("q.weight").name
    rows = report["plan"][q]["out_indices"]
    assert len(rows) == 8 and len({r // 8 for r in rows}) == 2  # 2 heads x 4 dims each
    x = np.random.default_rng(0).standard_normal((1, 5, 32)).astype("float32")
    got_torch = torch_run(to_torch(small, small_w, build_folder=tmp_path / "t"), [x])[0]
    got_vm = relax_build_and_run(to_relax(small, small_w, build_folder=tmp_path / "r"), [x])[0]
    np.testing.assert_allclose(got_vm, got_torch, rtol=1e-4, atol=1e-4)


def test_an_onnx_graph_prunes_to_the_same_function(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w, b, fc = (rng.standard_normal(s).astype("float32") for s in ((16, 3, 3, 3), (16,),
                                                                  (10, 16)))
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1)]

    def model(fc_weight):
        inits = [numpy_helper.from_array(a, n) for a, n in ((w, "w"), (b, "b"),
                                                            (fc_weight, "fc"))]
        graph = helper.make_graph(
            nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                 ir_version=8)

    graph, weights = from_onnx(model(fc))
    small, small_w, report = prune(graph, weights, {"density": 0.5, "stride": 4,
                                                    "latency": False})
    conv = next(n for n in graph.get_nodes() if n.optype == "msc.conv2d_bias")
    kept = report["plan"][conv.weight_at("weight").name]["out_indices"]
    assert len(kept) == 8
    zeroed = fc.copy()
    zeroed[:, [c for c in range(16) if c not in kept]] = 0  # a pruned channel adds nothing
    x = rng.standard_normal((1, 3, 8, 8)).astype("float32")
    want = ort.InferenceSession(model(zeroed).SerializeToString()).run(None, {"x": x})[0]
    got = relax_build_and_run(to_relax(small, small_w, build_folder=tmp_path), [x])[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_params_given_as_inputs_follow_their_channels(tmp_path):
    """PReLU's alpha reaches the graph as a constant input, not a weight role."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.PReLU(16), nn.Conv2d(16, 4, 3)).eval()
    with torch.no_grad():
        model[1].weight.uniform_(0.0, 0.5)
    graph, weights = from_torch(model, [([1, 3, 8, 8], "float32")])
    small, small_w, report = prune(graph, weights, {"density": 0.5, "stride": 1,
                                                    "latency": False})
    kept = torch.tensor(report["plan"][graph.find_tensor("0.weight").name]["out_indices"])
    narrow = nn.Sequential(nn.Conv2d(3, 8, 3), nn.PReLU(8), nn.Conv2d(8, 4, 3)).eval()
    narrow.load_state_dict({"0.weight": model[0].weight[kept], "0.bias": model[0].bias[kept],
                            "1.weight": model[1].weight[kept], "2.weight": model[2].weight[:, kept],
                            "2.bias": model[2].bias})
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype("float32")
    with torch.no_grad():
        want = narrow(torch.from_numpy(x)).numpy()
    got = relax_build_and_run(to_relax(small, small_w, build_folder=tmp_path), [x])[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
