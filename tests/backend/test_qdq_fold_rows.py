"""QDQ softmax, layer norm and split chains as kernels on bytes (fuse/qdq/rows.py), on an
onnxruntime ``quantize_static`` attention block with a run-time mask and a post-norm: outputs
against msc's fake-quantized float run (``fuse=False``), onnxruntime running the same QDQ
model, and the float model."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from msc import relax
from msc.codegen import to_relax
from msc.frontends.translate import from_onnx
from tests.helpers.qdq_chain_models import masked_softmax_infinite_scale
from tests.helpers.qdq_models import ort_quantize, qdq_block


def _sqnr(ref, got):
    return 10 * np.log10(np.sum(ref.astype(np.float64) ** 2) / np.sum((ref - got) ** 2))


def test_split_masked_softmax_and_layer_norm_run_on_bytes(tmp_path):
    model = qdq_block()
    rng = np.random.default_rng(2)
    xs = [rng.random((1, 16, 32), dtype=np.float32) * 2 - 0.5 for _ in range(4)]
    qdq = ort_quantize(model, xs, tmp_path)
    mod = to_relax(*from_onnx(qdq))
    ex = relax.build(mod)
    ops, fused = ex.stats["ops"], ex.stats["fused"]
    assert fused["qdq:softmax"] == 1 and fused["qdq:split"] == 1
    assert fused["qdq:add->layer_norm"] == 1 and "int8.add" not in ops  # the residual in it
    assert ops["int8.split"] == {"numpy": 3} and "split" not in ops
    assert ops["int8.softmax"] == {"native": 1} and "nn.softmax" not in ops
    assert ops["int8.layer_norm"] == {"native": 1} and "nn.layer_norm" not in ops
    vm = relax.VirtualMachine(ex, relax.cpu())["main"]
    fake = relax.VirtualMachine(relax.build(mod, fuse=False), relax.cpu())["main"]
    got = np.concatenate([vm(x).numpy() for x in xs])
    step = max(np.abs(got).max() / 127, 1e-6)  # y's quantization step, about
    # the float chain's roundings but for exp's last bit: a rare code of p one step off
    assert np.mean(np.abs(got - np.concatenate([fake(x).numpy() for x in xs]))) < 0.05 * step
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    ref = np.concatenate([session.run(None, {"x": x})[0] for x in xs])
    qsession = ort.InferenceSession(qdq.SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = np.concatenate([qsession.run(None, {"x": x})[0] for x in xs])
    assert _sqnr(ref, got) > _sqnr(ref, theirs) - 0.5 and _sqnr(ref, got) > 20



def test_class_token_concat_runs_on_bytes(tmp_path):
    """A ViT's embeddings: concat(expand(class token), patches) between quantizes. The
    expand and its Q / DQ fold to a float constant when the program is built; the concat
    quantizes it then and runs on bytes (QConcat with a constant part): the same outputs as
    the float concat, within one code of onnxruntime."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(4)
    inits = [numpy_helper.from_array(rng.standard_normal((1, 1, 16)).astype(np.float32), "cls"),
             numpy_helper.from_array(np.array([4, 1, 16], np.int64), "shape"),
             numpy_helper.from_array((rng.standard_normal((16, 8)) * 0.3).astype(np.float32),
                                     "w")]
    n = helper.make_node
    nodes = [n("Expand", ["cls", "shape"], ["tok"]), n("Concat", ["tok", "x"], ["cat"], axis=1),
             n("MatMul", ["cat", "w"], ["y"])]
    model = helper.make_model(helper.make_graph(
        nodes, "cls", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 7, 8])], inits),
        opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    xs = [rng.standard_normal((4, 6, 16)).astype(np.float32) for _ in range(3)]
    qdq = ort_quantize(model, xs, tmp_path)
    mod = to_relax(*from_onnx(qdq))
    ex = relax.build(mod)
    assert ex.stats["fused"]["qdq:concat"] == 1 and "concat" not in ex.stats["ops"]
    got = relax.VirtualMachine(ex, relax.cpu())["main"](xs[0]).numpy()
    fake = relax.VirtualMachine(relax.build(mod, fuse=False), relax.cpu())["main"](xs[0])
    want = ort.InferenceSession(qdq.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": xs[0]})[0]
    last = [node for node in qdq.graph.node if node.op_type == "DequantizeLinear"][-1]
    step = float(next(numpy_helper.to_array(i) for i in qdq.graph.initializer
                      if i.name == last.input[1]))
    assert np.abs(got - fake.numpy()).max() <= 1.001 * step
    assert np.abs(got - want).max() <= 1.001 * step


def test_rotary_halves_slice_the_bytes(tmp_path):
    """A decoder's rotate_half: two strided_slices of one dequantized tensor, each before a
    quantize, become byte slices (QSlice; 384 runs each: one strided call in the chain), no
    kernel called from Python; the same outputs as the float slices, within one code of
    onnxruntime."""
    from onnx import TensorProto, helper, numpy_helper

    from msc.backend.runtime.threads import num_threads
    from tests.helpers.qdq_chain_models import python_calls

    ints = {"s0": [0], "s4": [4], "s8": [8], "ax": [3]}
    inits = [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in ints.items()]
    inits.append(numpy_helper.from_array(np.array(-1.0, np.float32), "neg"))
    n = helper.make_node
    nodes = [n("Slice", ["x", "s0", "s4", "ax"], ["lo"]), n("Slice", ["x", "s4", "s8", "ax"],
                                                            ["hi"]),
             n("Mul", ["hi", "neg"], ["nhi"]), n("Concat", ["nhi", "lo"], ["rot"], axis=3),
             n("Mul", ["x", "rot"], ["y"])]
    model = helper.make_model(helper.make_graph(
        nodes, "rotary", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 4, 12, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 4, 12, 8])], inits),
        opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal((8, 4, 12, 8)).astype(np.float32) for _ in range(3)]
    qdq = ort_quantize(model, xs, tmp_path)
    mod = to_relax(*from_onnx(qdq))
    ex = relax.build(mod)
    assert ex.stats["fused"]["qdq:strided_slice"] == 2 and "strided_slice" not in ex.stats["ops"]
    f = relax.VirtualMachine(ex, relax.cpu())["main"]
    with num_threads(1):
        got = f(xs[0]).numpy()
        assert python_calls(f.entry({}).plan) == 0
    fake = relax.VirtualMachine(relax.build(mod, fuse=False), relax.cpu())["main"](xs[0])
    want = ort.InferenceSession(qdq.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": xs[0]})[0]
    last = [node for node in qdq.graph.node if node.op_type == "DequantizeLinear"][-1]
    step = float(next(numpy_helper.to_array(i) for i in qdq.graph.initializer
                      if i.name == last.input[1]))
    assert np.abs(got - fake.numpy()).max() <= 1.001 * step
    assert np.abs(got - want).max() <= 1.001 * step


def test_an_infinite_scale_keeps_the_chain_on_the_float_ops():
    """A chain with an infinite (or otherwise unusable) quantization scale does not fold into
    a row kernel: the kernel read the NaN codes its own way (every probability 1, where
    onnxruntime gives 0). On the float ops msc gives onnxruntime's unoptimized answer exactly."""
    model = masked_softmax_infinite_scale()
    x = np.random.default_rng(0).standard_normal((2, 2, 8, 8)).astype(np.float32)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    mod = to_relax(*from_onnx(model))
    ex = relax.build(mod)
    assert "qdq:softmax" not in ex.stats["fused"] and "int8.softmax" not in ex.stats["ops"]
    got = relax.VirtualMachine(ex, relax.cpu())["main"](x).numpy()
    np.testing.assert_array_equal(got, want)
    # the same chain with a finite scale before the softmax still folds
    finite = masked_softmax_infinite_scale()
    for init in finite.graph.initializer:
        if init.name == "s2":
            init.CopyFrom(onnx.numpy_helper.from_array(np.float32(1e36), "s2"))
    assert relax.build(to_relax(*from_onnx(finite))).stats["fused"]["qdq:softmax"] == 1
