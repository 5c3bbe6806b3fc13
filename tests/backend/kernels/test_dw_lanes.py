"""Depthwise convs with the channels in the vector lanes (kernels/dw_lanes.py) against torch:
3x3 / 5x5 / 7x7 windows, strides 1-3, planes smaller than a vector, channel counts that are
not a multiple of the lanes, padding larger than the plane, relu / relu6, batches split per
image; the conv kernel's choice between it and the plane kernels; the VM's chain step; the
forced AVX2 path in a child process. Tolerance: float32 sums of <= 49 products, 1e-5."""

import textwrap

import numpy as np
import pytest

from msc.backend.kernels.conv import _DepthwiseNCHW
from msc.backend.kernels.dw_lanes import LanesDepthwise, lanes_wins
from msc.backend.kernels.pool import NO_BOUND
from msc.backend.llvm.jit import vector_lanes
from msc.errors import ShapeError
from tests.helpers.isa_child import ROOT, capped_report

torch = pytest.importorskip("torch")
TOL = {"rtol": 1e-5, "atol": 1e-5}
RELU6 = int(np.array(6.0, np.float32).view(np.int32))

CASES = [  # n, c, h, w, k, stride, (top, left, bottom, right)
    (2, 20, 1, 1, 3, 1, (1, 1, 1, 1)),      # 1x1 planes: the centre tap only
    (2, 37, 2, 2, 3, 2, (1, 1, 1, 1)),      # 2x2 -> 1x1, a channel tail of 5 (or 5 of 8)
    (1, 16, 8, 8, 7, 1, (3, 3, 3, 3)),      # ConvNeXt's 7x7 on 8x8
    (3, 9, 5, 7, 5, 2, (2, 2, 2, 2)),       # stride 2, odd sizes, fewer channels than lanes
    (1, 5, 1, 1, 3, 1, (3, 3, 3, 3)),       # padding larger than the plane: 7x7 outputs
    (2, 33, 7, 7, 5, 1, (2, 2, 2, 2)),      # EfficientNet's 5x5 on 7x7
    (1, 17, 4, 3, 3, 3, (1, 0, 1, 2)),      # stride 3, uneven padding
    (1, 24, 7, 7, 7, 2, (0, 0, 0, 0)),      # no padding, a 7x7 window filling the plane
]


def _rand(*shape, seed=0):
    return np.random.default_rng(seed + len(shape)).standard_normal(shape).astype(np.float32)


def _torch_conv(x, weight, bias, stride, pad):
    top, left, bottom, right = pad
    xt = torch.nn.functional.pad(torch.from_numpy(x), (left, right, top, bottom))
    return torch.nn.functional.conv2d(xt, torch.from_numpy(weight), torch.from_numpy(bias),
                                      stride, 0, 1, x.shape[1]).numpy()


@pytest.mark.parametrize("n, c, h, w, k, stride, pad", CASES)
@pytest.mark.parametrize("split", [False, True])
def test_lanes_kernel_matches_torch(n, c, h, w, k, stride, pad, split):
    x, weight, bias = _rand(n, c, h, w), _rand(c, 1, k, k, seed=1), _rand(c, seed=2)
    ref = _torch_conv(x, weight, bias, stride, pad)
    conv = LanesDepthwise(weight.reshape(c, -1), bias, k, stride, pad[:2], 0, NO_BOUND)
    out = np.full(ref.shape, np.nan, np.float32)
    run = conv.parallel if split else conv
    run(x.ctypes.data, out.ctypes.data, n, h, w, *ref.shape[2:])
    np.testing.assert_allclose(out, ref, **TOL)


@pytest.mark.parametrize("hi", [NO_BOUND, RELU6])
def test_relu_and_relu6_clamp_every_lane(hi):
    x, weight, bias = _rand(2, 19, 3, 3) * 10, _rand(19, 1, 3, 3, seed=1), _rand(19, seed=2)
    ref = _torch_conv(x, weight, bias, 1, (1, 1, 1, 1))
    ref = np.clip(ref, 0, 6 if hi == RELU6 else np.inf)
    conv = LanesDepthwise(weight.reshape(19, -1), bias, 3, 1, (1, 1), 1, hi)
    out = np.full(ref.shape, np.nan, np.float32)
    conv(x.ctypes.data, out.ctypes.data, 2, 3, 3, 3, 3)
    np.testing.assert_allclose(out, ref, **TOL)


@pytest.mark.parametrize("k, hw, stride, takes", [
    (3, 2, 1, True), (3, 8, 1, True), (3, 14, 1, False), (3, 14, 2, True), (3, 28, 2, False),
    (5, 7, 1, True), (5, 14, 1, True), (5, 16, 1, False), (7, 8, 1, True), (7, 32, 1, False),
])
def test_conv_kernel_takes_lanes_on_small_planes(k, hw, stride, takes):
    c, pad = 40, (k // 2,) * 4
    weight, bias, x = _rand(c, 1, k, k), _rand(c, seed=1), _rand(2, c, hw, hw)
    attrs = {"strides": (stride, stride), "padding": pad, "dilation": (1, 1)}
    kernel = _DepthwiseNCHW("nn.conv2d", weight, bias, False, c, attrs)
    ref = _torch_conv(x, weight, bias, stride, pad)
    assert kernel._takes_lanes(*ref.shape[2:]) is takes
    assert lanes_wins(k, *ref.shape[2:]) is takes
    np.testing.assert_allclose(kernel(x, np.full(ref.shape, np.nan, np.float32)), ref, **TOL)


def test_channel_multiplier_and_dilation_keep_the_plane_kernels():
    attrs = {"strides": (1, 1), "padding": (1, 1, 1, 1), "dilation": (1, 1)}
    assert _DepthwiseNCHW("nn.conv2d", _rand(8, 1, 3, 3), None, False, 4, attrs).lanes is None
    attrs["dilation"] = (2, 2)
    assert _DepthwiseNCHW("nn.conv2d", _rand(4, 1, 3, 3), None, False, 4, attrs).lanes is None


def test_bad_input_names_the_op():
    attrs = {"strides": (1, 1), "padding": (1, 1, 1, 1), "dilation": (1, 1)}
    kernel = _DepthwiseNCHW("nn.conv2d", _rand(8, 1, 3, 3), None, False, 8, attrs)
    with pytest.raises(ShapeError, match="nn.conv2d.*channels"):
        kernel(_rand(1, 6, 2, 2), np.empty((1, 8, 2, 2), np.float32))
    with pytest.raises(ShapeError, match="nn.conv2d.*output buffer"):
        kernel(_rand(1, 8, 2, 2), np.empty((1, 8, 3, 3), np.float32))


def _onnx_depthwise(c, hw, k, stride, batch):
    from onnx import TensorProto, helper, numpy_helper

    weight, bias = _rand(c, 1, k, k, seed=3), _rand(c, seed=4)
    conv = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=c, kernel_shape=[k, k],
                            strides=[stride] * 2, pads=[k // 2] * 4)
    graph = helper.make_graph(
        [conv, helper.make_node("Clip", ["y", "lo", "hi"], ["z"])], "dw",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, c, hw, hw])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b"),
         numpy_helper.from_array(np.array(0, np.float32), "lo"),
         numpy_helper.from_array(np.array(6, np.float32), "hi")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("c, hw, k, stride, batch", [(37, 2, 3, 1, 3), (24, 8, 7, 1, 2),
                                                      (20, 5, 5, 2, 1)])
def test_model_through_the_vm_matches_onnxruntime(c, hw, k, stride, batch):
    """The user's path (from_onnx -> to_relax -> build -> VM): the conv is a chain step, at
    one and two threads (two: split per image)."""
    pytest.importorskip("onnxruntime")
    from benchmarks.common import msc_executable, msc_runner, ort_session

    model = _onnx_depthwise(c, hw, k, stride, batch)
    x = _rand(batch, c, hw, hw) * 4
    want = ort_session(model, 1)(x)
    ex = msc_executable(model)
    for threads in (1, 2):
        np.testing.assert_allclose(msc_runner(ex, threads)(x), want, **TOL)


_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    sys.path.insert(0, {root!r})
    import torch
    from msc.backend.kernels.dw_lanes import LanesDepthwise
    from msc.backend.kernels.pool import NO_BOUND
    from msc.backend.llvm.jit import vector_lanes
    rng = np.random.default_rng(0)
    errors = []
    for n, c, hw, k, s in [(2, 11, 1, 3, 1), (1, 13, 4, 5, 2), (2, 9, 8, 7, 1)]:
        x = rng.standard_normal((n, c, hw, hw)).astype(np.float32)
        w = rng.standard_normal((c, 1, k, k)).astype(np.float32)
        b = rng.standard_normal(c).astype(np.float32)
        ref = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w),
                                         torch.from_numpy(b), s, k // 2, 1, c).numpy()
        out = np.full(ref.shape, np.nan, np.float32)
        LanesDepthwise(w.reshape(c, -1), b, k, s, (k // 2,) * 2, 0, NO_BOUND)(
            x.ctypes.data, out.ctypes.data, n, hw, hw, *ref.shape[2:])
        errors.append(float(np.abs(out - ref).max()))
    print(json.dumps({{"lanes": vector_lanes(), "errors": errors}}))
""")


def test_forced_avx2_builds_eight_lanes_and_matches_torch(tmp_path):
    report = capped_report(_CHILD.format(root=ROOT), "avx2", tmp_path)
    assert report["lanes"] == 8
    assert max(report["errors"]) < 1e-5, report


def test_host_lanes_are_the_vector_width():
    conv = LanesDepthwise(_rand(3, 9), _rand(3), 3, 1, (1, 1), 0, NO_BOUND)
    assert conv.lanes == vector_lanes() and conv.w.shape == (9, vector_lanes())
