"""onnxruntime's quantized contrib ops (com.microsoft QLinearAdd, QLinearSoftmax, QGemm, ...:
the QOperator format of ``quantize_static`` and the ONNX Model Zoo's int8 models), through
the user's path (from_onnx -> MSCGraph -> to_relax -> build), against onnxruntime running the
same op: the output codes within one quantization step (onnxruntime's kernels round a few
ties their own way), most of them equal."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper

from msc import relax
from msc.codegen import to_relax
from msc.frontends.translate import from_onnx

MS = "com.microsoft"
U8, S8 = TensorProto.UINT8, TensorProto.INT8


def _model(nodes, inputs, outputs, inits):
    graph = helper.make_graph(nodes, "ms_quant", inputs, outputs,
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid(MS, 1)], ir_version=8)


def _both(model, feeds: dict):
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    ex = relax.build(to_relax(*from_onnx(model)))
    got = relax.VirtualMachine(ex, relax.cpu())["main"](*feeds.values())
    got = [got] if not isinstance(got, (list, tuple)) else list(got)
    return [g.numpy() for g in got], want, ex


def _codes_close(got, want, steps: int = 1):
    assert got.dtype == want.dtype and got.shape == want.shape
    diff = np.abs(got.astype(np.int32) - want.astype(np.int32))
    assert diff.max() <= steps, diff.max()
    return float(np.mean(diff == 0))


def _q(name, shape, kind=U8):
    return helper.make_tensor_value_info(name, kind, shape)


def _codes(rng, shape, kind=U8):
    lo, hi = (0, 256) if kind == U8 else (-128, 128)
    return rng.integers(lo, hi, shape).astype(np.uint8 if kind == U8 else np.int8)


def _params(**scales):
    """name -> (scale, zero point) initializers, uint8 zero points."""
    out = {}
    for name, (scale, zero) in scales.items():
        out[f"{name}_s"] = np.float32(scale)
        out[f"{name}_z"] = np.uint8(zero)
    return out


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_binary_ops_broadcast(op):
    rng = np.random.default_rng(0)
    node = helper.make_node(op, ["a", "a_s", "a_z", "b", "b_s", "b_z", "y_s", "y_z"], ["y"],
                            domain=MS)
    inits = {**_params(a=(0.02, 120), y=(0.05 if op == "QLinearAdd" else 0.01, 128)),
             "b": _codes(rng, (1, 8, 1, 1)), **_params(b=(0.03, 100))}
    model = _model([node], [_q("a", [2, 8, 5, 5])], [_q("y", [2, 8, 5, 5])], inits)
    (got,), (want,), _ = _both(model, {"a": _codes(rng, (2, 8, 5, 5))})
    assert _codes_close(got, want) > 0.95


@pytest.mark.parametrize("op, attrs", [("QLinearSigmoid", {}),
                                       ("QLinearLeakyRelu", {"alpha": 0.2})])
def test_unary_ops_are_one_table(op, attrs):
    rng = np.random.default_rng(1)
    node = helper.make_node(op, ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], domain=MS, **attrs)
    model = _model([node], [_q("x", [4, 64])], [_q("y", [4, 64])],
                   _params(x=(0.05, 128), y=(1 / 255 if op == "QLinearSigmoid" else 0.04, 40)))
    (got,), (want,), ex = _both(model, {"x": _codes(rng, (4, 64))})
    assert _codes_close(got, want, steps=0) == 1.0
    assert any(k.startswith("qdq:lut") for k in ex.stats["fused"])  # one byte table


@pytest.mark.parametrize("opset, axis", [(13, -1), (13, 1), (11, 1)])
def test_softmax_axis_follows_the_replaced_opset(opset, axis):
    rng = np.random.default_rng(2)
    node = helper.make_node("QLinearSoftmax", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"],
                            domain=MS, opset=opset, axis=axis)
    model = _model([node], [_q("x", [2, 3, 6])], [_q("y", [2, 3, 6])],
                   {**_params(x=(0.1, 128)), "y_s": np.float32(1 / 256), "y_z": np.uint8(0)})
    (got,), (want,), _ = _both(model, {"x": _codes(rng, (2, 3, 6))})
    _codes_close(got, want)


def test_concat_of_three_scales():
    rng = np.random.default_rng(3)
    names = ["y_s", "y_z"]
    for k in range(3):
        names += [f"x{k}", f"x{k}_s", f"x{k}_z"]
    node = helper.make_node("QLinearConcat", names, ["y"], domain=MS, axis=1)
    inits = {**_params(y=(0.04, 128), x0=(0.02, 128), x1=(0.05, 110), x2=(0.03, 140))}
    inits["x2"] = _codes(rng, (2, 2, 4))  # a constant part
    model = _model([node], [_q("x0", [2, 3, 4]), _q("x1", [2, 1, 4])], [_q("y", [2, 6, 4])],
                   inits)
    (got,), (want,), _ = _both(model, {"x0": _codes(rng, (2, 3, 4)),
                                       "x1": _codes(rng, (2, 1, 4))})
    _codes_close(got, want)


@pytest.mark.parametrize("channels_last", [0, 1])
def test_global_average_pool(channels_last):
    rng = np.random.default_rng(4)
    shape = [2, 5, 5, 16] if channels_last else [2, 16, 5, 5]
    out = [2, 1, 1, 16] if channels_last else [2, 16, 1, 1]
    node = helper.make_node("QLinearGlobalAveragePool", ["x", "x_s", "x_z", "y_s", "y_z"],
                            ["y"], domain=MS, channels_last=channels_last)
    model = _model([node], [_q("x", shape)], [_q("y", out)], _params(x=(0.05, 128),
                                                                     y=(0.01, 128)))
    (got,), (want,), _ = _both(model, {"x": _codes(rng, shape)})
    _codes_close(got, want)


def test_average_pool_with_padding():
    rng = np.random.default_rng(5)
    node = helper.make_node("QLinearAveragePool", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"],
                            domain=MS, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                            count_include_pad=0)
    model = _model([node], [_q("x", [1, 8, 9, 9])], [_q("y", [1, 8, 5, 5])],
                   _params(x=(0.05, 128), y=(0.03, 128)))
    (got,), (want,), _ = _both(model, {"x": _codes(rng, (1, 8, 9, 9))})
    _codes_close(got, want)


def test_where():
    rng = np.random.default_rng(6)
    node = helper.make_node("QLinearWhere", ["c", "x", "x_s", "x_z", "m", "m_s", "m_z",
                                             "y_s", "y_z"], ["y"], domain=MS)
    inits = {**_params(x=(0.05, 128), m=(0.02, 100), y=(0.05, 128)),
             "c": rng.random((1, 4, 7)) > 0.5, "m": _codes(rng, (4, 1))}
    model = _model([node], [_q("x", [3, 4, 7])], [_q("y", [3, 4, 7])], inits)
    (got,), (want,), _ = _both(model, {"x": _codes(rng, (3, 4, 7))})
    _codes_close(got, want)


def test_reduce_mean_is_its_qdq_meaning():
    """onnxruntime's CPU provider has no QLinearReduceMean kernel: against numpy computing
    dequantize -> mean -> quantize (round half to even, saturate)."""
    rng = np.random.default_rng(9)
    node = helper.make_node("QLinearReduceMean", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"],
                            domain=MS, axes=[2], keepdims=1)
    model = _model([node], [_q("x", [3, 4, 7])], [_q("y", [3, 4, 1])],
                   _params(x=(0.05, 128), y=(0.02, 128)))
    x = _codes(rng, (3, 4, 7))
    mean = ((x.astype(np.float32) - 128) * np.float32(0.05)).mean(axis=2, keepdims=True)
    want = np.clip(np.round(mean / np.float32(0.02)) + 128, 0, 255).astype(np.uint8)
    got = relax.VirtualMachine(relax.build(to_relax(*from_onnx(model))), relax.cpu())["main"](
        x).numpy()
    _codes_close(got, want)


@pytest.mark.parametrize("trans_b, per_column, quantized_out",
                         [(0, False, True), (1, True, True), (1, True, False)])
def test_qgemm(trans_b, per_column, quantized_out):
    """Y = A' B' + C with an int32 bias of scale a_scale * b_scale; b_scale per output
    column (per row of B when transB); a float Y when y_scale is left out."""
    rng = np.random.default_rng(7)
    n, k = 12, 20
    b_shape = (n, k) if trans_b else (k, n)
    inits = {**_params(a=(0.04, 128)), "b": _codes(rng, b_shape, S8),
             "b_s": (rng.uniform(0.005, 0.02, n) if per_column else np.float64(0.01))
             .astype(np.float32),
             "b_z": np.zeros(n if per_column else (), np.int8),
             "c": rng.integers(-500, 500, n).astype(np.int32)}
    ins = ["a", "a_s", "a_z", "b", "b_s", "b_z", "c"]
    if quantized_out:
        inits.update(_params(y=(0.1, 128)))
        ins += ["y_s", "y_z"]
    node = helper.make_node("QGemm", ins, ["y"], domain=MS, transB=trans_b, alpha=1.0)
    out = _q("y", [3, n]) if quantized_out else helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, [3, n])
    model = _model([node], [_q("a", [3, k])], [out], inits)
    (got,), (want,), _ = _both(model, {"a": _codes(rng, (3, k))})
    if quantized_out:
        _codes_close(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_ms_domain_quantize_and_dequantize():
    node_q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], domain=MS)
    node_d = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], domain=MS)
    model = _model([node_q, node_d], [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                    [4, 8])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
                   {"s": np.float32(0.05), "z": np.uint8(128)})
    x = np.random.default_rng(8).standard_normal((4, 8)).astype(np.float32)
    (got,), (want,), _ = _both(model, {"x": x})
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["resnet", "bert"])
def test_quantize_static_qoperator_models_run_on_the_int8_kernels(name, tmp_path):
    """A corpus model quantized by onnxruntime in its QOperator format: the output equals
    onnxruntime's to the bit (it did on 35 of 37 corpus models; vit one code off in residual adds, efficientnet's ceil-mode
    QLinearAveragePool is onnxruntime's own outlier, see docs/frontends.md), and the QLinear
    chains run on msc's int8 kernels."""
    from benchmarks.corpus_speed import export
    from tests.helpers.corpus import MODELS
    from tests.helpers.qdq_models import ort_quantize

    module, _, inputs = MODELS[name]()
    exported = export(module, inputs, tmp_path / "export.onnx")
    first = exported.graph.input[0].name
    model = ort_quantize(exported, inputs[:1], tmp_path, first, qoperator=True)
    assert any(node.domain == MS for node in model.graph.node)
    feeds = {first: inputs[0]}
    (got,), (want,), ex = _both(model, feeds)
    np.testing.assert_array_equal(got, want)
    assert any(key.startswith("qdq:") for key in ex.stats["fused"])


@pytest.mark.parametrize("peak", [127, 100])
def test_qlinear_conv_and_matmul_take_the_int8_kernels_when_exact(peak):
    """QLinearConv / QLinearMatMul with constant int8 weights of zero point 0 become
    Q(op(DQ(x))): with a code of +-127 under each scale (what symmetric quantizers write) the
    backend runs them on its int8 kernels (int32 sums), with smaller codes (a scale widened for
    an int32 bias) as float ops on the dequantized values. Both give onnxruntime's codes."""
    rng = np.random.default_rng(10)
    w = rng.integers(-peak, peak + 1, (6, 4, 3, 3)).astype(np.int8)
    w[:, 0, 0, 0] = peak  # every channel reaches the peak
    m = rng.integers(-peak, peak + 1, (24, 5)).astype(np.int8)
    m[0, :] = -peak
    inits = {**_params(x=(0.03, 128), y=(0.05, 120), r=(0.04, 128)),
             "w": w, "w_s": rng.uniform(0.005, 0.02, 6).astype(np.float32),
             "w_z": np.zeros(6, np.int8), "bias": rng.integers(-300, 300, 6).astype(np.int32),
             "m": m, "m_s": np.float32(0.01), "m_z": np.int8(0),
             "shape": np.array([2, 24], np.int64)}
    nodes = [helper.make_node("QLinearConv", ["x", "x_s", "x_z", "w", "w_s", "w_z", "y_s",
                                              "y_z", "bias"], ["y"], pads=[1, 1, 1, 1]),
             helper.make_node("Reshape", ["y", "shape"], ["f"]),
             helper.make_node("QLinearMatMul", ["f", "y_s", "y_z", "m", "m_s", "m_z", "r_s",
                                                "r_z"], ["r"])]
    model = _model(nodes, [_q("x", [2, 4, 2, 2])], [_q("r", [2, 5])], inits)
    (got,), (want,), ex = _both(model, {"x": _codes(rng, (2, 4, 2, 2))})
    _codes_close(got, want, steps=0)
    ops = ex.stats["ops"]
    assert ("int8.conv2d" in ops and "int8.matmul" in ops) == (peak == 127), ops
