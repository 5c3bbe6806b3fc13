"""ONNX elementwise ops through msc (from_onnx -> relax.build -> VM) against onnxruntime."""

import numpy as np
import pytest

from msc.frontends.onnx.converters_elementwise import BINARY, UNARY
from msc.frontends.onnx.testing import assert_matches_ort, node_model

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 4)).astype("float32")
POS = (np.abs(X) + 0.5).astype("float32")
UNIT = np.clip(X / 4, -0.9, 0.9).astype("float32")
BOOL = X > 0
INT = RNG.integers(-20, 20, (2, 3, 4)).astype("int32")

# Ops whose domain is limited get matching inputs.
UNARY_INPUTS = {"Log": POS, "Sqrt": POS, "Acos": UNIT, "Asin": UNIT, "Atanh": UNIT,
                "Acosh": POS + 1, "Not": BOOL, "BitwiseNot": INT}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(op):
    x = UNARY_INPUTS.get(op, X)
    assert_matches_ort(node_model(op, {"x": x}), {"x": x})


BINARY_INPUTS = {
    "And": (BOOL, BOOL[0]), "Or": (BOOL, BOOL[:, :1]), "Xor": (BOOL, ~BOOL),
    "BitwiseAnd": (INT, INT[0]), "BitwiseOr": (INT, INT), "BitwiseXor": (INT, INT[:, :1]),
    "Div": (X, POS[0]),
}


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_broadcast(op):
    a, b = BINARY_INPUTS.get(op, (X, X[0, :1]))
    assert_matches_ort(node_model(op, {"a": a, "b": b}), {"a": a, "b": b})


@pytest.mark.parametrize("op", ["Sum", "Max", "Min", "Mean"])
def test_variadic(op):
    feeds = {"a": X, "b": X[0], "c": X[:, :1]}
    assert_matches_ort(node_model(op, feeds), feeds)


@pytest.mark.parametrize("op,attrs", [
    ("Elu", {"alpha": 0.7}), ("Celu", {"alpha": 1.3}), ("Selu", {}),
    ("ThresholdedRelu", {"alpha": 0.4}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
    ("HardSwish", {}), ("LeakyRelu", {"alpha": 0.2}), ("Softplus", {}), ("Softsign", {}),
    ("Mish", {}), ("Gelu", {}), ("Gelu", {"approximate": "tanh"}),
    ("Shrink", {"bias": 0.5, "lambd": 0.7}), ("Sigmoid", {}), ("Reciprocal", {}),
])
def test_activation(op, attrs):
    opset = 20 if op == "Gelu" else 18
    assert_matches_ort(node_model(op, {"x": X}, opset=opset, **attrs), {"x": X})


def test_prelu_broadcast_slope():
    slope = np.linspace(-1, 1, 4).astype("float32")
    assert_matches_ort(node_model("PRelu", {"x": X}, initializers={"s": slope}), {"x": X})


@pytest.mark.parametrize("lo,hi", [(-0.5, 0.5), (None, 0.2), (-0.1, None)])
def test_clip_constant_bounds(lo, hi):
    inits = {"lo": None if lo is None else np.float32(lo),
             "hi": None if hi is None else np.float32(hi)}
    assert_matches_ort(node_model("Clip", {"x": X}, initializers=inits), {"x": X})


def test_clip_runtime_bounds():
    feeds = {"x": X, "lo": np.array(-0.3, "float32"), "hi": np.array(0.6, "float32")}
    assert_matches_ort(node_model("Clip", feeds), feeds)


def test_clip_opset6_attributes():
    model = node_model("Clip", {"x": X}, opset=6, min=-0.2, max=0.1)
    assert_matches_ort(model, {"x": X})


@pytest.mark.parametrize("fmod,a,b", [
    (0, INT, np.full((4,), 7, "int32")), (1, INT, np.full((4,), -7, "int32")),
    (1, X, POS[0]),
])
def test_mod(fmod, a, b):
    feeds = {"a": a, "b": b}
    assert_matches_ort(node_model("Mod", feeds, fmod=fmod), feeds)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bit_shift(direction):
    a = np.arange(12, dtype="uint32").reshape(3, 4)
    b = np.array([1, 2, 3, 0], "uint32")
    assert_matches_ort(node_model("BitShift", {"a": a, "b": b}, direction=direction),
                       {"a": a, "b": b})


def test_pow_mixed_dtypes():
    feeds = {"a": POS, "b": np.array([2], "int64")}
    assert_matches_ort(node_model("Pow", feeds), feeds)


@pytest.mark.parametrize("pos,neg", [(1, 1), (1, 0), (0, 1)])
def test_is_inf(pos, neg):
    x = np.array([np.inf, -np.inf, 1.0, np.nan], "float32")
    model = node_model("IsInf", {"x": x}, detect_positive=pos, detect_negative=neg)
    assert_matches_ort(model, {"x": x})


def test_where():
    feeds = {"c": BOOL, "a": X, "b": X[0]}
    assert_matches_ort(node_model("Where", feeds), feeds)


@pytest.mark.parametrize("to", [1, 6, 7, 9, 10])  # float, int32, int64, bool, float16
def test_cast(to):
    assert_matches_ort(node_model("Cast", {"x": X * 3}, to=to), {"x": X * 3})


def test_cast_like():
    feeds = {"x": X, "like": INT}
    assert_matches_ort(node_model("CastLike", feeds), feeds)


def test_identity():
    assert_matches_ort(node_model("Identity", {"x": X}), {"x": X})
