"""Entropy (KL) calibration as onnxruntime's EntropyCalibrater defines it, on msc's histograms.

The facts (onnxruntime 1.32, ``quantization/calibrate.py``): the histogram is of the *signed*
values over [-absmax, absmax] with ``num_bins`` = 128 bins (quantize_static passes no other
count); the candidate windows are symmetric around the zero bin, from ``num_quantized_bins``
(128) bins wide up to the whole histogram; for each, P is the window with the clipped tails
added to its end bins and Q is the window merged into 128 levels and spread back; the window
of the least KL(P || Q) wins and is clipped to the observed [min, max]. With the default 128
bins there is a single candidate, the whole range: onnxruntime's default Entropy *is* MinMax.

Why msc follows it instead of TensorRT's |x| search (kept as ``entropy_trt``): on the zoo
with random weights the 2048-bin KL searches (TensorRT's, or this one with more bins) clip
activations that the next layers need and lose 2-11 dB of output SQNR against MinMax
(benchmarks/quantize.py; see docs/compression.md), while the KL criterion never looks at the
output error. ``entropy_bins`` (default 128, as onnxruntime) opens the search when wanted.

msc's Observer keeps |x| histograms per sign (``observers.py``); the signed histogram is the
negative one reversed next to the positive one, merged down to ``entropy_bins``. The windows
here are exactly symmetric ([-i, i) bins around 0; onnxruntime's end one bin further right).
Q spreads each level's count over the window's non-empty bins only (TensorRT's rule, where
onnxruntime also fills empty bins and truncates to integers).
"""

from __future__ import annotations

import numpy as np

from msc.errors import ValidationError

__all__ = ["entropy_window", "signed_histogram", "smooth"]


def signed_histogram(neg: np.ndarray, pos: np.ndarray, bins: int) -> np.ndarray:
    """The |x| histograms of the negative and positive values as one signed histogram of
    ``bins`` bins over [-R, R] (bin ``bins // 2`` starts at 0)."""
    half = bins // 2
    if bins < 2 or bins % 2 or neg.size % half:
        raise ValidationError(f"entropy_bins={bins} must be even and divide "
                              f"{2 * neg.size} (twice the histogram bins)", key="entropy_bins",
                              hint="use 128 (onnxruntime's default) or another power of two")
    factor = neg.size // half
    neg = neg.reshape(half, factor).sum(axis=1)
    pos = pos.reshape(half, factor).sum(axis=1)
    return np.concatenate([neg[::-1], pos]).astype(np.float64)


def smooth(p: np.ndarray, eps: float = 1e-4) -> np.ndarray | None:
    """Move ``eps`` onto every empty bin, taken evenly from the others (so KL is finite);
    None when that would empty a bin (the distribution is too sparse to compare)."""
    zeros = p == 0
    n_zero, n_nonzero = int(zeros.sum()), int((~zeros).sum())
    if n_nonzero == 0:
        return None
    out = p.astype(np.float64).copy()
    out[zeros] = eps
    out[~zeros] -= eps * n_zero / n_nonzero
    return out if (out > 0).all() else None


def _kl(hist: np.ndarray, start: int, end: int, levels: int) -> float:
    window = hist[start:end]
    p = window.copy()
    p[0] += hist[:start].sum()
    p[-1] += hist[end:].sum()
    nonzero = (p != 0).astype(np.float64)
    merged = window.size // levels
    # bin j of the window merges into level j // merged (the remainder into the last level)
    group = np.minimum(np.arange(window.size) // merged, levels - 1)
    sums = np.bincount(group, weights=window, minlength=levels)
    kept = np.bincount(group, weights=nonzero, minlength=levels)
    q = nonzero * (sums / np.maximum(kept, 1))[group]
    if p.sum() == 0 or q.sum() == 0:
        return np.inf
    p, q = smooth(p / p.sum()), smooth(q / q.sum())
    if p is None or q is None:
        return np.inf
    return float(np.sum(p * np.log(p / q)))


def entropy_window(hist: np.ndarray, levels: int = 128) -> int:
    """The half width (in bins) of the symmetric window of the signed histogram ``hist`` whose
    ``levels``-level copy is closest (KL) to it; the whole histogram when it has no more than
    ``levels`` bins or no window compares."""
    hist = np.asarray(hist, np.float64)
    zero = hist.size // 2
    if hist.size <= levels:
        return zero
    best, best_i = np.inf, zero
    for i in range(min(levels // 2, zero), zero + 1):
        kl = _kl(hist, zero - i, zero + i, levels)
        if kl < best:  # the first (narrowest) window wins a tie, as onnxruntime's argmin
            best, best_i = kl, i
    return best_i
