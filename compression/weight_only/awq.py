"""Activation-aware scale search in the AWQ style (Lin et al., 2023), per layer.

Weights that meet large activations matter more to the layer's output. AWQ scales input
channel k of the weight by ``s_k = mean|x_k| ** alpha`` before quantizing and divides the
activation by ``s_k`` (here a ``multiply`` joint before the layer; rewrite.py), so the
channels that carry large activations get finer steps. ``alpha`` is searched on a grid
against the layer's own output error on calibration rows ``x``::

    choice = search_scales(x, w, bits=4, group=128, symmetric=True, grid=20)
    choice.packed, choice.input_scale, choice.sqnr_db, choice.rtn_sqnr_db

alpha = 0 is round-to-nearest, so the search never does worse than RTN on the rows it sees.
The weight clipping search of the paper is not done.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .packing import PackedWeight, quantize_rtn

__all__ = ["ScaleChoice", "output_sqnr", "search_scales"]


@dataclass
class ScaleChoice:
    packed: PackedWeight
    input_scale: np.ndarray | None  # None: RTN won (or no calibration rows)
    alpha: float
    sqnr_db: float       # layer output SQNR of the choice on the calibration rows
    rtn_sqnr_db: float   # the same for round-to-nearest


def output_sqnr(reference: np.ndarray, approx: np.ndarray) -> float:
    """10 log10(|ref|^2 / |ref - approx|^2) in dB (inf when equal)."""
    noise = float(np.sum((np.asarray(reference, np.float64) - approx) ** 2))
    signal = float(np.sum(np.asarray(reference, np.float64) ** 2))
    if noise == 0.0:
        return float("inf")
    return float(10.0 * np.log10(max(signal, 1e-300) / noise))


def _effective(packed: PackedWeight, scale: np.ndarray | None) -> np.ndarray:
    w = packed.dequantize().astype(np.float64)
    return w if scale is None else w / scale


def search_scales(x: np.ndarray, w: np.ndarray, bits: int, group: int | None,
                  symmetric: bool, grid: int = 20) -> ScaleChoice:
    """The best of ``grid + 1`` alphas for the rows ``x`` ``[T, K]`` of a ``[N, K]`` weight."""
    x = np.asarray(x, np.float64).reshape(-1, w.shape[1])
    reference = x @ np.asarray(w, np.float64).T
    rtn = quantize_rtn(w, bits, group, symmetric)
    rtn_db = output_sqnr(reference, x @ _effective(rtn, None).T)
    best = ScaleChoice(rtn, None, 0.0, rtn_db, rtn_db)
    magnitude = np.abs(x).mean(axis=0)
    if not x.size or not np.all(np.isfinite(magnitude)) or magnitude.max() <= 0:
        return best
    magnitude = np.maximum(magnitude, magnitude.max() * 1e-4)
    for step in range(1, grid + 1):
        alpha = step / grid
        scale = magnitude ** alpha
        scale = (scale / np.sqrt(scale.max() * scale.min())).astype(np.float32)
        packed = quantize_rtn(w * scale, bits, group, symmetric)
        db = output_sqnr(reference, x @ _effective(packed, scale.astype(np.float64)).T)
        if db > best.sqnr_db:
            best = ScaleChoice(packed, scale, alpha, db, rtn_db)
    return best
