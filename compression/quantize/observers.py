"""Activation range observers: bounded memory, one pass, never a stored activation.

Every observer keeps the exact min / max. The histogram observers also keep two histograms
of |x| (negative and positive values apart) over [0, R] with ``bins`` bins; when a batch
exceeds R, R doubles and neighbouring bins merge pairwise, which is exact (a value's bin at
2R is its bin at R halved), so the histogram never depends on batch order or needs a second
pass over the data.

- ``minmax``: the observed [min, max].
- ``percentile``: the |x| threshold where the CDF reaches ``percentile`` (onnxruntime's
  CalibPercentile: 2048 bins, 99.999); asymmetric ranges cut (100 - p) / 2 % per side.
- ``entropy``: onnxruntime's KL search over windows of the signed histogram symmetric around
  0 (``calibration.py``; ``entropy_bins`` signed bins, default 128 as onnxruntime, where the
  only candidate is the whole range).
- ``entropy_trt``: TensorRT's KL-divergence threshold on |x| (2048 bins into 128 levels; every
  candidate edge from 128 bins up; see ``kl_threshold`` for its two guards).
"""

from __future__ import annotations

import numpy as np

from msc.errors import ValidationError

from .calibration import entropy_window, signed_histogram

__all__ = ["METHODS", "Observer", "kl_threshold"]


class Observer:
    """Range of one tensor over the calibration data: ``update(x)`` per batch, then
    ``range(method, symmetric)`` -> (rmin, rmax)."""

    def __init__(self, bins: int = 2048, histogram: bool = True):
        self.bins, self.histogram = bins, histogram
        self.min, self.max, self.limit = np.inf, -np.inf, 0.0
        self.infinite = False  # saw +-inf (left out of the range; a mask's sum, see MASK_RANGE)
        self.neg = np.zeros(bins, np.int64)
        self.pos = np.zeros(bins, np.int64)

    def update(self, x: np.ndarray) -> None:
        x = np.asarray(x, np.float32).ravel()
        finite = np.isfinite(x)
        self.infinite = self.infinite or bool(np.isinf(x[~finite]).any())
        x = x[finite]
        if x.size == 0:
            return
        self.min, self.max = min(self.min, float(x.min())), max(self.max, float(x.max()))
        if self.histogram:
            self._grow(max(-self.min, self.max))
            self.neg += self._count(-x[x < 0])
            self.pos += self._count(x[x >= 0])

    def _grow(self, absmax: float) -> None:
        if self.limit == 0.0:
            self.limit = absmax if absmax > 0 else 1e-8
        while absmax > self.limit:
            self.limit *= 2
            for hist in (self.neg, self.pos):
                merged = hist.reshape(-1, 2).sum(axis=1)
                hist[:] = 0
                hist[:merged.size] = merged

    def _count(self, values: np.ndarray) -> np.ndarray:
        index = np.minimum((values * (self.bins / self.limit)).astype(np.int64), self.bins - 1)
        return np.bincount(index, minlength=self.bins)

    @property
    def width(self) -> float:
        return self.limit / self.bins

    def range(self, method: str, symmetric: bool, percentile: float = 99.999,
              levels: int = 128, entropy_bins: int = 128) -> tuple[float, float]:
        if self.min > self.max:  # never saw a value: an all-zero range
            return 0.0, 0.0
        if method not in METHODS:
            raise ValidationError(f"unknown calibration method {method!r}", key="method",
                                  hint=f"use one of {', '.join(METHODS)}")
        options = {"percentile": percentile, "levels": levels, "entropy_bins": entropy_bins}
        return METHODS[method](self, symmetric, **options)


def _minmax(obs: Observer, symmetric: bool, **_):
    return obs.min, obs.max


def _edge(hist: np.ndarray, fraction: float, width: float) -> float:
    """The lower edge of the first bin where the cumulative count reaches ``fraction`` (as
    onnxruntime's CalibPercentile: ``hist_edges[searchsorted(cdf, p)]``; the upper edge left
    the percentile at the max on small calibration sets, where the last bin holds the cut)."""
    total = hist.sum()
    if total == 0:
        return 0.0
    index = int(np.searchsorted(np.cumsum(hist), fraction * total))
    return min(index, hist.size - 1) * width


def _percentile(obs: Observer, symmetric: bool, percentile: float, **_):
    if symmetric:
        t = _edge(obs.neg + obs.pos, percentile / 100, obs.width)
        return max(obs.min, -t), min(obs.max, t)
    total = obs.neg.sum() + obs.pos.sum()
    cut = (100 - percentile) / 200 * total
    low = _edge(obs.neg, 1 - cut / max(obs.neg.sum(), 1), obs.width) if obs.neg.any() else 0.0
    high = _edge(obs.pos, 1 - cut / max(obs.pos.sum(), 1), obs.width) if obs.pos.any() else 0.0
    return max(obs.min, -low), min(obs.max, high)


def _entropy(obs: Observer, symmetric: bool, levels: int, entropy_bins: int, **_):
    hist = signed_histogram(obs.neg, obs.pos, entropy_bins)
    t = entropy_window(hist, levels) * obs.limit / (entropy_bins // 2)
    return max(obs.min, -t), min(obs.max, t)


def _entropy_trt(obs: Observer, symmetric: bool, levels: int, **_):
    t = kl_threshold(obs.neg + obs.pos, levels) * obs.width
    return max(obs.min, -t), min(obs.max, t)


def _smooth(p: np.ndarray, eps: float = 1e-4) -> np.ndarray:
    # Move eps mass onto empty bins so KL stays finite (as TensorRT and onnxruntime do).
    zeros = p == 0
    n_zero, n_nonzero = int(zeros.sum()), int((~zeros).sum())
    if n_nonzero == 0:
        return p
    out = p.astype(np.float64).copy()
    out[zeros] = eps
    out[~zeros] -= eps * n_zero / n_nonzero
    return out


def _kl_at(hist: np.ndarray, i: int, levels: int) -> float:
    p = hist[:i].astype(np.float64).copy()
    p[i - 1] += hist[i:].sum()  # the clipped tail lands in the last kept bin
    nonzero = (hist[:i] != 0).astype(np.float64)
    group = np.arange(i) * levels // i  # bin j of the window merges into level j*levels/i
    sums = np.bincount(group, weights=hist[:i], minlength=levels)
    kept = np.bincount(group, weights=nonzero, minlength=levels)
    q = nonzero * (sums / np.maximum(kept, 1))[group]  # spread over the non-empty bins
    p, q = p / p.sum(), q / max(q.sum(), 1e-30)
    p, q = _smooth(p), _smooth(q)
    mask = p > 0
    return float(np.sum(p[mask] * np.log(p[mask] / np.maximum(q[mask], 1e-30))))


def kl_threshold(hist: np.ndarray, levels: int = 128) -> int:
    """The number of |x| bins whose clipped, ``levels``-level copy is closest (KL) to the
    histogram; the threshold is that many bin widths. TensorRT's calibration (GTC'17), with
    two guards: bin 0 counts as bin 1 (NVIDIA pytorch-quantization's, so the zeros of a ReLU
    do not pull the threshold down), and a window must hold ``levels`` non-empty bins (a
    window with fewer has a Q equal to P whatever it clips, so its KL says nothing: a
    narrow band such as [0.3, 1.0] would get the threshold 0.3)."""
    hist = np.asarray(hist, np.float64).copy()
    if hist.size > 1:
        hist[0] = hist[1]
    nonzero = np.flatnonzero(hist)
    last = int(nonzero[-1]) + 1 if nonzero.size else hist.size
    if nonzero.size <= levels:
        return last
    first = max(levels, int(nonzero[levels - 1]) + 1)
    best, best_i = np.inf, last
    for i in range(first, last + 1):
        kl = _kl_at(hist, i, levels)
        if kl < best:
            best, best_i = kl, i
    return best_i


METHODS = {"minmax": _minmax, "percentile": _percentile, "entropy": _entropy,
           "entropy_trt": _entropy_trt}
