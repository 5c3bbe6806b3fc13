"""The int8 depthwise conv with the channels in the lanes (int8/dw_lanes.py): the same bytes
as the row kernel of int8/dwconv.py and numpy's integer sums, on every output kind, on one and
two threads, under a capped ISA, and within one quantization step of onnxruntime on a QDQ
depthwise model at batch 16."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from msc.backend.kernels.int8.dwconv import QDepthwise
from msc.backend.runtime.threads import num_threads
from tests.helpers.isa_child import ROOT, capped_report

_NP = {"uint8": np.uint8, "int8": np.int8}
OUTS = [("u8", 0.5, 3), ("s8", 0.3, -2), "f32", "s32"]
# (n, c, h, w, k, stride, padding): MobileNetV2's and ConvNeXt's small planes at batch 16,
# channel counts off the 16 lanes, strided, odd planes, 5x5
CASES = [(16, 40, 1, 1, 3, 1, (1, 1, 1, 1)), (16, 24, 2, 2, 3, 1, (1, 1, 1, 1)),
         (4, 37, 4, 4, 3, 2, (0, 0, 1, 1)), (3, 16, 8, 8, 7, 1, (3, 3, 3, 3)),
         (2, 33, 4, 4, 7, 1, (3, 3, 3, 3)), (2, 20, 13, 11, 5, 2, (2, 2, 2, 2)),
         (1, 7, 3, 5, 3, 2, (1, 0, 0, 1)), (2, 9, 16, 16, 3, 2, (1, 1, 1, 1))]


def _draw(rng, dtype, shape):
    info = np.iinfo(_NP[dtype])
    return rng.integers(info.min, info.max + 1, shape).astype(_NP[dtype])


def _reference(x, w, zero, stride, pad):
    """int64 depthwise sums of (x - zero), the zero point around the image."""
    n, c, h, wd = x.shape
    k = w.shape[2]
    pt, pl, pb, pr = pad
    xp = np.pad(x.astype(np.int64) - zero, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh, ow = (h + pt + pb - k) // stride + 1, (wd + pl + pr - k) // stride + 1
    out = np.zeros((n, c, oh, ow), np.int64)
    for i in range(k):
        for j in range(k):
            patch = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            out += patch * w[None, :, 0, i, j, None, None].astype(np.int64)
    return out


def _kernels(case, dtype, out, seed=0):
    n, c, h, w, k, stride, pad = case
    rng = np.random.default_rng(seed)
    x, wq = _draw(rng, dtype, (n, c, h, w)), rng.integers(-127, 128, (c, 1, k, k), np.int8)
    zero = 19 if dtype == "uint8" else -7
    attrs = {"strides": (stride, stride), "padding": pad, "dilation": (1, 1)}
    scale, bias = np.float32(0.01), rng.standard_normal(c).astype(np.float32)
    made = [QDepthwise(wq, attrs, dtype, zero, scale, bias, out, relu=True, lanes=lanes)
            for lanes in (True, False)]
    return x, wq, zero, made


def _run(kernel, x, shape):
    return kernel(x, np.empty(shape, kernel.epi.dtype))


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:6])))
def test_lanes_give_the_row_kernels_bytes(case, dtype):
    for out in OUTS:
        x, wq, zero, (lanes, rows) = _kernels(case, dtype, out)
        sums = _reference(x, wq, zero, case[5], case[6])
        got = _run(lanes, x, sums.shape)
        np.testing.assert_array_equal(got, _run(rows, x, sums.shape), err_msg=str(out))
        if out == "s32":
            np.testing.assert_array_equal(got, sums)


def test_small_planes_pick_the_lanes_kernel():
    attrs = {"strides": (1, 1), "padding": (1,) * 4, "dilation": (1, 1)}

    def chosen(shape):
        kernel = QDepthwise(np.zeros((shape[1], 1, 3, 3), np.int8), attrs, "uint8", 3, 1.0,
                            None, "s32")
        kernel(np.zeros(shape, np.uint8), np.empty(shape, np.int32))
        return kernel.lanes_form is not None
    assert chosen((2, 24, 2, 2)) and chosen((2, 24, 8, 8))  # rows under 16 pixels: lanes
    assert not chosen((2, 24, 16, 16))  # 16 x 16 planes fill the row kernel's vectors


def test_two_threads_give_one_threads_bytes(monkeypatch):
    from msc.backend.kernels.int8 import dwconv

    monkeypatch.setattr(dwconv, "_PARALLEL", 0)
    x, _, _, (lanes, _) = _kernels(CASES[0], "uint8", ("u8", 0.5, 3), seed=4)
    one = _run(lanes, x, x.shape).copy()
    with num_threads(2):
        np.testing.assert_array_equal(_run(lanes, x, x.shape), one)


def test_bad_shape_is_refused_naming_the_op():
    from msc.errors import ShapeError

    _, _, _, (lanes, _) = _kernels(CASES[1], "uint8", "s32")
    with pytest.raises(ShapeError, match="int8.conv2d"):
        lanes(np.zeros((2, 23, 2, 2), np.uint8), np.empty((2, 23, 2, 2), np.int32))


def depthwise_qdq(batch: int, channels: int, size: int):
    """onnxruntime's QDQ file of conv 1x1 -> relu -> depthwise 3x3 -> relu (x [batch,
    channels, size, size]) and its calibration inputs."""
    from onnx import TensorProto, helper, numpy_helper

    from tests.helpers.qdq_chain_models import quantized

    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array((rng.standard_normal(shape) * s).astype(np.float32), name)
             for name, shape, s in (("w1", (channels, channels, 1, 1), 0.3),
                                    ("b1", (channels,), 0.1), ("wd", (channels, 1, 3, 3), 0.4),
                                    ("bd", (channels,), 0.1))]
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1", "b1"], ["c"]), n("Relu", ["c"], ["r"]),
             n("Conv", ["r", "wd", "bd"], ["d"], group=channels, pads=[1, 1, 1, 1]),
             n("Relu", ["d"], ["y"])]
    shape = [batch, channels, size, size]
    graph = helper.make_graph(nodes, "dw", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, shape)], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    return quantized(model, tuple(shape))


_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    sys.path.insert(0, {root!r})
    from msc.backend.llvm.jit import host_target
    from tests.backend.kernels.test_int8_dw_lanes import (CASES, OUTS, _kernels, _reference,
                                                         _run, depthwise_qdq)
    from tests.helpers.qdq_chain_models import compare

    report = {{"features": host_target().features, "same": True, "sums": True}}
    for case in CASES:
        for dtype in ("uint8", "int8"):
            for out in OUTS:
                x, wq, zero, (lanes, rows) = _kernels(case, dtype, out)
                sums = _reference(x, wq, zero, case[5], case[6])
                got = _run(lanes, x, sums.shape)
                report["same"] &= bool(np.array_equal(got, _run(rows, x, sums.shape)))
                if out == "s32":
                    report["sums"] &= bool(np.array_equal(got, sums))
    qdq, calib = depthwise_qdq(16, 24, 2)
    got = compare(qdq, calib[0])
    report["chain"] = bool(np.array_equal(got["chain"], got["python"]))
    report["steps"] = float(np.abs(got["chain"] - got["ort"]).max() / got["scale"])
    print(json.dumps(report))
""")


def test_qdq_depthwise_at_batch_16_matches_onnxruntime():
    pytest.importorskip("onnxruntime")
    from tests.helpers.qdq_chain_models import compare

    qdq, calib = depthwise_qdq(16, 24, 2)
    got = compare(qdq, calib[0])
    assert "QDepthwise" in got["kinds"]
    np.testing.assert_array_equal(got["chain"], got["python"])
    assert np.abs(got["chain"] - got["ort"]).max() <= 1.001 * got["scale"]


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_lanes_on_a_capped_isa(tmp_path, isa):
    from msc.backend.llvm.jit import host_target

    pytest.importorskip("onnxruntime")
    if isa == "avx512" and not host_target().has("avx512f"):
        pytest.skip("the host has no AVX-512 to keep")
    report = capped_report(_CHILD.format(root=ROOT), isa, tmp_path)
    if isa == "avx2":
        assert "+avx512f" not in report["features"]
    assert report["same"] and report["sums"] and report["chain"]
    assert report["steps"] <= 1.001
