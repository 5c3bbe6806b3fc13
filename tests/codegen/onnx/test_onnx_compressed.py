"""Compressed graphs written as ONNX: a quantize()d graph becomes the QDQ pattern onnxruntime
fuses into int8 kernels (its optimized graph shows QLinearConv / QGemm), with outputs within
one quantization step of msc's backend and ~4x smaller weights; a pruned ResNet-style graph
runs in onnxruntime with the outputs of the msc backend and to_torch (rtol 1e-4)."""

import numpy as np
import onnx
import pytest
import torch
from torch import nn

from msc import relax
from msc.codegen import to_onnx, to_relax, to_torch
from msc.codegen.files import save_npz
from msc.codegen.qweight import pack_weights
from msc.codegen.weight_files import load_weights
from msc.compression import prune
from msc.compression.quantize import quantize
from msc.frontends import translate
from tests.helpers.prune_models import ResNet, randomize_norms

ort = pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(0)
INT8_KERNELS = {"QLinearConv", "QLinearMatMul", "MatMulInteger", "MatMulIntegerToFloat",
                "QGemm", "DynamicQuantizeMatMul"}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 32, 3, padding=1), nn.Conv2d(32, 64, 3, padding=1)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = torch.relu(self.c2(torch.relu(self.c1(x))))
        return self.fc(x.mean(dim=(2, 3)))


def _vm(graph, weights, x):
    return relax.VirtualMachine(relax.build(to_relax(graph, weights)), relax.cpu())["main"](
        x).numpy()


def _optimized_ops(path, tmp_path) -> list[str]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]


@pytest.fixture(scope="module")
def qdq():
    torch.manual_seed(0)
    graph, weights = translate.from_torch(Net().eval(), [([1, 3, 8, 8], "float32")])
    batches = [{"inp_0": RNG.standard_normal((1, 3, 8, 8)).astype("float32")}
               for _ in range(4)]
    qgraph, qweights, report = quantize(graph, weights, batches,
                                        {"per_layer": False, "quantize_outputs": True})
    return graph, weights, qgraph, qweights, report, batches[0]["inp_0"]


def test_qdq_graph_runs_as_int8_kernels_in_onnxruntime(qdq, tmp_path):
    _, _, qgraph, qweights, report, x = qdq
    proto = to_onnx(qgraph, qweights, tmp_path / "q.onnx")
    int8_inits = [t.name for t in proto.graph.initializer if t.data_type == onnx.TensorProto.INT8
                  and len(t.dims) > 1]
    assert len(int8_inits) == 3  # the two conv weights and the linear weight
    ops = _optimized_ops(tmp_path / "q.onnx", tmp_path)
    assert ops.count("QLinearConv") == 2, ops
    assert "Conv" not in ops and INT8_KERNELS & set(ops) - {"QLinearConv"}, ops
    session = ort.InferenceSession(str(tmp_path / "q.onnx"), providers=["CPUExecutionProvider"])
    got = session.run(None, {"inp_0": x})[0]
    step = max(np.max(e["scale"]) for e in report.plan.values() if e["axis"] == -1)
    np.testing.assert_allclose(got, _vm(qgraph, qweights, x), rtol=0, atol=step)


def test_qdq_onnx_is_smaller_than_float(qdq, tmp_path):
    graph, weights, qgraph, qweights, _, _ = qdq
    save_npz(tmp_path / "q.npz", pack_weights(qweights))  # as `msc quantize` saves them
    to_onnx(graph, weights, tmp_path / "f.onnx")
    to_onnx(qgraph, load_weights(tmp_path / "q.npz"), tmp_path / "q.onnx")
    ratio = (tmp_path / "f.onnx").stat().st_size / (tmp_path / "q.onnx").stat().st_size
    assert ratio > 3.0, ratio  # 4x on the weights, less the float/int32 biases and the graph


def test_pruned_resnet_runs_in_onnxruntime(tmp_path):
    torch.manual_seed(0)
    model = randomize_norms(ResNet().eval())
    graph, weights = translate.from_torch(model, [([1, 3, 16, 16], "float32")])
    small, small_weights, _ = prune(graph, weights, {"density": 0.5, "latency": False})
    x = RNG.random((1, 3, 16, 16)).astype("float32")
    proto = to_onnx(small, small_weights, tmp_path / "pruned.onnx")
    full = to_onnx(graph, weights)
    count = sum(int(np.prod(t.dims)) for t in proto.graph.initializer)
    assert count < 0.5 * sum(int(np.prod(t.dims)) for t in full.graph.initializer)
    session = ort.InferenceSession(str(tmp_path / "pruned.onnx"),
                                   providers=["CPUExecutionProvider"])
    got = session.run(None, {"inp_0": x})[0]
    np.testing.assert_allclose(got, _vm(small, small_weights, x), rtol=1e-4, atol=1e-5)
    expected = to_torch(small, small_weights)(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
