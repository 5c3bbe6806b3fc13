"""Scale and zero point from a float range, and the numpy fake-quant reference.

The rules follow onnxruntime's ``compute_scale_zp`` (see docs/notes or
/work/shared/notes/compression-anchors.md section 2): the range always includes 0; symmetric
int8 uses [-127, 127] so that +-absmax map to +-127 with zero point 0; asymmetric uint8 maps
[rmin, rmax] onto [0, 255]. The quantize / dequantize arithmetic is the op table's
(``msc/relax/op/numpy_ref_nn.py``): divide in float32, round half to even, clip to the dtype.
"""

from __future__ import annotations

import numpy as np

from msc.errors import ValidationError

__all__ = ["DTYPE_RANGES", "fake_quant", "qparams_from_range", "weight_qparams"]

# dtype -> (qmin, qmax, symmetric): the integer range a scale spreads the float range over.
DTYPE_RANGES = {"int8": (-127, 127, True), "uint8": (0, 255, False)}


def _dtype_range(dtype: str) -> tuple[int, int, bool]:
    if dtype not in DTYPE_RANGES:
        raise ValidationError(f"unsupported quantized dtype {dtype!r}", key="dtype",
                              hint=f"use one of {', '.join(DTYPE_RANGES)}")
    return DTYPE_RANGES[dtype]


def qparams_from_range(rmin, rmax, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """``(scale float32, zero_point <dtype>)`` for the float range [rmin, rmax] (arrays or
    scalars, one per channel). A zero range gets scale 1 so that dequantize stays exact."""
    qmin, qmax, symmetric = _dtype_range(dtype)
    # float32 arithmetic, as onnxruntime's compute_scale_zp, so the scales agree bit for bit
    rmin = np.minimum(np.asarray(rmin, np.float32), np.float32(0))
    rmax = np.maximum(np.asarray(rmax, np.float32), np.float32(0))
    if symmetric:
        absmax = np.maximum(-rmin, rmax)
        rmin, rmax = -absmax, absmax
    scale = (rmax - rmin) / np.float32(qmax - qmin)
    safe = np.where(scale > 0, scale, np.float32(1))
    zero = np.zeros_like(scale) if symmetric else np.round(np.float32(qmin) - rmin / safe)
    return safe.astype(np.float32), np.clip(zero, qmin, qmax).astype(dtype)


def weight_qparams(weight: np.ndarray, axis: int, dtype: str = "int8"):
    """Per-channel symmetric qparams of a weight along ``axis`` (e.g. OIHW -> axis 0)."""
    moved = np.moveaxis(np.asarray(weight, np.float64), axis, 0).reshape(weight.shape[axis], -1)
    return qparams_from_range(moved.min(axis=1), moved.max(axis=1), dtype)


def _along(value: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    if value.ndim == 0 or value.size == 1:
        return value.reshape(())
    shape = [1] * ndim
    shape[axis] = -1
    return value.reshape(shape)


def fake_quant(x: np.ndarray, scale, zero_point, axis: int = -1) -> np.ndarray:
    """``dequantize(quantize(x))`` in float32, exactly as the QDQ joints compute it."""
    x = np.asarray(x, np.float32)
    zero = np.asarray(zero_point)
    info = np.iinfo(zero.dtype)
    axis = axis % max(x.ndim, 1)
    s, z = _along(np.asarray(scale, np.float32), axis, x.ndim), _along(zero, axis, x.ndim)
    q = np.clip(np.round(x / s) + z.astype(np.float32), info.min, info.max)
    return ((q.astype(np.float64) - z) * s.astype(np.float64)).astype(np.float32)
