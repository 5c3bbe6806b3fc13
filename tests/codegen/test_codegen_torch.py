"""The torch codegen: torch -> graph -> to_torch equals torch (float32 rtol/atol 1e-5) with the
original state_dict keys; ONNX light zoo -> graph -> to_torch equals onnxruntime; hand-built
graphs; weights files (.safetensors read without the safetensors package, .npz fallback)."""

import ast
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from msc.codegen import to_torch
from msc.frontends.onnx.api import from_onnx
from msc.frontends.torch.api import from_torch
from msc.graph import testing
from tests.helpers.codegen import assert_outputs, ruff_check, torch_run

RNG = np.random.default_rng(0)


def _weights(graph):
    return {t.name: RNG.standard_normal(t.shape).astype(t.dtype) for t in graph.get_weights()}


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2, bias=False)
        self.fc = nn.Linear(8 * 2 * 2, 10)
        self.ln = nn.LayerNorm(10)

    def forward(self, x):
        y = F.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        y = F.adaptive_avg_pool2d(self.conv2(y) + 1.0, (2, 2))
        return F.softmax(self.ln(self.fc(y.flatten(1))), dim=-1)


class TokenNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 16)
        self.qkv = nn.Linear(16, 48)
        self.norm = nn.GroupNorm(2, 4)

    def forward(self, ids):
        q, k, v = self.qkv(self.emb(ids)).reshape(2, 5, 3, 4, 4).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.norm(out).sum(dim=-1), torch.argmax(out, dim=-1)


def _randomize(model: nn.Module) -> nn.Module:
    with torch.no_grad():
        for buf in model.buffers():
            if buf.dtype.is_floating_point:
                buf.uniform_(0.5, 1.5)
    return model.eval()


class Depthwise11(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(11, 11, 3, padding=1, groups=11)

    def forward(self, x):
        return F.max_pool2d(self.conv(x), 2)


@pytest.mark.parametrize("model, info, inputs", [
    (ConvNet(), [([1, 3, 8, 8], "float32")], [RNG.random((1, 3, 8, 8), dtype="float32")]),
    (TokenNet(), [([2, 5], "int64")], [RNG.integers(0, 20, (2, 5))]),
    # 11 groups (a depthwise conv pruned to 11 channels) were once written as groups=1
    (Depthwise11(), [([1, 11, 6, 6], "float32")],
     [RNG.random((1, 11, 6, 6), dtype="float32")]),
], ids=["convnet", "tokens", "groups11"])
def test_torch_graph_torch_equals_torch(model, info, inputs, tmp_path):
    model = _randomize(model)
    graph, weights = from_torch(model, info)
    generated = to_torch(graph, weights, build_folder=tmp_path)
    with torch.no_grad():
        want = model(*[torch.from_numpy(x) for x in inputs])
    want = [w.numpy() for w in (want if isinstance(want, tuple) else (want,))]
    assert_outputs(torch_run(generated, inputs), want, rtol=1e-5, atol=1e-5)
    assert sorted(generated.state_dict()) == sorted(model.state_dict())
    generated.load_state_dict(model.state_dict())  # the original keys load as they are
    assert ruff_check(tmp_path / "main.py") == ""


def test_dynamic_batch_runs_at_any_batch(tmp_path):
    model = _randomize(ConvNet())
    graph, weights = from_torch(model, [(["bz", 3, 8, 8], "float32")])
    generated = to_torch(graph, weights, build_folder=tmp_path)
    assert "inp_0.shape[0]" in (tmp_path / "main.py").read_text()
    for batch in (1, 3):
        x = RNG.random((batch, 3, 8, 8), dtype="float32")
        with torch.no_grad():
            want = model(torch.from_numpy(x)).numpy()
        assert_outputs(torch_run(generated, [x]), [want])


LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


@pytest.mark.parametrize("name", ["squeezenet", "shufflenet", "inception_v1"])
def test_onnx_light_zoo_to_torch_equals_onnxruntime(name, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    path = LIGHT / f"light_{name}.onnx"
    graph, weights = from_onnx(str(path))
    generated = to_torch(graph, weights, {"need_test": False}, build_folder=tmp_path)
    session = ort.InferenceSession(str(path))
    feeds = {i.name: RNG.random([d if isinstance(d, int) else 1 for d in i.shape],
                                dtype="float32") for i in session.get_inputs()}
    assert_outputs(torch_run(generated, list(feeds.values())), session.run(None, feeds),
                   rtol=1e-5, atol=1e-5)


def test_conv_relu_graph_is_a_readable_module(tmp_path):
    graph = testing.conv_relu_graph()
    weights = _weights(graph)
    model = to_torch(graph, weights, build_folder=tmp_path)
    x = RNG.random((1, 3, 10, 10), dtype="float32")
    want = F.relu(F.conv2d(torch.from_numpy(x), torch.from_numpy(weights["const"]),
                           torch.from_numpy(weights["const_1"])))
    assert_outputs(torch_run(model, [x]), [want.numpy()])
    source = (tmp_path / "main.py").read_text()
    assert "self.conv2d = nn.Conv2d(3, 6, kernel_size=(7, 7)" in source
    assert "# relu(nn.relu): conv2d:0 -> relu:0(relu)<1,6,4,4|float32|NCHW>" in source
    assert "relu = F.relu(conv2d)" in source


def test_residual_graph_with_tuple_outputs(tmp_path):
    graph = testing.residual_graph()
    weights = _weights(graph)
    model = to_torch(graph, weights, build_folder=tmp_path)
    x = RNG.random((1, 8, 4, 4), dtype="float32")
    conv = F.conv2d(torch.from_numpy(x), torch.from_numpy(weights["const"]),
                    torch.from_numpy(weights["const_1"]), padding=1)
    a, b = conv.split(4, 1)
    want = [torch.cat([F.relu(a), b], 1) + torch.from_numpy(x), torch.sigmoid(b)]
    assert_outputs(torch_run(model, [x]), [w.numpy() for w in want])


def test_shared_weight_reuses_the_layer(tmp_path):
    graph = testing.shared_weight_graph()
    weights = _weights(graph)
    model = to_torch(graph, weights, build_folder=tmp_path)
    assert list(model.state_dict()) == ["matmul.weight"]
    x = RNG.random((1, 8), dtype="float32")
    w = weights["const"]
    assert_outputs(torch_run(model, [x]), [x @ w.T @ w.T])


def test_without_weights_the_module_is_freshly_initialized(tmp_path):
    model = to_torch(testing.conv_relu_graph(), build_folder=tmp_path)
    assert not list(tmp_path.glob("*_weights.*"))
    assert model(torch.rand(1, 3, 10, 10)).shape == (1, 6, 4, 4)


def _load(path: Path):
    from msc.codegen.files import load_script

    return load_script(path)


def test_generated_safetensors_reader_matches_safetensors(tmp_path):
    safetensors = pytest.importorskip("safetensors.torch")
    graph = testing.prune_graph()
    to_torch(graph, _weights(graph), build_folder=tmp_path)
    path = tmp_path / "main_weights.safetensors"
    ours, theirs = _load(tmp_path / "main.py").read_safetensors(str(path)), \
        safetensors.load_file(str(path))
    assert sorted(ours) == sorted(theirs)
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)


def test_npz_weights_without_safetensors(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "safetensors", None)
    monkeypatch.setitem(sys.modules, "safetensors.numpy", None)
    graph = testing.conv_relu_graph()
    weights = _weights(graph)
    model = to_torch(graph, weights, build_folder=tmp_path)
    assert (tmp_path / "main_weights.npz").exists()
    assert not (tmp_path / "main_weights.safetensors").exists()
    np.testing.assert_array_equal(model.conv2d.weight.detach().numpy(), weights["const"])


def test_generated_module_imports_only_numpy_and_torch(tmp_path):
    graph = testing.dynamic_graph()
    to_torch(graph, _weights(graph), build_folder=tmp_path)
    tree = ast.parse((tmp_path / "main.py").read_text())
    modules = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
               for a in n.names}
    modules |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert modules <= {"json", "math", "os", "sys", "numpy", "torch"}
