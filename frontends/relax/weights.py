"""Weight data laid out like the graph's weight tensors (MSC's ``normalize_weights``).

A 1-D weight tensor (a bias) reshapes its constant (``[1, 6, 1, 1]`` -> ``[6]``); a tensor
whose layout differs from its constant's (a linear weight stored ``OI`` from an ``IO``
constant) permutes the data::

    weights = normalize_weights(graph, weight_refs)   # {"const": array, ...}
"""

from __future__ import annotations

import mmap

import numpy as np

from msc.errors import ValidationError

from .graph_builder import WeightRef

__all__ = ["is_mapped", "normalize_weights"]


def _to_data(ref: WeightRef) -> np.ndarray:
    data, tensor = ref.const.data, ref.tensor
    if tensor.ndim == 1:
        return data.reshape(tensor.shape) if data.ndim != 1 else data
    layout = tensor.layout.name
    if ref.layout and layout and ref.layout != layout:
        if sorted(ref.layout) != sorted(layout):
            raise ValidationError(f"weight layout {layout!r} does not permute the constant's "
                                  f"layout {ref.layout!r}", tensor=tensor.name)
        view = data.transpose([ref.layout.index(c) for c in layout])
        # A memory-mapped weight (ONNX external data) stays mapped: copying it would double a
        # large model's memory; the consumers that need C order (save, codegen) copy in chunks.
        return view if is_mapped(data) else np.ascontiguousarray(view)
    return data


def is_mapped(data: np.ndarray) -> bool:
    """True when the array's memory is a file mapping (np.memmap or a view of one)."""
    while isinstance(data, np.ndarray):
        if isinstance(data, np.memmap):
            return True
        data = data.base
    return isinstance(data, mmap.mmap)


def normalize_weights(graph, refs: list[WeightRef]) -> dict[str, np.ndarray]:
    """``{weight name: data}`` in ``graph.get_weights()`` order (each weight once)."""
    by_name = {r.tensor.name: r for r in refs}
    weights: dict[str, np.ndarray] = {}
    for tensor in graph.get_weights():
        if tensor.name not in weights:
            weights[tensor.name] = _to_data(by_name[tensor.name])
    return weights
