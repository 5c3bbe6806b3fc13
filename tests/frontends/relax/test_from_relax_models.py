"""from_relax on the Relax modules TVM 0.27's importers make (tests/frontends/relax/data/relax_models, written
by gen_models.py from torch.fx, torch.export and ONNX models): the graph MSC would build."""

import pathlib

import pytest

from msc.frontends.translate import from_relax
from msc.graph import MSCGraph
from msc.relax import from_script

DATA = pathlib.Path(__file__).parent / "data" / "relax_models"

# name -> (node names in order (a prefix for big graphs), optype counts, output aliases/shapes)
EXPECTED = {
    "cnn_bn": (
        ["inp_0", "conv2d", "batch_norm", "batch_norm.0", "relu", "max_pool2d", "conv2d_1",
         "relu_1", "reshape", "matmul"],
        {"total": 10, "input": 1, "nn.conv2d": 1, "nn.batch_norm": 1, "get_item": 1,
         "nn.relu": 2, "nn.max_pool2d": 1, "msc.conv2d_bias": 1, "reshape": 1,
         "msc.linear_bias": 1},
        [("matmul", [1, 10])]),
    "mlp": (
        ["inp_0", "matmul", "relu", "matmul_1", "softmax"],
        {"total": 5, "input": 1, "msc.linear_bias": 2, "nn.relu": 1, "nn.softmax": 1},
        [("softmax", [2, 4])]),
    "resnet_block": (
        ["x", "conv2d", "batch_norm", "batch_norm.0", "relu", "conv2d_1", "batch_norm_1",
         "batch_norm_1.0", "add", "relu_1", "mean", "reshape", "matmul", "tuple"],
        {"total": 14, "input": 1, "nn.conv2d": 2, "nn.batch_norm": 2, "get_item": 2,
         "nn.relu": 2, "add": 1, "mean": 1, "reshape": 1, "msc.linear_bias": 1, "tuple": 1},
        [("tuple", [1, 5])]),
    "encoder_layer": (
        ["x", "permute_dims", "reshape", "matmul", "reshape_1", "reshape_2", "expand_dims"],
        {"total": 71, "input": 1, "permute_dims": 10, "reshape": 21, "msc.linear_bias": 4,
         "expand_dims": 1, "squeeze": 1, "constant": 7, "take": 3, "multiply": 2,
         "broadcast_to": 4, "matmul": 2, "nn.softmax": 1, "equal": 1, "logical_not": 2,
         "astype": 2, "max": 1, "full_like": 1, "where": 1, "add": 2, "nn.layer_norm": 2,
         "nn.relu": 1, "tuple": 1},
        [("tuple", [1, 4, 16])]),
    "attention_fx": (
        ["inp_0", "inp_1", "inp_2", "inp_3", "attention", "attention_bias", "tuple"],
        {"total": 7, "input": 4, "msc.attention": 2, "tuple": 1},
        [("tuple_0", [1, 2, 4, 8]), ("tuple_1", [1, 2, 4, 8])]),
    "embedding_fx": (
        ["inp_0", "take", "matmul"],
        {"total": 3, "input": 1, "msc.embedding": 1, "msc.linear_bias": 1},
        [("matmul", [2, 5, 3])]),
    "dynamic_mlp_onnx": (
        ["x", "matmul", "relu", "matmul_1"],
        {"total": 4, "input": 1, "msc.linear_bias": 2, "nn.relu": 1},
        [("matmul_1", ["bz", 4])]),
    "dynamic_conv_export": (
        ["input", "conv2d", "relu", "reshape", "matmul", "tuple"],
        {"total": 6, "input": 1, "msc.conv2d_bias": 1, "nn.relu": 1, "reshape": 1,
         "msc.linear_bias": 1, "tuple": 1},
        [("tuple", ["s31", 2])]),
}
DYNAMIC = {"dynamic_mlp_onnx", "dynamic_conv_export"}


@pytest.fixture(scope="module", params=sorted(EXPECTED))
def translated(request):
    text = (DATA / f"{request.param}.tvmscript").read_text()
    graph, weights = from_relax(text)
    return request.param, graph, weights


def test_nodes_and_outputs(translated):
    name, graph, _ = translated
    names, counts, outputs = EXPECTED[name]
    summary = graph.inspect()
    assert summary["nodes"] == counts
    assert [n.name for n in graph.get_nodes()][:len(names)] == names
    assert [(o["name"], o["shape"]) for o in summary["outputs"]] == outputs
    assert ("prims" in summary) == (name in DYNAMIC)
    if name in DYNAMIC:
        assert summary["prims"] == {"total": 1, "shape": 1}


def test_graph_is_consistent_and_round_trips(translated):
    _, graph, _ = translated
    graph.check()
    assert MSCGraph.from_json(graph.to_json()).to_json() == graph.to_json()


def test_weights_match_their_tensors(translated):
    _, graph, weights = translated
    tensors = {t.name: t for t in graph.get_weights()}
    assert list(weights) == list(tensors)
    for wname, data in weights.items():
        assert (list(data.shape), str(data.dtype)) == (tensors[wname].shape,
                                                        tensors[wname].dtype)


def test_linear_weights_are_out_in():
    text = (DATA / "mlp.tvmscript").read_text()
    graph, weights = from_relax(text)
    fc1 = graph.find_node("matmul").weight_at("weight")
    assert (fc1.layout.name, fc1.shape) == ("OI", [32, 16])
    # torch's fc1.weight is metadata[0] ([out, in]); from_fx permutes it before the matmul
    mod = from_script(text)
    torch_weight = mod["main"].body.blocks[0].bindings[0].value.args[0].data
    assert (weights[fc1.name] == torch_weight).all()


def test_without_folding_the_fx_bias_reshape_stays_in_the_conv():
    graph, _ = from_relax((DATA / "cnn_bn.tvmscript").read_text(),
                          opt_config={"opt_level": 0})
    node = graph.find_node("conv2d_1")
    assert node.optype == "msc.conv2d_bias" and node.get_attr("expand_bias") == "1,8,1,1"
