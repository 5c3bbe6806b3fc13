"""ONNX quantization, recurrent and attention ops against onnxruntime (or onnx's reference
evaluator where onnxruntime lacks the op)."""

import numpy as np
import pytest

from msc.frontends.onnx.testing import assert_matches_ort, node_model, run_reference

RNG = np.random.default_rng(4)
X = RNG.standard_normal((2, 3, 4)).astype("float32")


# --------------------------------------------------------------------------------------------
# Quantization.

@pytest.mark.parametrize("zero_dtype", ["uint8", "int8"])
@pytest.mark.parametrize("per_axis", [False, True])
def test_quantize_dequantize_round_trip(zero_dtype, per_axis):
    from onnx import helper

    from msc.frontends.onnx.testing import graph_model

    shape = (3,) if per_axis else ()
    inits = {"s": np.full(shape, 0.05, "float32"), "z": np.full(shape, 3, zero_dtype)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)]
    model = graph_model(nodes, {"x": X}, ["q", "y"], initializers=inits)
    assert_matches_ort(model, {"x": X})


def test_dequantize_blocked():
    q = RNG.integers(-100, 100, (2, 4)).astype("int8")
    inits = {"s": np.array([[0.1, 0.2], [0.3, 0.4]], "float32"),
             "z": np.array([[1, -1], [0, 2]], "int8")}
    model = node_model("DequantizeLinear", {"q": q}, opset=21, initializers=inits, axis=1,
                       block_size=2)
    assert_matches_ort(model, {"q": q})


def test_dynamic_quantize_linear():
    assert_matches_ort(node_model("DynamicQuantizeLinear", {"x": X}, 3), {"x": X})


def test_matmul_integer():
    a = RNG.integers(0, 255, (3, 4)).astype("uint8")
    b = RNG.integers(0, 255, (4, 5)).astype("uint8")
    inits = {"b": b, "za": np.array(12, "uint8"), "zb": np.array(7, "uint8")}
    assert_matches_ort(node_model("MatMulInteger", {"a": a}, initializers=inits), {"a": a})


def test_qlinear_matmul():
    a = RNG.integers(0, 255, (3, 4)).astype("uint8")
    b = RNG.integers(0, 255, (4, 5)).astype("uint8")
    inits = {"sa": np.array(0.02, "float32"), "za": np.array(100, "uint8"), "b": b,
             "sb": np.array(0.01, "float32"), "zb": np.array(120, "uint8"),
             "sy": np.array(0.05, "float32"), "zy": np.array(128, "uint8")}
    model = node_model("QLinearMatMul", {"a": a}, initializers=inits)
    assert_matches_ort(model, {"a": a}, atol=1)  # one step of rounding


def test_qlinear_conv():
    x = RNG.integers(0, 255, (1, 2, 5, 5)).astype("uint8")
    w = RNG.integers(0, 255, (3, 2, 3, 3)).astype("uint8")
    inits = {"sx": np.array(0.02, "float32"), "zx": np.array(100, "uint8"), "w": w,
             "sw": np.array([0.01, 0.02, 0.03], "float32"), "zw": np.array([120, 110, 100],
                                                                          "uint8"),
             "sy": np.array(0.5, "float32"), "zy": np.array(128, "uint8"),
             "b": np.array([10, -20, 30], "int32")}
    model = node_model("QLinearConv", {"x": x}, initializers=inits, pads=[1, 1, 1, 1])
    assert_matches_ort(model, {"x": x}, atol=1)


# --------------------------------------------------------------------------------------------
# Recurrent ops.

def _rnn_inputs(gates: int, dirs: int, hidden: int = 5, with_bias: bool = True):
    seq, batch, size = 4, 2, 3
    inits = {"w": RNG.standard_normal((dirs, gates * hidden, size)).astype("float32") * 0.5,
             "r": RNG.standard_normal((dirs, gates * hidden, hidden)).astype("float32") * 0.5,
             "b": (RNG.standard_normal((dirs, 2 * gates * hidden)).astype("float32")
                   if with_bias else None)}
    return RNG.standard_normal((seq, batch, size)).astype("float32"), inits


@pytest.mark.parametrize("op,gates", [("RNN", 1), ("GRU", 3), ("LSTM", 4)])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_recurrent(op, gates, direction):
    dirs = 2 if direction == "bidirectional" else 1
    x, inits = _rnn_inputs(gates, dirs)
    model = node_model(op, {"x": x}, 3 if op == "LSTM" else 2, initializers=inits,
                       hidden_size=5, direction=direction)
    assert_matches_ort(model, {"x": x}, rtol=1e-4, atol=1e-5)


def test_gru_linear_before_reset_with_sequence_lens():
    x, inits = _rnn_inputs(3, 1)
    inits.update({"lens": np.array([4, 2], "int32"), "h0": np.ones((1, 2, 5), "float32")})
    model = node_model("GRU", {"x": x}, 2, initializers=inits, hidden_size=5,
                       linear_before_reset=1)
    assert_matches_ort(model, {"x": x}, rtol=1e-4, atol=1e-5)


def test_lstm_peepholes_initial_state():
    x, inits = _rnn_inputs(4, 1)
    inits.update({"lens": None, "h0": RNG.standard_normal((1, 2, 5)).astype("float32"),
                  "c0": RNG.standard_normal((1, 2, 5)).astype("float32"),
                  "p": RNG.standard_normal((1, 15)).astype("float32")})
    model = node_model("LSTM", {"x": x}, 3, initializers=inits, hidden_size=5)
    assert_matches_ort(model, {"x": x}, rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------------------------
# Attention (opset 23), checked against onnx's reference evaluator.

@pytest.mark.parametrize("attrs", [{}, {"is_causal": 1}, {"softcap": 2.0},
                                   {"qk_matmul_output_mode": 1}])
def test_attention_4d(attrs):
    q = RNG.standard_normal((2, 4, 3, 8)).astype("float32")
    k = RNG.standard_normal((2, 2, 5, 8)).astype("float32")  # grouped-query: 4 / 2 heads
    v = RNG.standard_normal((2, 2, 5, 6)).astype("float32")
    feeds = {"q": q, "k": k, "v": v}
    model = node_model("Attention", feeds, 4 if "qk_matmul_output_mode" in attrs else 1,
                       opset=23, **attrs)
    assert_matches_ort(model, feeds, reference=run_reference)


def test_attention_3d_with_mask_and_past():
    q = RNG.standard_normal((2, 3, 16)).astype("float32")
    k = RNG.standard_normal((2, 3, 16)).astype("float32")
    v = RNG.standard_normal((2, 3, 16)).astype("float32")
    mask = RNG.random((3, 5)) > 0.3
    past = RNG.standard_normal((2, 2, 2, 8)).astype("float32")
    feeds = {"q": q, "k": k, "v": v, "m": mask, "pk": past, "pv": past}
    model = node_model("Attention", feeds, 3, opset=23, q_num_heads=2, kv_num_heads=2)
    assert_matches_ort(model, feeds, reference=run_reference)


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding(interleaved):
    x = RNG.standard_normal((2, 3, 4, 8)).astype("float32")
    cos = RNG.standard_normal((2, 4, 4)).astype("float32")
    sin = RNG.standard_normal((2, 4, 4)).astype("float32")
    feeds = {"x": x, "cos": cos, "sin": sin}
    model = node_model("RotaryEmbedding", feeds, opset=23, interleaved=interleaved)
    assert_matches_ort(model, feeds, reference=run_reference)
