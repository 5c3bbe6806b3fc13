"""An int8 weight with its per-channel scale: what ``compression.quantize`` stores for a
quantized weight, in the weights dict beside plain arrays.

Every consumer that reads a weight as an array (``np.asarray``, ``find_weight``: the Relax and
torch codegens, the backend, the pruner, the viewer) gets its dequantized float32 values, bit
for bit what ``dequantize(quantize(w))`` gives, so the graph and its fused joints stay as they
are. Writers that can store int8 look at the record instead: ``to_onnx`` writes an int8
initializer and a DequantizeLinear, ``pack_weights`` an ``.npz`` with the int8 array and its
scale (read back by ``codegen.weight_files.load_weights``)::

    qw = QuantizedWeight(q_int8, scale, axis=0)   # np.asarray(qw) == q * scale along axis 0
    save_npz("model.npz", pack_weights(weights))  # ~4x smaller for the quantized weights
    weights = unpack_weights(load_npz("model.npz"))
"""

from __future__ import annotations

import numpy as np

from msc.errors import ValidationError

__all__ = ["QuantizedWeight", "is_quantized", "pack_weights", "unpack_weights"]

# npz keys of a packed weight's scale and axis beside its int8 array ("conv.weight#scale")
SCALE_KEY, AXIS_KEY = "#scale", "#axis"


class QuantizedWeight:
    """``q`` (int8, zero point 0) times ``scale`` (float32, one per channel along ``axis``)."""

    __slots__ = ("axis", "q", "scale")

    def __init__(self, q: np.ndarray, scale, axis: int):
        self.q = np.asarray(q)
        self.scale = np.asarray(scale, np.float32).reshape(-1)
        self.axis = int(axis) % max(self.q.ndim, 1)
        if self.q.dtype != np.int8 or self.scale.size not in (1, self.q.shape[self.axis]):
            raise ValidationError(f"an int8 weight needs one scale per channel along axis "
                                  f"{self.axis}, got {self.q.dtype} {list(self.q.shape)} and "
                                  f"{self.scale.size} scales", key="scale")

    @property
    def shape(self) -> tuple[int, ...]:
        return self.q.shape

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float32)

    @property
    def ndim(self) -> int:
        return self.q.ndim

    @property
    def nbytes(self) -> int:
        """The stored bytes (int8 data and scales), not the float copy's."""
        return self.q.nbytes + self.scale.nbytes

    def scale_along(self) -> np.ndarray:
        shape = [1] * self.q.ndim
        if self.q.ndim and self.scale.size > 1:
            shape[self.axis] = -1
        return self.scale.reshape(shape) if self.q.ndim else self.scale.reshape(())

    def dequantize(self) -> np.ndarray:
        # float64 then one rounding to float32: the arithmetic of the dequantize joint
        return (self.q.astype(np.float64) * self.scale_along().astype(np.float64)).astype(
            np.float32)

    def __array__(self, dtype=None, copy=None):
        value = self.dequantize()
        return value if dtype is None else value.astype(dtype)

    def reshape(self, *shape) -> np.ndarray:
        return self.dequantize().reshape(*shape)

    def transposed(self) -> QuantizedWeight:
        """The 2-D weight transposed, its scale following its channel axis."""
        return QuantizedWeight(np.ascontiguousarray(self.q.T), self.scale, 1 - self.axis)

    def __repr__(self) -> str:
        return f"QuantizedWeight(int8 {list(self.q.shape)}, axis={self.axis})"


def is_quantized(value) -> bool:
    return isinstance(value, QuantizedWeight)


def pack_weights(weights: dict) -> dict[str, np.ndarray]:
    """Plain arrays for a weight file: each QuantizedWeight as its int8 array plus
    ``<name>#scale`` and ``<name>#axis``."""
    arrays = {}
    for name, value in weights.items():
        if is_quantized(value):
            arrays[name] = value.q
            arrays[name + SCALE_KEY] = value.scale
            arrays[name + AXIS_KEY] = np.asarray(value.axis, np.int64)
        else:
            arrays[name] = np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach")
                                      else value)
    return arrays


def unpack_weights(arrays: dict) -> dict:
    """``pack_weights`` undone: int8 arrays with a ``#scale`` and ``#axis`` become
    QuantizedWeights again."""
    out = {}
    for name, value in arrays.items():
        if name.endswith((SCALE_KEY, AXIS_KEY)) and name.rpartition("#")[0] in arrays:
            continue
        scale, axis = arrays.get(name + SCALE_KEY), arrays.get(name + AXIS_KEY)
        if scale is not None and axis is not None:
            value = QuantizedWeight(value, scale, int(np.asarray(axis)))
        out[name] = value
    return out
