"""Error metrics of a quantized tensor against its float reference, accumulated over batches.

SQNR dB = 10 log10(sum x^2 / sum (x - x_hat)^2); cosine = x . x_hat / (|x| |x_hat|), both over
all elements of all batches; max abs error over everything. A tensor quantized without any
error reports ``SQNR_CAP`` dB (JSON has no infinity).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["SQNR_CAP", "ErrorStats"]

SQNR_CAP = 200.0


class ErrorStats:
    """``add(float, quantized)`` per batch; ``result()`` -> {sqnr_db, cosine, max_abs_error}."""

    def __init__(self) -> None:
        self.signal = self.noise = self.dot = self.norm_q = 0.0
        self.max_abs = 0.0

    def add(self, ref, got) -> ErrorStats:
        x = np.asarray(ref, np.float64).ravel()
        y = np.asarray(got, np.float64).ravel()
        diff = x - y
        self.signal += float(x @ x)
        self.noise += float(diff @ diff)
        self.dot += float(x @ y)
        self.norm_q += float(y @ y)
        self.max_abs = max(self.max_abs, float(np.abs(diff).max()) if diff.size else 0.0)
        return self

    @property
    def sqnr_db(self) -> float:
        if self.noise == 0.0:
            return SQNR_CAP
        if self.signal == 0.0:
            return -SQNR_CAP
        return min(SQNR_CAP, 10 * math.log10(self.signal / self.noise))

    @property
    def cosine(self) -> float:
        norms = math.sqrt(self.signal * self.norm_q)
        return 1.0 if norms == 0.0 else self.dot / norms

    def result(self) -> dict:
        return {"sqnr_db": round(self.sqnr_db, 3), "cosine": round(self.cosine, 6),
                "max_abs_error": float(f"{self.max_abs:.6g}")}
