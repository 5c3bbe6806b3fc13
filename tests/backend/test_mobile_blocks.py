"""The mobile CNN blocks of benchmarks/blocks.py through the whole ONNX path (from_onnx,
to_relax, build) against onnxruntime on the same model: 5x5 depthwise convs on the in-place
window kernel, hard-swish / relu6 as one expression call (clip inside), squeeze-excite and the
inverted residual, at odd channel counts and sizes, strides 1 and 2, batch 2, 1 and 2 threads."""

import numpy as np
import pytest

from benchmarks import blocks
from benchmarks.common import msc_executable, msc_runner, ort_session

TOL = {"rtol": 1e-4, "atol": 1e-4}


def _with_batch(model, n: int):
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = n
    return model


def _check(model, n: int = 2):
    pytest.importorskip("onnxruntime")
    model = _with_batch(model, n)
    ex = msc_executable(model)
    x = blocks._input(model)
    want = ort_session(model, 1)(x)
    for threads in (1, 2):
        np.testing.assert_allclose(msc_runner(ex, threads)(x), want, **TOL)
    return ex.stats


@pytest.mark.parametrize("c, hw, k, stride, act", [
    (37, 15, 5, 1, "swish"), (19, 9, 5, 2, "relu"), (21, 14, 5, 1, "relu6"),
    (33, 16, 3, 2, "hswish"), (5, 41, 5, 2, "relu6"),
])
def test_depthwise_blocks_match_onnxruntime(c, hw, k, stride, act):
    stats = _check(blocks.depthwise(c, hw, k, stride, act))
    assert stats["ops"]["nn.conv2d"] == {"native": 1}
    assert "clip" not in stats["ops"]  # relu6: the conv's epilogue; hard-swish: an expression
    if act == "relu6":
        assert stats["fused"] == {"nn.conv2d+add+clip": 1}


def test_hard_swish_is_one_expression_call():
    stats = _check(blocks.hard_swish(13, 15))
    assert stats["ops"] == {"elementwise": {"native": 1}}


@pytest.mark.parametrize("gate", ["hsig", "sig"])
def test_squeeze_excite_matches_onnxruntime(gate):
    _check(blocks.squeeze_excite(44, 9, gate))


def test_inverted_residual_with_se_and_fire_match_onnxruntime():
    stats = _check(blocks.inverted_residual(12, 13, 3, 5, "hswish", True))
    assert stats["ops"]["elementwise"] == {"native": 2}  # both hard-swishes, one pass each
    assert stats["kernels"]["numpy"] == 0
    _check(blocks.fire(20, 11, 6, 10))
    _check(blocks.channel_shuffle(22, 9), n=1)
    _check(blocks.grouped(48, 10, 8, 2))


def test_clip_expression_matches_numpy_and_keeps_nan():
    from msc.backend.kernels.activation import ExprKernel, check_expr, evaluate

    expr = ("multiply", ("in", 0), ("clip", ("add", ("in", 0), ("const", 3.0)),
                                    ("const", 0.0), ("const", 6.0)))
    assert check_expr(expr) and not check_expr(("clip", ("in", 0), ("in", 1), ("const", 1.0)))
    x = np.random.default_rng(0).standard_normal(1037).astype(np.float32) * 5
    x[[3, 500]] = np.nan, np.inf
    out = ExprKernel(expr, x.shape)(x, np.empty_like(x))
    ref = evaluate(expr, [x])
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)
    assert np.isnan(out[3]) and out[500] == np.inf


def _pad_conv(pads, groups, value=0.0, twice=False, k=3, stride=2):
    """Pad (ONNX pads: begins then ends, NCHW) -> Conv; ``twice``: the pad also feeds an Add."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    c = 6
    inits = [numpy_helper.from_array(rng.standard_normal((c, c // groups, k, k))
                                     .astype(np.float32), "w"),
             numpy_helper.from_array(np.array(pads, np.int64), "p"),
             numpy_helper.from_array(np.array(value, np.float32), "v")]
    nodes = [helper.make_node("Pad", ["x", "p", "v"], ["xp"], mode="constant"),
             helper.make_node("Conv", ["xp", "w"], ["y"], group=groups, strides=[stride] * 2)]
    out = "y"
    if twice:
        nodes += [helper.make_node("ReduceMean", ["xp"], ["m"], axes=[2, 3], keepdims=1),
                  helper.make_node("Add", ["y", "m"], ["z"])]
        out = "z"
    graph = helper.make_graph(nodes, "pad_conv", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, c, 13, 10])], [helper.make_tensor_value_info(
            out, TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("pads, groups, value, twice, folds", [
    ([0, 0, 0, 1, 0, 0, 1, 2], 6, 0.0, False, True),    # TF "same" of stride 2, depthwise
    ([0, 0, 2, 2, 0, 0, 2, 2], 1, 0.0, False, True),    # dense conv
    ([0, 0, 1, 0, 0, 0, 0, 1], 2, 0.0, False, True),    # grouped
    ([0, 0, 1, 1, 0, 0, 1, 1], 6, 0.5, False, False),   # not zero: stays a pad
    ([0, 1, 1, 1, 0, 1, 1, 1], 1, 0.0, False, False),   # pads channels: stays
    ([0, 0, 1, 1, 0, 0, 1, 1], 6, 0.0, True, False),    # another reader: stays
])
def test_zero_pad_folds_into_the_conv(pads, groups, value, twice, folds):
    if pads[1] or pads[5]:  # a pad of channels changes the conv's input channels
        model = _pad_conv(pads, groups, value, twice)
        model.graph.initializer[0].dims[1] = 8 // groups
        model.graph.initializer[0].raw_data = np.random.default_rng(2).standard_normal(
            (6, 8 // groups, 3, 3)).astype(np.float32).tobytes()
    else:
        model = _pad_conv(pads, groups, value, twice)
    stats = _check(model, n=2)
    assert (stats["fused"].get("pad+conv", 0) == 1) is folds
    assert ("nn.pad" in stats["ops"]) is not folds


@pytest.mark.parametrize("kind, c, o, k, stride, pad, hw, n", [
    ("direct", 13, 37, 1, 1, 0, 29, 2),     # MobileNetV2's expand 1x1
    ("direct", 7, 19, 3, 2, 1, 31, 1),      # a strided 3x3 stem
    ("direct", 12, 20, 3, 1, 1, 17, 2),     # grouped (4 groups)
    ("pixel", 33, 70, 1, 1, 0, 7, 2),       # 7x7 planes: pixel tiles (AVX-512 hosts)
    ("pixel", 16, 24, 3, 1, 1, 8, 1),
])
def test_relu6_in_direct_and_pixel_convs(kind, c, o, k, stride, pad, hw, n):
    """min(max(conv, 0), 6) in the convs' epilogue (relu=RELU6), NaN kept, against torch."""
    torch = pytest.importorskip("torch")
    from msc.backend.kernels.direct_conv import RELU6, DirectConv2d
    from msc.backend.kernels.pixel_conv import PixelConv2d, pixel_conv_available

    if kind == "pixel" and not pixel_conv_available():
        pytest.skip("pixel tiles need AVX-512 (32 vector registers)")
    groups = 4 if (kind, k, stride) == ("direct", 3, 1) else 1
    rng = np.random.default_rng(7)
    w = (rng.standard_normal((o, c // groups, k, k)) * 2).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32)
    x = rng.standard_normal((n, c, hw, hw)).astype(np.float32)
    x[0, 1, 2, 2] = np.nan
    attrs = {"strides": (stride, stride), "padding": (pad,) * 4, "dilation": (1, 1),
             "groups": groups}
    kernel = (PixelConv2d("nn.conv2d", w, bias, RELU6, attrs) if kind == "pixel" else
              DirectConv2d("nn.conv2d", w, bias, RELU6, groups, attrs))
    ref = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w),
                                     torch.from_numpy(bias), stride, pad, groups=groups)
    ref = torch.clamp(ref, 0, 6).numpy()  # torch.clamp keeps NaN
    out = kernel(x, np.empty(ref.shape, np.float32))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    assert (out == 6).any() and (out == 0).any() and np.isnan(out).any()


@pytest.mark.parametrize("c, hw", [(24, 21), (40, 7)])
def test_mobilenetv2_block_runs_relu6_in_its_convs(c, hw):
    stats = _check(blocks.inverted_residual(c, hw, 6, 3, "relu6"))
    assert "clip" not in stats["ops"] and stats["fused"]["nn.conv2d+add+clip"] == 2
