"""The int8 GEMM epilogue's requantization multiplies by 1 / scale and divides only where a
lane could round apart (kernels/int8/gemm.py ``_quotient``): its bytes are QuantizeLinear's
``clamp(rint(y / scale) + zero)`` exactly, ties and scales without an exact inverse
included."""

import numpy as np
import pytest

from msc.backend.kernels.int8.gemm import qmatmul


def _reference(y: np.ndarray, out_scale: float, out_zero: int) -> np.ndarray:
    q = np.rint(y / np.float32(out_scale)).astype(np.float32) + np.float32(out_zero)
    return np.clip(q, 0, 255).astype(np.uint8)


def _through_gemm(acc_values: np.ndarray, scale: float, bias: float, out_scale: float,
                  out_zero: int, vnni: bool) -> tuple[np.ndarray, np.ndarray]:
    """(kernel bytes, reference bytes) for y = acc * scale + bias, acc = the uint8 values
    of ``acc_values`` (one per output: a @ identity)."""
    n = acc_values.shape[1]
    a = acc_values.astype(np.uint8)
    eye = np.eye(n, dtype=np.int8)
    got = qmatmul(a, eye, 0, out="u8", scale=np.full(n, scale, np.float32),
                  bias=np.full(n, bias, np.float32), out_scale=out_scale, out_zero=out_zero,
                  vnni=vnni)
    y = a.astype(np.float32) * np.float32(scale) + np.float32(bias)
    return got, _reference(y, out_scale, out_zero)


@pytest.mark.parametrize("vnni", [False, True])
@pytest.mark.parametrize("out_scale, scale, bias", [
    (1.0, 1.0, 0.5),          # every value a tie: x.5, rounded to even
    (0.1, 0.05, 0.0),         # 1 / 0.1 is not a float: half of the values are near ties
    (0.3, 0.15, 0.0),
    (0.0217, 0.01085, 0.0),   # y / s = k / 2 up to the roundings
    (0.0417, 0.0123, -0.7),
    (3e-39, 1e-39, 0.0),      # 1 / scale overflows: the division throughout
])
def test_requantized_bytes_are_quantize_linear(vnni, out_scale, scale, bias):
    values = np.arange(256, dtype=np.int64).reshape(4, 64)
    got, want = _through_gemm(values, scale, bias, out_scale, 7, vnni)
    np.testing.assert_array_equal(got, want)


def test_random_scales_match_bytewise():
    rng = np.random.default_rng(4)
    for _ in range(20):
        values = rng.integers(0, 256, (6, 48))
        scale = float(rng.uniform(1e-3, 0.2))
        out_scale = float(scale * rng.choice([0.5, 1.0, 2.0, 1.5]) * rng.uniform(0.999, 1.001))
        got, want = _through_gemm(values, scale, float(rng.uniform(-1, 1)), out_scale,
                                  int(rng.integers(0, 256)), True)
        np.testing.assert_array_equal(got, want)
