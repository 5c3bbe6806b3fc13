"""Round-to-nearest weight quantization and the packed storage every reader shares.

A ``[N, K]`` weight (``[out, in]``) becomes, per output row and per group of ``group`` input
columns (the last group zero-padded when ``group`` does not divide K):

* ``q``: unsigned codes in ``[0, 2**bits - 1]``, stored ``[N, groups, group * bits / 8]``
  uint8; int4 two per byte, element ``2j`` in the low nibble and ``2j + 1`` in the high one
  (onnxruntime's ``MatMulNBits`` layout, so ``to_onnx`` writes the bytes as they are);
* ``scales``: float32 ``[N, groups]``; ``zero_points``: uint8 ``[N, groups]`` (one code each).

The value is ``(q - zero_point) * scale``. Symmetric quantization fixes the zero point at
``2**(bits-1)`` (onnxruntime's default) and takes ``scale = max|w| / (2**(bits-1) - 1)``;
asymmetric maps ``[min(w, 0), max(w, 0)]`` onto the whole code range::

    packed = quantize_rtn(w, bits=4, group=32, symmetric=False)
    w_hat = packed.dequantize()                  # [N, K] float32
    packed.q.nbytes == N * ceil(K / 32) * 16     # half a byte per weight
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from msc.errors import ValidationError
from msc.relax.op.numpy_ref_nn import dequantize_nbits

__all__ = ["PackedWeight", "check_format", "pack_codes", "quantize_rtn", "unpack_codes"]


@dataclass(frozen=True)
class PackedWeight:
    """One quantized ``[N, K]`` weight as it is stored (see the module doc)."""

    q: np.ndarray            # uint8 [N, groups, group * bits // 8]
    scales: np.ndarray       # float32 [N, groups]
    zero_points: np.ndarray  # uint8 [N, groups]
    bits: int
    group: int
    k: int

    @property
    def n(self) -> int:
        return self.q.shape[0]

    @property
    def groups(self) -> int:
        return self.q.shape[1]

    @property
    def nbytes(self) -> int:
        return self.q.nbytes + self.scales.nbytes + self.zero_points.nbytes

    def codes(self) -> np.ndarray:
        """The unsigned codes, ``[N, groups * group]`` uint8 (padding included)."""
        return unpack_codes(self.q, self.bits).reshape(self.n, -1)

    def dequantize(self) -> np.ndarray:
        """``(q - zero_point) * scale`` as float32 ``[N, K]``: what every reader computes."""
        return dequantize_nbits(self.q, self.scales, self.zero_points, self.bits, self.group,
                                self.k)


def pack_codes(codes: np.ndarray, bits: int) -> np.ndarray:
    """uint8 codes ``[..., L]`` (L even for 4 bits) as stored bytes: int4 two per byte."""
    codes = np.asarray(codes, np.uint8)
    if bits == 8:
        return codes.copy()
    return (codes[..., 0::2] & 0xF) | ((codes[..., 1::2] & 0xF) << 4)


def unpack_codes(packed: np.ndarray, bits: int) -> np.ndarray:
    """``pack_codes`` undone: ``[..., L]`` uint8 codes."""
    if bits == 8:
        return np.asarray(packed, np.uint8)
    out = np.empty(packed.shape[:-1] + (packed.shape[-1] * 2,), np.uint8)
    out[..., 0::2], out[..., 1::2] = packed & 0xF, packed >> 4
    return out


def check_format(bits: int, group: int | None) -> None:
    """bits 4 or 8; a group a power of two >= 16 (what MatMulNBits runs), or None (one group
    per output channel, int8 only)."""
    if bits not in (4, 8):
        raise ValidationError(f"bits={bits!r}: weight-only quantization stores 4 or 8 bits",
                              key="bits", hint="use bits=8 (per channel) or bits=4 (groups)")
    if group is None:
        if bits != 8:
            raise ValidationError("int4 needs a group size (one scale per row is too coarse)",
                                  key="group_size", hint="use group_size 32, 64 or 128")
        return
    if not isinstance(group, int) or group < 16 or group & (group - 1):
        raise ValidationError(f"group_size={group!r} must be a power of two >= 16 (32, 64, "
                              "128...), as onnxruntime's MatMulNBits block_size",
                              key="group_size", hint="use 32, 64 or 128")


def quantize_rtn(w: np.ndarray, bits: int = 4, group: int | None = 128,
                 symmetric: bool = True) -> PackedWeight:
    """Round-to-nearest quantization of a float ``[N, K]`` weight (``group=None``: per row)."""
    w = np.asarray(w, np.float32)
    if w.ndim != 2:
        raise ValidationError(f"expects a 2-D [out, in] weight, got shape {list(w.shape)}",
                              key="weight")
    n, k = w.shape
    check_format(bits, group)
    size = k if group is None else group
    groups = -(-k // size) if k else 1
    padded = np.zeros((n, groups * size), np.float32)
    padded[:, :k] = w
    blocks = padded.reshape(n, groups, size).astype(np.float64)
    scales, zeros = _scales(blocks, bits, symmetric)
    top = (1 << bits) - 1
    codes = np.clip(np.rint(blocks / scales[..., None]) + zeros[..., None], 0, top)
    q = pack_codes(codes.astype(np.uint8), bits)
    return PackedWeight(np.ascontiguousarray(q), scales.astype(np.float32),
                        zeros.astype(np.uint8), bits, size, k)


def _scales(blocks: np.ndarray, bits: int, symmetric: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per-group (scale, zero point) in float64; an all-zero group gets scale 1."""
    top = (1 << bits) - 1
    if symmetric:
        half = 1 << (bits - 1)
        amax = np.abs(blocks).max(axis=-1)
        scales = np.where(amax > 0, amax / (half - 1), 1.0)
        return scales, np.full(amax.shape, half, np.float64)
    lo = np.minimum(blocks.min(axis=-1), 0.0)
    hi = np.maximum(blocks.max(axis=-1), 0.0)
    scales = np.where(hi > lo, (hi - lo) / top, 1.0)
    zeros = np.clip(np.rint(-lo / scales), 0, top)
    return scales, zeros
