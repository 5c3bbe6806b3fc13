"""int8 convs at batch > 1 as one "col" GEMM over every image's pixel rows (int8/pixel_rows.py,
QConv2d's pixel-row path: patch embeddings from NCHW, 16-channel windows through NHWC planes):
the same bytes as the per-image "row" path and numpy's integer sums, on every output kind,
under a capped ISA, and within one quantization step of onnxruntime on QDQ convs at batch
16."""

from __future__ import annotations

import ctypes
import textwrap

import numpy as np
import pytest

from msc.backend.kernels.int8 import conv as int8_conv
from msc.backend.kernels.int8.conv import QConv2d
from msc.backend.kernels.int8.pixel_rows import FIELDS
from msc.backend.runtime.threads import num_threads
from tests.helpers.isa_child import ROOT, capped_report

_NP = {"uint8": np.uint8, "int8": np.int8}
OUTS = [("u8", 0.5, 3), ("s8", 0.3, -2), "f32", "s32"]
# (n, c, h, w, o, kh, kw, stride, padding). Patches: ViT's 8x8, ConvNeXt's 4x4 stem, a 4x8
# window, odd sizes; NHWC: RepVGG's 3x3 16 -> 16, channels off 16, strided, 5x5, 2x2
CASES = [(16, 3, 32, 32, 32, 8, 8, (8, 8), (0,) * 4), (16, 3, 32, 32, 16, 4, 4, (4, 4), (0,) * 4),
         (3, 5, 12, 16, 7, 4, 8, (4, 8), (0,) * 4), (2, 3, 17, 18, 20, 4, 4, (4, 4), (0,) * 4),
         (4, 16, 16, 16, 16, 3, 3, (1, 1), (1,) * 4), (2, 24, 8, 8, 13, 3, 3, (1, 1), (1,) * 4),
         (3, 40, 9, 7, 8, 3, 3, (2, 2), (1, 0, 1, 1)), (2, 16, 9, 9, 12, 5, 5, (2, 2), (2,) * 4),
         (2, 16, 8, 8, 16, 2, 2, (2, 2), (0,) * 4)]


def _draw(rng, dtype, shape):
    info = np.iinfo(_NP[dtype])
    return rng.integers(info.min, info.max + 1, shape).astype(_NP[dtype])


def _reference(x, w, zero, stride, pad):
    """int64 sums of (x - zero) over each window, the zero point around the image."""
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    (sh, sw), (pt, pl, pb, pr) = stride, pad
    xp = np.pad(x.astype(np.int64) - zero, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh, ow = (h + pt + pb - kh) // sh + 1, (wd + pl + pr - kw) // sw + 1
    out = np.zeros((n, o, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + sh * oh:sh, j:j + sw * ow:sw]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j].astype(np.int64))
    return out


def _conv(case, dtype, out, seed=0):
    n, c, h, w, o, kh, kw, stride, pad = case
    rng = np.random.default_rng(seed)
    x, wq = _draw(rng, dtype, (n, c, h, w)), rng.integers(-127, 128, (o, c, kh, kw), np.int8)
    zero = 19 if dtype == "uint8" else -7
    attrs = {"strides": stride, "padding": pad, "dilation": (1, 1)}
    bias = rng.standard_normal(o).astype(np.float32)
    conv = QConv2d(wq, attrs, dtype, zero, np.float32(0.001), bias, out, relu=True)
    return x, wq, zero, conv


def _run(conv, x, shape):
    return conv(x, np.empty(shape, conv.epi.dtype))


def both_paths(case, dtype, out, monkeypatch) -> tuple:
    """(pixel-row path's output, the row path's, numpy's int64 sums)."""
    x, wq, zero, conv = _conv(case, dtype, out)
    sums = _reference(x, wq, zero, case[7], case[8])
    got = _run(conv, x, sums.shape).copy()
    assert conv.pixel_dense is not None  # the pixel rows ran
    monkeypatch.setattr(int8_conv, "PIXEL_ROWS_PLANE", 0)
    x, _, _, rows = _conv(case, dtype, out)
    return got, _run(rows, x, sums.shape), sums


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:7])) + f"s{c[7][0]}")
def test_pixel_rows_give_the_row_paths_bytes(case, dtype, monkeypatch):
    for out in OUTS:
        got, rows, sums = both_paths(case, dtype, out, monkeypatch)
        np.testing.assert_array_equal(got, rows, err_msg=str(out))
        if out == "s32":
            np.testing.assert_array_equal(got, sums)
        monkeypatch.undo()


def test_which_convs_take_the_pixel_rows():
    rng = np.random.default_rng(1)

    def mode(o, c, k, stride, pad, n=4):
        conv = QConv2d(rng.integers(-127, 128, (o, c, k, k), np.int8),
                       {"strides": stride, "padding": pad, "dilation": (1, 1)}, "uint8", 3, 1.0,
                       None, "s32")
        return conv._pixel_mode(n, 64)
    assert mode(32, 3, 8, (8, 8), (0,) * 4) == "patch"
    assert mode(32, 3, 8, (8, 8), (0,) * 4, n=1) is None  # batch 1: one image's row path
    assert mode(16, 16, 3, (1, 1), (1,) * 4) == "nhwc"
    assert mode(24, 16, 3, (1, 1), (1,) * 4) is None  # O > 16: most GEMM columns empty
    assert mode(16, 8, 3, (1, 1), (1,) * 4) is None  # C < 16: half-empty NHWC vectors
    assert mode(16, 3, 3, (2, 2), (1,) * 4) is None  # 3-channel stems
    assert mode(16, 16, 1, (2, 2), (0,) * 4) is None  # 1x1 stride 2: reads 1 pixel of 4


def test_the_unfold_writes_nothing_past_its_rows():
    """Two threads unfold image ranges into adjacent rows: a range's last row must not spill
    (its 64-byte copies) into the next range's first row. One image unfolded into rows
    followed by a sentinel leaves the sentinel as it was."""
    for case in CASES[4:]:
        n, _, h, w, _, kh, kw, (sh, sw), (pt, pl, pb, pr) = case
        oh, ow = (h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1
        x, _, _, conv = _conv(case, "uint8", "s32")
        if conv._pixel_mode(n, oh * ow) != "nhwc":
            continue
        dense, unfold, row, (xh, _, _), nbytes = conv._pixel_parts((n, h, w, oh, ow))
        scratch = np.zeros(nbytes, np.uint8)
        size = oh * ow * dense.k4  # one image's rows
        rows = np.full(size + 128, 0xA5, np.uint8)
        fields = np.ctypeslib.as_array(ctypes.cast(row, ctypes.POINTER(ctypes.c_int64)),
                                       (len(FIELDS),))
        saved, fields[0] = int(fields[0]), 1  # the images field: one image
        try:
            unfold(x.ctypes.data, scratch.ctypes.data + xh, rows.ctypes.data, row)
        finally:
            fields[0] = saved
        assert (rows[size:] == 0xA5).all(), case


def test_two_threads_give_one_threads_bytes():
    for case, shape in ((CASES[0], (16, 32, 4, 4)), (CASES[4], (4, 16, 16, 16))):
        x, _, _, conv = _conv(case, "uint8", ("u8", 0.5, 3), seed=2)
        one = _run(conv, x, shape).copy()
        with num_threads(2):
            np.testing.assert_array_equal(_run(conv, x, shape), one)


def conv_qdq(batch: int, kind: str):
    """onnxruntime's QDQ file of a conv then relu, and its calibration inputs: "patch" an 8x8
    patch embedding (3 -> 32 channels, 32 x 32 images), "3x3" RepVGG's 16 -> 16 3x3 conv on
    8 x 8 planes."""
    from onnx import TensorProto, helper, numpy_helper

    from tests.helpers.qdq_chain_models import quantized

    rng = np.random.default_rng(7)
    o, c, k, size, attrs = ((32, 3, 8, 32, {"strides": [8, 8]}) if kind == "patch" else
                            (16, 16, 3, 8, {"pads": [1, 1, 1, 1]}))
    inits = [numpy_helper.from_array((rng.standard_normal((o, c, k, k)) * 0.1)
                                     .astype(np.float32), "w"),
             numpy_helper.from_array((rng.standard_normal(o) * 0.1).astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[k, k], **attrs),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [batch, c, size, size])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    return quantized(model, (batch, c, size, size))


@pytest.mark.parametrize("kind", ["patch", "3x3"])
def test_qdq_convs_at_batch_16_match_onnxruntime(kind):
    pytest.importorskip("onnxruntime")
    from tests.helpers.qdq_chain_models import compare

    qdq, calib = conv_qdq(16, kind)
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
                                                            _run, conv_qdq)
    from tests.helpers.qdq_chain_models import compare

    report = {{"features": host_target().features, "sums": True}}
    for case in CASES:
        for dtype in ("uint8", "int8"):
            x, wq, zero, conv = _conv(case, dtype, "s32")
            sums = _reference(x, wq, zero, case[7], case[8])
            report["sums"] &= bool(np.array_equal(_run(conv, x, sums.shape), sums))
            report["sums"] &= conv.pixel_dense is not None
    report["chain"], report["steps"] = True, 0.0
    for kind in ("patch", "3x3"):
        qdq, calib = conv_qdq(16, kind)
        got = compare(qdq, calib[0])
        report["chain"] &= bool(np.array_equal(got["chain"], got["python"]))
        report["steps"] = max(report["steps"], float(np.abs(got["chain"] - got["ort"]).max()
                                                      / got["scale"]))
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
