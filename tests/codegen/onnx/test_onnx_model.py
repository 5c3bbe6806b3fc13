"""The ONNX model to_onnx writes: checker (full_check) on every opset 13..newest, external data
for big weights, sanitized unique names, symbolic dims as dim_param, QDQ as the
QuantizeLinear / DequantizeLinear pattern onnxruntime fuses into int8 kernels, and typed errors.
Numbers: onnxruntime vs torch eager (rtol 1e-5, atol 1e-5) or vs the original model."""

import re

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper
from torch import nn

from msc.codegen import to_onnx
from msc.codegen.onnx.writer import MIN_OPSET, max_opset
from msc.errors import UnsupportedOpError, ValidationError
from msc.frontends.onnx.api import from_onnx
from msc.frontends.torch.api import from_torch
from msc.graph import MSCGraph, MSCJoint, MSCTensor
from tests.helpers.onnx_conformance import ORT_MAX_OPSET, run_onnxruntime

ort = pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(0)


class Block(nn.Module):
    """conv, norms, gelu, attention, reductions: the rows whose ONNX form changes by opset."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.LayerNorm(16)
        self.qkv = nn.Linear(16, 48)

    def forward(self, x):
        y = F.gelu(self.conv(x)).flatten(2)  # [b, 8, 16]
        q, k, v = self.qkv(self.norm(y)).reshape(-1, 8, 3, 2, 8).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v)
        return out.mean(dim=(1, 3)), y.amax(dim=-1).unsqueeze(-1).squeeze(-1)


def _eager(model, x):
    with torch.no_grad():
        return [t.numpy() for t in model(torch.from_numpy(x))]


@pytest.fixture(scope="module")
def block():
    torch.manual_seed(0)
    model = Block().eval()
    graph, weights = from_torch(model, [(["bz", 3, 4, 4], "float32")])
    return model, graph, weights


def test_every_opset_passes_the_checker_and_runs(block):
    model, graph, weights = block
    x = RNG.standard_normal((2, 3, 4, 4)).astype("float32")
    want = _eager(model, x)
    for opset in range(MIN_OPSET, max_opset() + 1):
        written = to_onnx(graph, weights, opset=opset)  # raises unless the checker passes
        assert written.opset_import[0].version == opset
        onnx.checker.check_model(written, full_check=True)
        if opset <= ORT_MAX_OPSET:
            for got, expected in zip(run_onnxruntime(written, [x]), want):
                np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    ops = {o: {n.op_type for n in to_onnx(graph, weights, opset=o).graph.node} for o in (13, 21)}
    assert "LayerNormalization" in ops[21] and "LayerNormalization" not in ops[13]
    assert "Gelu" in ops[21] and "Erf" in ops[13]


def test_symbolic_dims_are_dim_params(block):
    model, graph, weights = block
    written = to_onnx(graph, weights)
    dims = written.graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in dims] == ["bz", 3, 4, 4]
    assert written.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "bz"
    for batch in (1, 3):
        x = RNG.standard_normal((batch, 3, 4, 4)).astype("float32")
        got = run_onnxruntime(written, [x])
        np.testing.assert_allclose(got[0], _eager(model, x)[0], rtol=1e-5, atol=1e-5)


def test_external_data_for_big_weights(block, tmp_path):
    model, graph, weights = block
    path = tmp_path / "block.onnx"
    to_onnx(graph, weights, path, external_data=256)
    data = tmp_path / "block.onnx.data"
    assert data.exists() and data.stat().st_size > 256
    stored = onnx.load(str(path), load_external_data=False)
    external = [t.name for t in stored.graph.initializer
                if t.data_location == TensorProto.EXTERNAL]
    small = [t.name for t in stored.graph.initializer if t.data_location != TensorProto.EXTERNAL]
    assert external and small  # the big weights went out, the small ones stayed
    onnx.checker.check_model(str(path), full_check=True)
    x = RNG.standard_normal((2, 3, 4, 4)).astype("float32")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: x})
    np.testing.assert_allclose(got[0], _eager(model, x)[0], rtol=1e-5, atol=1e-5)
    to_onnx(graph, weights, path)  # small model: one file, the stale .data is not reused
    assert all(t.data_location != TensorProto.EXTERNAL for t in onnx.load(str(path)).graph.initializer)


def _hostile_model():
    names = ["in put", 'x"); import os #', "a/b:0", "a_b_0", ""]
    nodes = [helper.make_node("Relu", [names[0]], [names[1]], name="n1"),
             helper.make_node("Neg", [names[1]], [names[2]], name="n 2"),
             helper.make_node("Abs", [names[2]], [names[3]], name="n\"1"),
             helper.make_node("Sigmoid", [names[3]], ["out"], name="")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        names[0], TensorProto.FLOAT, [2, 3])], [helper.make_tensor_value_info(
            "out", TensorProto.FLOAT, [2, 3]), helper.make_tensor_value_info(
                names[3], TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def test_names_are_sanitized_and_unique():
    original = _hostile_model()
    written = to_onnx(*from_onnx(original))
    values = [v for n in written.graph.node for v in n.output] + \
        [i.name for i in written.graph.input] + [i.name for i in written.graph.initializer]
    assert len(values) == len(set(values))
    assert all(re.fullmatch(r"[0-9A-Za-z_.\-/]+", v) for v in values)
    node_names = [n.name for n in written.graph.node]
    assert len(node_names) == len(set(node_names)) and all(node_names)
    x = RNG.standard_normal((2, 3)).astype("float32")
    for got, want in zip(run_onnxruntime(written, [x]), run_onnxruntime(original, [x])):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def _qdq_conv_model():
    """x -> Q/DQ -> Conv(DQ(int8 weight)) -> Relu -> Q/DQ, as quantization tools write it."""
    arrays = {"w_q": RNG.integers(-60, 60, (8, 3, 3, 3)).astype(np.int8),
              "w_s": np.array(0.02, np.float32), "w_z": np.array(0, np.int8),
              "x_s": np.array(0.05, np.float32), "x_z": np.array(0, np.uint8),
              "y_s": np.array(0.1, np.float32), "y_z": np.array(0, np.uint8),
              "b": RNG.standard_normal(8).astype(np.float32)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_s", "x_z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "x_s", "x_z"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w_q", "w_s", "w_z"], ["wd"]),
             helper.make_node("Conv", ["xd", "wd", "b"], ["y"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["y"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "y_s", "y_z"], ["rq"]),
             helper.make_node("DequantizeLinear", ["rq", "y_s", "y_z"], ["out"])]
    graph = helper.make_graph(
        nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 8, 8, 8])],
        [numpy_helper.from_array(a, n) for n, a in arrays.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def test_qdq_joints_become_the_pattern_onnxruntime_runs_in_int8(tmp_path):
    original = _qdq_conv_model()
    graph, weights = from_onnx(original)
    assert {"quantize", "dequantize"} <= set(graph.inspect()["nodes"])
    written = to_onnx(graph, weights)
    ops = [n.op_type for n in written.graph.node]
    assert ops.count("QuantizeLinear") == 2 and ops.count("DequantizeLinear") == 2
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    session = ort.InferenceSession(written.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    assert "QLinearConv" in {n.op_type for n in onnx.load(options.optimized_model_filepath)
                             .graph.node}
    x = RNG.random((1, 3, 8, 8), dtype="float32")
    got = session.run(None, {session.get_inputs()[0].name: x})[0]
    want = run_onnxruntime(original, [x])[0]
    # the weight is stored dequantized (float) and requantized by onnxruntime: at most one
    # output step (y_s = 0.1) apart, and nearly all elements equal
    np.testing.assert_allclose(got, want, atol=0.1 + 1e-6)
    assert np.mean(got == want) > 0.95


def test_opset_out_of_range_is_a_validation_error(block):
    _, graph, weights = block
    for opset in (MIN_OPSET - 1, max_opset() + 1):
        with pytest.raises(ValidationError, match="opset") as err:
            to_onnx(graph, weights, opset=opset)
        assert err.value.context["key"] == "opset"


def test_unsupported_joints_are_all_named():
    x = MSCTensor("x:0", "float32", "", [2, 4], "x")
    inp = MSCJoint(0, "x", "", "input", outputs=[x])
    nodes = [inp]
    for i, optype in enumerate(["my_plugin", "nn.attention_var_len"]):
        out = MSCTensor(f"n{i}:0", "float32", "", [2, 4], f"n{i}")
        nodes.append(MSCJoint(i + 1, f"n{i}", "", optype, inputs=[(nodes[-1], 0)],
                              outputs=[out]))
    graph = MSCGraph("main", nodes, ["x:0"], ["n1:0"])
    with pytest.raises(UnsupportedOpError, match="cannot write 2 node") as err:
        to_onnx(graph)
    assert [(i["op"], i["node"]) for i in err.value.items] == [
        ("my_plugin", "n0"), ("nn.attention_var_len", "n1")]


def test_dropout_is_identity_at_inference():
    x = MSCTensor("x:0", "float32", "", [4, 5], "x")
    inp = MSCJoint(0, "x", "", "input", outputs=[x])
    drop = MSCJoint(1, "dropout", "", "nn.dropout", {"rate": "0.5"}, [(inp, 0)],
                    [MSCTensor("dropout:0", "float32", "", [4, 5], "dropout")])
    written = to_onnx(MSCGraph("main", [inp, drop], ["x:0"], ["dropout:0"]))
    assert [n.op_type for n in written.graph.node] == ["Identity"]
    data = RNG.random((4, 5), dtype="float32")
    np.testing.assert_array_equal(run_onnxruntime(written, [data])[0], data)
