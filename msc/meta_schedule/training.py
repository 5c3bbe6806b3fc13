"""The cost model's training data: per-store features of every measured candidate, of every
workload tuned in a ``work_dir``, kept there as ``cost_model_features.npz``.

The model is refit from this data at every search round (a few hundred candidates fit in
well under a second), so keeping the data is keeping the model: a new ``tune_tir`` in the same
``work_dir`` ranks its first candidates with what earlier tunes of other workloads measured.
Scores are TVM's: the workload's best time over the candidate's (1 for the best, 0 for a
candidate that failed), so workloads of any size train one model::

    data = TrainingSet("out/tune")
    data.add(workload_key, rows, secs, tag)    # rows: per_store_features of the candidate
    x, y, groups = data.arrays()               # for GBTModel.fit(x, y, groups)
    data.save()

The file holds plain arrays (``allow_pickle=False``); one written by another feature layout
is set aside with a warning, never fatal.
"""

from __future__ import annotations

import logging
import os

import numpy as np

from .database import FAILED
from .features import FEATURE_NAMES

__all__ = ["TrainingSet"]

LOG = logging.getLogger("msc.meta_schedule")
FILE = "cost_model_features.npz"


class TrainingSet:
    """Measured candidates as per-store feature rows, with their workload and seconds."""

    def __init__(self, work_dir: str | None = None):
        self.path = os.path.join(work_dir, FILE) if work_dir else None
        self.rows: list = []        # one (stores, features) array per candidate
        self.workloads: list = []   # workload key per candidate
        self.secs: list = []        # mean seconds per candidate (FAILED: failed)
        self.tags: set = set()      # "workload|decisions" of every candidate held
        self._tags: list = []
        if self.path and os.path.exists(self.path):
            self._load()

    def __len__(self) -> int:
        return len(self.secs)

    def has(self, tag: str) -> bool:
        return tag in self.tags

    def add(self, workload: str, rows: np.ndarray, secs: float, tag: str) -> None:
        if tag in self.tags or len(rows) == 0:
            return
        self.rows.append(np.asarray(rows, float))
        self.workloads.append(workload)
        self.secs.append(float(secs))
        self.tags.add(tag)
        self._tags.append(tag)

    def valid_count(self) -> int:
        return sum(s < FAILED for s in self.secs)

    def arrays(self) -> tuple:
        """(x, y, groups): every candidate's rows stacked, its score, and the candidate index
        of each row."""
        best: dict = {}
        for w, s in zip(self.workloads, self.secs):
            if s < FAILED:
                best[w] = min(best.get(w, s), s)
        y = np.array([best[w] / s if s < FAILED and w in best else 0.0
                      for w, s in zip(self.workloads, self.secs)])
        groups = np.concatenate([np.full(len(r), k) for k, r in enumerate(self.rows)]) \
            if self.rows else np.zeros(0, int)
        x = np.concatenate(self.rows) if self.rows else np.zeros((0, len(FEATURE_NAMES)))
        return x, y, groups.astype(int)

    def save(self) -> None:
        """Write the file atomically (a temp file, then rename)."""
        if not self.path or not self.rows:
            return
        x, _, groups = self.arrays()
        tmp = self.path + ".tmp.npz"
        np.savez(tmp, x=x, groups=groups, secs=np.array(self.secs),
                 workloads=np.array(self.workloads, dtype=str),
                 tags=np.array(self._tags, dtype=str),
                 names=np.array(FEATURE_NAMES, dtype=str))
        os.replace(tmp, self.path)

    def _load(self) -> None:
        try:
            with np.load(self.path, allow_pickle=False) as data:
                if list(data["names"]) != list(FEATURE_NAMES):
                    raise ValueError("written with another feature layout")
                x, groups = data["x"], data["groups"]
                secs, workloads, tags = data["secs"], data["workloads"], data["tags"]
                if not len(secs) == len(workloads) == len(tags) or len(x) != len(groups):
                    raise ValueError("arrays of different lengths")
        except (OSError, ValueError, KeyError) as exc:
            LOG.warning("%s: not used (%s); the cost model starts afresh", self.path, exc)
            return
        for k in range(len(secs)):
            self.add(str(workloads[k]), x[groups == k], float(secs[k]), str(tags[k]))
