"""int8 patch embeddings at batch > 1 as one "col" GEMM over every image's pixel rows
(int8/pixel_rows.py, QConv2d's pixel-row path): the same bytes as the per-image "row" path
and numpy's integer sums, on every output kind, under a capped ISA, and within one
quantization step of onnxruntime on a QDQ patch embedding at batch 16."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from msc.backend.kernels.int8 import conv as int8_conv
from msc.backend.kernels.int8.conv import QConv2d
from msc.backend.runtime.threads import num_threads
from tests.helpers.isa_child import ROOT, capped_report

_NP = {"uint8": np.uint8, "int8": np.int8}
OUTS = [("u8", 0.5, 3), ("s8", 0.3, -2), "f32", "s32"]
# (n, c, h, w, o, kh, kw): ViT's 8x8 patches, ConvNeXt's 4x4 stem, a 4x8 window, odd sizes
CASES = [(16, 3, 32, 32, 32, 8, 8), (16, 3, 32, 32, 16, 4, 4), (3, 5, 12, 16, 7, 4, 8),
         (2, 3, 17, 18, 20, 4, 4)]


def _draw(rng, dtype, shape):
    info = np.iinfo(_NP[dtype])
    return rng.integers(info.min, info.max + 1, shape).astype(_NP[dtype])


def _reference(x, w, zero):
    """int64 sums of (x - zero) over each window (window = stride, no padding)."""
    n, c, h, wd = x.shape
    _, _, kh, kw = w.shape
    oh, ow = h // kh, wd // kw
    patches = (x[:, :, :oh * kh, :ow * kw].astype(np.int64) - zero).reshape(
        n, c, oh, kh, ow, kw)
    return np.einsum("ncyixj,ocij->noyx", patches, w.astype(np.int64))


def _conv(case, dtype, out, seed=0):
    n, c, h, w, o, kh, kw = case
    rng = np.random.default_rng(seed)
    x, wq = _draw(rng, dtype, (n, c, h, w)), rng.integers(-127, 128, (o, c, kh, kw), np.int8)
    zero = 19 if dtype == "uint8" else -7
    attrs = {"strides": (kh, kw), "padding": (0,) * 4, "dilation": (1, 1)}
    bias = rng.standard_normal(o).astype(np.float32)
    conv = QConv2d(wq, attrs, dtype, zero, np.float32(0.001), bias, out, relu=True)
    return x, wq, zero, conv


def _run(conv, x, shape):
    return conv(x, np.empty(shape, conv.epi.dtype))


def both_paths(case, dtype, out, monkeypatch) -> tuple:
    """(pixel-row path's output, the row path's, numpy's int64 sums)."""
    x, wq, zero, conv = _conv(case, dtype, out)
    sums = _reference(x, wq, zero)
    got = _run(conv, x, sums.shape).copy()
    assert conv.pixel_dense is not None  # the pixel rows ran
    monkeypatch.setattr(int8_conv, "PIXEL_ROWS_PLANE", 0)
    x, _, _, rows = _conv(case, dtype, out)
    return got, _run(rows, x, sums.shape), sums


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_pixel_rows_give_the_row_paths_bytes(case, dtype, monkeypatch):
    for out in OUTS:
        got, rows, sums = both_paths(case, dtype, out, monkeypatch)
        np.testing.assert_array_equal(got, rows, err_msg=str(out))
        if out == "s32":
            np.testing.assert_array_equal(got, sums)
        monkeypatch.undo()


def test_only_patch_embeddings_at_batch_take_the_pixel_rows():
    x, _, _, conv = _conv(CASES[0], "uint8", "s32")
    _run(conv, x[:1], (1, 32, 4, 4))
    assert conv.pixel_dense is None  # batch 1: one image fills no GEMM better
    rng = np.random.default_rng(1)
    three = QConv2d(rng.integers(-127, 128, (8, 4, 3, 3), np.int8),
                    {"strides": (1, 1), "padding": (1,) * 4, "dilation": (1, 1)}, "uint8", 3,
                    1.0, None, "s32")
    _run(three, np.zeros((4, 4, 6, 6), np.uint8), (4, 8, 6, 6))
    assert three.pixel_dense is None  # 3x3 windows: the per-image row path


def test_two_threads_give_one_threads_bytes():
    x, _, _, conv = _conv(CASES[0], "uint8", ("u8", 0.5, 3), seed=2)
    one = _run(conv, x, (16, 32, 4, 4)).copy()
    with num_threads(2):
        np.testing.assert_array_equal(_run(conv, x, (16, 32, 4, 4)), one)


def patch_qdq(batch: int):
    """onnxruntime's QDQ file of an 8x8 patch embedding (3 -> 32 channels, 32 x 32 images)
    then relu, and its calibration inputs."""
    from onnx import TensorProto, helper, numpy_helper

    from tests.helpers.qdq_chain_models import quantized

    rng = np.random.default_rng(7)
    inits = [numpy_helper.from_array((rng.standard_normal((32, 3, 8, 8)) * 0.1)
                                     .astype(np.float32), "w"),
             numpy_helper.from_array((rng.standard_normal(32) * 0.1).astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[8, 8],
                              strides=[8, 8]),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "patches", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [batch, 3, 32, 32])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [batch, 32, 4, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    return quantized(model, (batch, 3, 32, 32))


def test_qdq_patch_embedding_at_batch_16_matches_onnxruntime():
    pytest.importorskip("onnxruntime")
    from tests.helpers.qdq_chain_models import compare

    qdq, calib = patch_qdq(16)
    got = compare(qdq, calib[0])
    assert "QConv2d" in got["kinds"]
    np.testing.assert_array_equal(got["chain"], got["python"])
    assert np.abs(got["chain"] - got["ort"]).max() <= 1.001 * got["scale"]


_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    sys.path.insert(0, {root!r})
    from msc.backend.llvm.jit import host_target
    from tests.backend.kernels.test_int8_pixel_rows import (CASES, OUTS, _conv, _reference,
                                                            _run, patch_qdq)
    from tests.helpers.qdq_chain_models import compare

    report = {{"features": host_target().features, "sums": True}}
    for case in CASES:
        for dtype in ("uint8", "int8"):
            x, wq, zero, conv = _conv(case, dtype, "s32")
            sums = _reference(x, wq, zero)
            report["sums"] &= bool(np.array_equal(_run(conv, x, sums.shape), sums))
            report["sums"] &= conv.pixel_dense is not None
    qdq, calib = patch_qdq(16)
    got = compare(qdq, calib[0])
    report["chain"] = bool(np.array_equal(got["chain"], got["python"]))
    report["steps"] = float(np.abs(got["chain"] - got["ort"]).max() / got["scale"])
    print(json.dumps(report))
""")


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_pixel_rows_on_a_capped_isa(tmp_path, isa):
    from msc.backend.llvm.jit import host_target

    pytest.importorskip("onnxruntime")
    if isa == "avx512" and not host_target().has("avx512f"):
        pytest.skip("the host has no AVX-512 to keep")
    report = capped_report(_CHILD.format(root=ROOT), isa, tmp_path)
    if isa == "avx2":
        assert "+avx512f" not in report["features"]
    assert report["sums"] and report["chain"] and report["steps"] <= 1.001
