"""QDQ folds beyond plain convs and linears, on onnxruntime ``quantize_static`` models:
depthwise / grouped convs, concat on int8 values, attention's matmuls of two activations and
elementwise regions as table lookups (a tanh GELU). Outputs against onnxruntime running the
same QDQ model and against msc's fake-quantized float run (``fuse=False``)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper

from msc import relax
from msc.codegen import to_relax
from msc.frontends.translate import from_onnx
from tests.helpers.qdq_models import ort_quantize


def _model(nodes, inits, shape, rng, opset=13):
    arrays = [numpy_helper.from_array((rng.standard_normal(s) * k).astype(np.float32), n)
              for n, s, k in inits]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, shape)], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], arrays)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=8)


def _cnn():
    """conv -> relu -> depthwise (stride 2) -> grouped 1x1 (4 groups) ++ 1x1 branch ->
    concat -> batch norm -> relu (densenet's pre-activation) -> average pool -> conv ->
    global average pool."""
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1] * 4), n("Relu", ["c1"], ["r1"]),
             n("Conv", ["r1", "wd"], ["d"], group=16, pads=[1] * 4, strides=[2, 2]),
             n("Conv", ["d", "wg"], ["g"], group=4),
             n("Conv", ["r1", "wb"], ["br"], strides=[2, 2]),
             n("Concat", ["g", "br"], ["cat"], axis=1),
             n("BatchNormalization", ["cat", "gamma", "beta", "mean", "var"], ["bn"]),
             n("Relu", ["bn"], ["r2"]),
             n("AveragePool", ["r2"], ["ap"], kernel_shape=[3, 3], pads=[1] * 4),
             n("Conv", ["ap", "w3"], ["c3"], pads=[1] * 4),
             n("GlobalAveragePool", ["c3"], ["y"])]
    inits = [("w1", (16, 8, 3, 3), 0.3), ("b1", (16,), 0.1), ("wd", (16, 1, 3, 3), 0.5),
             ("wg", (16, 4, 1, 1), 0.5), ("wb", (8, 16, 1, 1), 0.3), ("w3", (6, 24, 3, 3), 0.2)]
    model = _model(nodes, inits, [1, 8, 12, 12], np.random.default_rng(0))
    rng = np.random.default_rng(5)
    model.graph.initializer.extend(numpy_helper.from_array(
        (rng.random(24) + 0.5).astype(np.float32), k) for k in ("gamma", "beta", "mean", "var"))
    return model


def _attention(seq=16, dim=32, heads=4):
    """q/k/v linears, per-head softmax(q k^T * c) v, output linear, tanh GELU."""
    n, hd = helper.make_node, dim // heads
    nodes = []
    for p in "qkv":
        nodes += [n("MatMul", ["x", f"w{p}"], [f"{p}0"]), n("Add", [f"{p}0", f"b{p}"], [f"{p}1"]),
                  n("Reshape", [f"{p}1", "heads"], [f"{p}2"]),
                  n("Transpose", [f"{p}2"], [p], perm=[0, 2, 1, 3])]
    nodes += [n("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
              n("MatMul", ["q", "kt"], ["s0"]), n("Mul", ["s0", "c"], ["s"]),
              n("Softmax", ["s"], ["p"], axis=-1), n("MatMul", ["p", "v"], ["o0"]),
              n("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
              n("Reshape", ["o1", "merge"], ["o2"]), n("MatMul", ["o2", "wo"], ["h"]),
              # GPT-2's gelu: 0.5 h (1 + tanh(sqrt(2 / pi) (h + 0.044715 h^3)))
              n("Pow", ["h", "three"], ["h3"]), n("Mul", ["h3", "a"], ["h3a"]),
              n("Add", ["h", "h3a"], ["u"]), n("Mul", ["u", "r"], ["ur"]),
              n("Tanh", ["ur"], ["t"]), n("Add", ["t", "one"], ["t1"]),
              n("Mul", ["h", "half"], ["hh"]), n("Mul", ["hh", "t1"], ["y"])]
    rng = np.random.default_rng(1)
    inits = [(f"w{p}", (dim, dim), dim ** -0.5) for p in "qkvo"]
    inits += [(f"b{p}", (dim,), 0.1) for p in "qkv"]
    model = _model(nodes, inits, [1, seq, dim], rng, opset=17)
    consts = {"heads": np.array([1, seq, heads, hd]), "merge": np.array([1, seq, dim]),
              "c": np.float32(hd ** -0.5), "three": np.float32(3), "a": np.float32(0.044715),
              "r": np.float32(np.sqrt(2 / np.pi)), "one": np.float32(1), "half": np.float32(0.5)}
    model.graph.initializer.extend(numpy_helper.from_array(np.array(v), k)
                                   for k, v in consts.items())
    return model


def _quantized(model, tmp_path, shape, seed=1):
    rng = np.random.default_rng(seed)
    return ort_quantize(model, [rng.random(shape, dtype=np.float32) * 2 - 0.5
                                for _ in range(4)], tmp_path)


def _ort(model, x):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def _runs(qdq):
    mod = to_relax(*from_onnx(qdq))
    ex = relax.build(mod)
    fake = relax.VirtualMachine(relax.build(mod, fuse=False), relax.cpu())["main"]
    return ex, relax.VirtualMachine(ex, relax.cpu())["main"], fake


def _y_scale(qdq) -> float:
    last = next(n for n in qdq.graph.node if n.op_type == "QuantizeLinear"
                and any(m.input[0] == n.output[0] and m.output[0] == "y" for m in qdq.graph.node))
    return float(numpy_helper.to_array(next(i for i in qdq.graph.initializer
                                            if i.name == last.input[1])))


def _sqnr(ref, got):
    return 10 * np.log10(np.sum(ref.astype(np.float64) ** 2) / np.sum((ref - got) ** 2))


def test_depthwise_grouped_convs_and_concat_run_int8(tmp_path):
    qdq = _quantized(_cnn(), tmp_path, (1, 8, 12, 12))
    ex, vm, fake = _runs(qdq)
    ops = ex.stats["ops"]
    assert ops["int8.conv2d"] == {"native": 5} and "nn.conv2d" not in ops
    assert ops["int8.concat"] == {"numpy": 1} and "concat" not in ops
    # the global average pool on the bytes; the 3x3 one stays float (scalar kernel too slow)
    assert ops["int8.avg_pool2d"] == {"native": 1} and "mean" not in ops
    # batch norm -> relu between two quantizes: one per-channel table lookup
    assert any(k.startswith("qdq:lut(nn.batch_norm") for k in ex.stats["fused"])
    assert "nn.batch_norm" not in ops and ops["dequantize"] == {"tir": 1}  # the output's
    step = _y_scale(qdq)
    x = np.random.default_rng(2).random((1, 8, 12, 12), dtype=np.float32)
    got = vm(x).numpy()
    # the same roundings as the float QDQ graph: equal up to a tie (one step of y)
    np.testing.assert_allclose(got, fake(x).numpy(), rtol=0, atol=1.01 * step)
    # onnxruntime's QLinearConv requantizes in fixed point: within two steps of y
    np.testing.assert_allclose(got, _ort(qdq, x), rtol=0, atol=2.01 * step)


def test_attention_matmuls_and_gelu_table_run_int8(tmp_path):
    model = _attention()
    qdq = _quantized(model, tmp_path, (1, 16, 32))
    ex, vm, fake = _runs(qdq)
    ops, fused = ex.stats["ops"], ex.stats["fused"]
    assert ops["int8.batch_matmul"] == {"native": 2} and "matmul" not in ops
    gelu = [k for k in fused if k.startswith("qdq:lut(") and "tanh" in k]
    assert len(gelu) == 1 and "tanh" not in ops and "power" not in ops  # one table
    rng = np.random.default_rng(3)
    xs = [rng.random((1, 16, 32), dtype=np.float32) * 2 - 0.5 for _ in range(3)]
    got = [vm(x).numpy() for x in xs]
    step = _y_scale(qdq)
    for g, x in zip(got, xs):
        np.testing.assert_allclose(g, fake(x).numpy(), rtol=0, atol=1.01 * step)
    ref = np.concatenate([_ort(model, x) for x in xs])
    ours, theirs = _sqnr(ref, np.concatenate(got)), _sqnr(ref, np.concatenate(
        [_ort(qdq, x) for x in xs]))
    assert ours > theirs - 0.5 and ours > 20  # within onnxruntime's quantization error
