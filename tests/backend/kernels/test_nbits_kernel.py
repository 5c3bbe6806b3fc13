"""The matmul_nbits kernel (msc/backend/kernels/nbits.py) reads int4 / int8 codes packed per
group and must equal a float64 matmul on the numpy-dequantized weight (rtol 1e-5 of the
output's scale) for shapes that are multiples of nothing (K not a multiple of the group, N
not a multiple of the row block or the vector width), on both vector widths, on 1 and 2
threads, for one row of x (decode) and several (prefill); and must agree
with onnxruntime's com.microsoft MatMulNBits on the same bytes."""

import numpy as np
import pytest

from msc.backend import vector_lanes
from msc.backend.kernels.nbits import NbitsWeight
from msc.backend.runtime.threads import num_threads
from msc.compression.weight_only import quantize_rtn

RNG = np.random.default_rng(3)

# (N, K, bits, group, symmetric, M)
SHAPES = [
    (37, 100, 4, 32, False, 1),    # K % group = 4, N % 4 = 1
    (13, 64, 4, 64, True, 3),
    (3, 45, 4, 128, False, 1),     # one group wider than K, N below the row block
    (19, 77, 8, None, True, 2),    # int8 per channel, K no multiple of the vector width
    (8, 200, 8, 32, False, 1),
    (70, 96, 4, 32, True, 11),     # several rows of x (prefill)
]


def _case(n, k, bits, group, sym, m):
    w = RNG.standard_normal((n, k)).astype(np.float32)
    packed = quantize_rtn(w, bits, group, sym)
    x = RNG.standard_normal((m, k)).astype(np.float32)
    bias = RNG.standard_normal(n).astype(np.float32)
    want = x.astype(np.float64) @ packed.dequantize().astype(np.float64).T + bias
    return packed, x, bias, want


def _run(weight: NbitsWeight, x: np.ndarray) -> np.ndarray:
    out = np.full((x.shape[0], weight.n), np.nan, np.float32)
    weight.run(x, out)
    return out


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("lanes", sorted({8, vector_lanes()}))  # AVX2, and AVX-512's LUT path
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:2])) + f"-{s[2]}b")
def test_kernel_equals_the_dequantized_matmul(shape, lanes):
    packed, x, bias, want = _case(*shape)
    weight = NbitsWeight(packed.q, packed.scales, packed.zero_points, packed.bits,
                         packed.group, packed.k, bias, lanes=lanes)
    _close(_run(weight, x), want)


def test_two_threads_split_the_rows_and_agree():
    """One weight called on 1, 2, then 1 thread again: each count has its own tasks and
    scratch (a stale split would write past a smaller scratch)."""
    packed, x, bias, want = _case(1000, 320, 4, 32, False, 1)  # 160 KB of codes: split
    weight = NbitsWeight(packed.q, packed.scales, packed.zero_points, 4, 32, 320, bias)
    for threads, parts in ((1, 1), (2, 2), (1, 1)):
        with num_threads(threads):
            assert len(weight._parts()) == parts
            _close(_run(weight, x), want)


def _ort_matmul_nbits(x, packed):
    """onnxruntime's MatMulNBits on the packed bytes; zero points packed as it reads them
    (int4: two per byte, group 2j in the low nibble, rows padded to whole bytes)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    n, groups = packed.scales.shape
    zeros = packed.zero_points
    if packed.bits == 4:
        zeros = np.pad(zeros, ((0, 0), (0, groups % 2)))
        zeros = (zeros[:, 0::2] | (zeros[:, 1::2] << 4)).astype(np.uint8)
    inits = [numpy_helper.from_array(a, name) for a, name in (
        (packed.q, "B"), (packed.scales.reshape(-1), "scales"), (zeros.reshape(-1), "zp"))]
    node = helper.make_node("MatMulNBits", ["x", "B", "scales", "zp"], ["y"],
                            domain="com.microsoft", K=packed.k, N=n, bits=packed.bits,
                            block_size=packed.group)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, list(x.shape))], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid("com.microsoft", 1)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


@pytest.mark.parametrize("bits,group,sym", [(4, 32, False), (4, 128, True), (8, 64, False)])
def test_kernel_agrees_with_onnxruntime_matmul_nbits(bits, group, sym):
    packed, x, _, _ = _case(45, 200, bits, group, sym, 1)
    ours = _run(NbitsWeight(packed.q, packed.scales, packed.zero_points, bits, group, 200), x)
    theirs = _ort_matmul_nbits(x, packed)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4 * np.abs(theirs).max())
