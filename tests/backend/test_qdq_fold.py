"""QDQ folding (msc/backend/fuse/qdq/fold.py): quantize / dequantize around convs, matmuls and
residual adds become int8 kernels, on QDQ models from onnxruntime's ``quantize_static`` and
from ``compression.quantize``; outputs against onnxruntime running the same QDQ model."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper

from msc import relax
from msc.backend.fuse.qdq.fold import int8_grid
from msc.codegen import to_onnx, to_relax
from msc.compression.quantize import apply_plan, calibrate
from msc.frontends.translate import from_onnx
from tests.helpers.qdq_models import ort_quantize


def _float_model():
    """conv(+bias) -> relu -> conv -> + residual -> relu -> maxpool -> flatten -> matmul + b."""
    rng = np.random.default_rng(0)  # the same weights on every call

    def init(name, shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32),
                                       name)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["s"]),
             helper.make_node("Relu", ["s"], ["r2"]),
             helper.make_node("MaxPool", ["r2"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("MatMul", ["f", "w3"], ["m"]),
             helper.make_node("Add", ["m", "b3"], ["y"])]
    inits = [init("w1", (8, 3, 3, 3)), init("b1", (8,), 0.1), init("w2", (8, 8, 3, 3)),
             init("w3", (8 * 5 * 5, 10), 0.1), init("b3", (10,), 0.1)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 10, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _inputs(count, seed):
    rng = np.random.default_rng(seed)
    return [rng.random((1, 3, 10, 10), dtype=np.float32) for _ in range(count)]


@pytest.fixture(scope="module")
def ort_qdq(tmp_path_factory):
    return ort_quantize(_float_model(), _inputs(4, 1), tmp_path_factory.mktemp("qdq"))


def _ort(model, x):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def _vm(mod, **kw):
    ex = relax.build(mod, **kw)
    return ex, relax.VirtualMachine(ex, relax.cpu())


def test_onnxruntime_qdq_model_runs_int8_kernels(ort_qdq):
    graph, weights = from_onnx(ort_qdq)
    mod = to_relax(graph, weights)
    ex, vm = _vm(mod)
    fused, ops = ex.stats["fused"], ex.stats["ops"]
    assert fused.get("qdq:nn.conv2d+add->quantize") == 1  # conv1 with its bias
    assert fused.get("qdq:nn.conv2d->quantize") == 1
    assert fused.get("qdq:add+nn.relu->quantize", 0) + fused.get("qdq:add->quantize", 0) == 1
    # MatMul -> Q -> DQ -> Add(bias, quantized on its own) -> Q: one kernel, two requantizes
    assert fused.get("qdq:matmul->quantize->dequantize+add->quantize") == 1
    assert ops["int8.conv2d"] == {"native": 2} and ops["int8.matmul"] == {"native": 1}
    assert "add" not in ops and ops["quantize"] == {"tir": 1}  # only the input's quantize
    assert "nn.conv2d" not in ops and "matmul" not in ops  # no float conv / matmul left
    _, fake = _vm(mod, fuse=False)  # the same QDQ graph computed in float (fake quantization)
    scale = float(numpy_helper.to_array(next(
        i for i in ort_qdq.graph.initializer if i.name == "y_scale")))
    for x in _inputs(3, 2):
        got, want = vm["main"](x).numpy(), _ort(ort_qdq, x)
        # the float QDQ path does the same roundings: equal up to a tie (one step of y)
        np.testing.assert_allclose(got, fake["main"](x).numpy(), rtol=0, atol=1.01 * scale)
        # onnxruntime's int8 run (fixed-point requantization): within two steps of y
        np.testing.assert_allclose(got, want, rtol=0, atol=2.01 * scale)


@pytest.mark.parametrize("activations", ["uint8", "int8"])
def test_compression_quantize_graph_runs_int8_kernels(activations):
    graph, weights = from_onnx(_float_model())
    plan = calibrate(graph, weights, [{"x": x} for x in _inputs(4, 1)],
                     {"executor": "relax", "activation_dtype": activations})
    qgraph, qweights = apply_plan(graph, weights, plan)
    mod = to_relax(qgraph, qweights)
    ex, vm = _vm(mod)
    assert ex.stats["ops"]["int8.conv2d"] == {"native": 2}
    assert ex.stats["ops"]["int8.matmul"] == {"native": 1}
    _, fake = _vm(mod, fuse=False)
    onnx_qdq = to_onnx(qgraph, qweights)  # int8 initializers + DequantizeLinear
    ref = [_ort(_float_model(), x) for x in _inputs(3, 2)]
    got = [vm["main"](x).numpy() for x in _inputs(3, 2)]
    for g, x in zip(got, _inputs(3, 2)):
        # the last matmul's output is float (no quantize after it): compare relatively
        np.testing.assert_allclose(g, fake["main"](x).numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(g, _ort(onnx_qdq, x), rtol=0.02, atol=0.02)
    err = sum(float(np.sum((g - r) ** 2)) for g, r in zip(got, ref))
    assert 10 * np.log10(sum(float(np.sum(r ** 2)) for r in ref) / err) > 25  # SQNR, dB


def test_float_weights_off_the_grid_stay_float():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 6)).astype(np.float32)
    assert int8_grid(w, 0) is None
    scale = np.float32(0.05) * np.arange(1, 5, dtype=np.float32)
    q = rng.integers(-127, 128, (4, 6)).astype(np.int8)
    q[:, 0] = 127
    got = int8_grid(q.astype(np.float32) * scale[:, None], 0)
    assert got is not None
    np.testing.assert_array_equal(got[0], q)
    np.testing.assert_allclose(got[1], scale, rtol=1e-6)


def test_fuse_false_keeps_the_qdq_ops(ort_qdq):
    graph, weights = from_onnx(ort_qdq)
    ex = relax.build(to_relax(graph, weights), fuse=False)
    assert "int8.conv2d" not in ex.stats["ops"] and "nn.conv2d" in ex.stats["ops"]


_LUT_REGION = '''# from tvm.script import relax as R

@R.function
def main(x: R.Tensor((1, 4, 8, 8), dtype="float32")) -> R.Tensor((1, 4, 8, 8), dtype="float32"):
    with R.dataflow():
        q = R.quantize(x, R.const(0.05, "float32"), R.const(128, "uint8"), out_dtype="uint8")
        d = R.dequantize(q, R.const(0.05, "float32"), R.const(128, "uint8"))
        s = R.nn.{op}(d)
        f = R.floor(R.multiply(s, R.const(4.0, "float32")))
        q2 = R.quantize(f, R.const(0.1, "float32"), R.const(0, "uint8"), out_dtype="uint8")
        y = R.dequantize(q2, R.const(0.1, "float32"), R.const(0, "uint8"))
        R.output(y)
    return y
'''


@pytest.mark.parametrize("op", ["softplus", "selu", "silu"])
def test_any_pointwise_activation_and_unary_op_folds_into_one_table(op):
    """The table-lookup pass takes the op table's families and activations (not a list of
    names): softplus, selu and floor fold as gelu and tanh do, equal to the fake-quantized run."""
    mod = relax.from_script(_LUT_REGION.replace("{op}", op))
    ex = relax.build(mod)
    assert ex.stats["fused"] == {f"qdq:lut(nn.{op},multiply,floor,quantize,dequantize)": 1}
    x = np.random.default_rng(0).normal(0, 2, (1, 4, 8, 8)).astype(np.float32)
    got = relax.VirtualMachine(ex, relax.cpu())["main"](x).numpy()
    fake = relax.VirtualMachine(relax.build(mod, fuse=False), relax.cpu())["main"](x).numpy()
    np.testing.assert_allclose(got, fake, rtol=0, atol=0.1 + 1e-6)  # one step at most
    assert np.mean(got != fake) < 0.01
