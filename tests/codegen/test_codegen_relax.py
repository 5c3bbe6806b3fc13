"""The Relax codegen: Relax -> graph -> to_relax builds a module structurally equal to the
input; the module runs on relax.build / VirtualMachine and equals torch; the script reads as
specified (comments, weights by name, symbolic dims)."""

import numpy as np
import pytest
import torch
from torch import nn

from msc import relax, tir
from msc.codegen import to_relax
from msc.errors import ValidationError
from msc.frontends.torch.api import from_torch
from msc.frontends.translate import from_relax
from msc.graph import MSCGraph, testing
from msc.relax.analysis import assert_structural_equal
from tests.helpers.codegen import assert_outputs, relax_build_and_run, ruff_check

RNG = np.random.default_rng(0)


def _const(*shape, dtype="float32"):
    return relax.const(RNG.standard_normal(shape).astype(dtype))


def _module(body, *params):
    bb = relax.BlockBuilder()
    with bb.function("main", list(params)):
        with bb.dataflow():
            out = bb.emit_output(body(bb, *params))
        bb.emit_func_output(out)
    return bb.get()


def _x(*shape, dtype="float32", name="x"):
    return relax.Var(name, relax.TensorStructInfo(shape, dtype))


def _conv_block(bb, x):
    conv = bb.emit(relax.op.nn.conv2d(x, _const(4, 3, 3, 3), padding=[1, 1], out_layout="NCHW"))
    add = bb.emit(relax.op.add(conv, _const(1, 4, 1, 1)))
    split = bb.emit(relax.op.split(bb.emit(relax.op.nn.relu(add)), 2, axis=1))
    item = bb.emit(split[0])
    flat = bb.emit(relax.op.reshape(item, [1, 128]))
    weight = bb.emit(relax.op.permute_dims(_const(5, 128)))
    return relax.op.add(bb.emit(relax.op.matmul(flat, weight)), _const(5))


def _batch_norm(bb, x):
    bn = bb.emit(relax.op.nn.batch_norm(x, *(_const(3) for _ in range(4)), axis=1,
                                        training=False))
    return relax.op.nn.softmax(bb.emit(bn[0]), axis=1)


def _embedding(bb, ids):
    index = bb.emit(relax.op.astype(ids, "int32"))
    return relax.op.take(_const(10, 4), index, axis=0)


def _attention(bb, q, k, v):
    qkv = [bb.emit(relax.op.permute_dims(t, [0, 2, 1, 3])) for t in (q, k, v)]
    attention = bb.emit(relax.op.nn.attention(*qkv, scale=0.5))
    return relax.op.permute_dims(attention, [0, 2, 1, 3])


def _symbolic(bb, x):
    n = x.struct_info.shape[0]
    flat = bb.emit(relax.op.reshape(x, [n * 3, 4]))
    return relax.op.sum(flat, axis=[1], keepdims=True)


CASES = {
    "conv_block": (_conv_block, [_x(1, 3, 8, 8)]),
    "batch_norm": (_batch_norm, [_x(2, 3, 4, 4)]),
    "embedding": (_embedding, [_x(2, 3, dtype="int64", name="ids")]),
    "attention": (_attention, [_x(2, 3, 5, 4, name=n) for n in "qkv"]),
    "symbolic": (_symbolic, [_x(tir.Var("n", "int64"), 3, 4)]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_relax_graph_relax_is_structurally_equal(name, tmp_path):
    body, params = CASES[name]
    mod = _module(body, *params)
    graph, weights = from_relax(mod)
    generated = to_relax(graph, weights, build_folder=tmp_path)
    assert_structural_equal(generated, mod)
    assert ruff_check(tmp_path / "main.py") == ""


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, 6)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.fc(torch.nn.functional.avg_pool2d(y, 2).flatten(1)).tanh()


def test_torch_graph_relax_runs_on_the_backend_and_equals_torch(tmp_path):
    model = Net().eval()
    with torch.no_grad():
        model.bn.running_var.uniform_(0.5, 1.5)
    graph, weights = from_torch(model, [(["bz", 3, 8, 8], "float32")])
    mod = to_relax(graph, weights, build_folder=tmp_path)
    for batch in (1, 2):
        x = RNG.random((batch, 3, 8, 8), dtype="float32")
        with torch.no_grad():
            want = model(torch.from_numpy(x)).numpy()
        assert_outputs(relax_build_and_run(mod, [x]), [want], rtol=1e-5, atol=1e-5)


def _inference_prune_graph():
    """prune_graph's batch_norm in inference mode (the torch codegen writes eval-mode norms;
    Relax's default is training=True)."""
    text = testing.prune_graph().to_json()
    return MSCGraph.from_json(text.replace('"axis": "1"', '"axis": "1", "training": "0"'))


@pytest.mark.parametrize("make", [testing.conv_relu_graph, testing.residual_graph,
                                  testing.dynamic_graph, testing.shared_weight_graph,
                                  _inference_prune_graph])
def test_hand_built_graphs_match_the_torch_codegen(make, tmp_path):
    from msc.codegen import to_torch
    from tests.helpers.codegen import torch_run

    graph = make()
    weights = {t.name: RNG.uniform(0.5, 1.5, t.shape).astype("float32")  # variances > 0
               for t in graph.get_weights()}
    mod = to_relax(graph, weights, build_folder=tmp_path / "relax")
    model = to_torch(graph, weights, build_folder=tmp_path / "torch")
    shape = [2 if d < 0 else d for d in graph.get_inputs()[0].shape]
    x = RNG.random(shape, dtype="float32")
    assert_outputs(relax_build_and_run(mod, [x]), torch_run(model, [x]), rtol=1e-5, atol=1e-5)


def test_script_layout_comments_weights_and_symbolic_dims(tmp_path):
    graph = testing.dynamic_graph()
    weights = {t.name: np.ones(t.shape, "float32") for t in graph.get_weights()}
    to_relax(graph, weights, build_folder=tmp_path)
    source = (tmp_path / "main.py").read_text()
    assert "# conv2d(msc.conv2d_bias): inp_0:0 -> conv2d:0<bz,6,4,4|float32|NCHW>" in source
    assert "bz = tir.Var('bz', \"int64\")" in source
    assert "relax.TensorStructInfo([bz, 3, 10, 10], 'float32')" in source
    assert "[(inp_0.struct_info.shape[0] * 6), 16]" in source
    with np.load(tmp_path / "main_params.npz", allow_pickle=False) as params:
        assert sorted(params.files) == ["const", "const_1", "const_2"]
        assert params["const_1"].shape == (1, 6, 1, 1)  # a bias of the conv's rank


def test_without_weights_they_stay_parameters(tmp_path):
    mod = to_relax(testing.conv_relu_graph(), build_folder=tmp_path)
    assert [p.name_hint for p in mod["main"].params] == ["inp_0", "const", "const_1"]
    assert not (tmp_path / "main_params.npz").exists()


def test_unknown_config_keys_are_refused(tmp_path):
    with pytest.raises(ValidationError, match="need_tests"):
        to_relax(testing.conv_relu_graph(), codegen_config={"need_tests": False},
                 build_folder=tmp_path)
