"""Weight data laid out like the graph's weight tensors (MSC's ``normalize_weights``).

A 1-D weight tensor (a bias) reshapes its constant (``[1, 6, 1, 1]`` -> ``[6]``); a tensor
whose layout differs from its constant's (a linear weight stored ``OI`` from an ``IO``
constant) permutes the data::

    weights = normalize_weights(graph, weight_refs)   # {"const": array, ...}
"""

from __future__ import annotations

import numpy as np

from msc.errors import ValidationError

from .graph_builder import WeightRef

__all__ = ["normalize_weights"]


def _to_data(ref: WeightRef) -> np.ndarray:
    data, tensor = ref.const.data, ref.tensor
    if tensor.ndim == 1:
        return data.reshape(tensor.shape) if data.ndim != 1 else data
    layout = tensor.layout.name
    if ref.layout and layout and ref.layout != layout:
        if sorted(ref.layout) != sorted(layout):
            raise ValidationError(f"weight layout {layout!r} does not permute the constant's "
                                  f"layout {ref.layout!r}", tensor=tensor.name)
        return np.ascontiguousarray(data.transpose([ref.layout.index(c) for c in layout]))
    return data


def normalize_weights(graph, refs: list[WeightRef]) -> dict[str, np.ndarray]:
    """``{weight name: data}`` in ``graph.get_weights()`` order (each weight once)."""
    by_name = {r.tensor.name: r for r in refs}
    weights: dict[str, np.ndarray] = {}
    for tensor in graph.get_weights():
        if tensor.name not in weights:
            weights[tensor.name] = _to_data(by_name[tensor.name])
    return weights
