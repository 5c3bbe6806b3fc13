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
    data.fit(model)                            # the same, with each candidate's workload
    data.save()

The file holds plain arrays, read with ``allow_pickle=False``, and is checked before it is
trusted: one written by another feature layout, damaged, or whose arrays do not fit together
(shapes, non-finite features, non-positive times) is set aside with a warning, never fatal.
"""

from __future__ import annotations

import logging
import os
import zipfile

import numpy as np

from .cost_model import GBTModel
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

    def extend(self, other: TrainingSet) -> None:
        """Add every candidate of ``other`` that this set does not hold yet."""
        for k in range(len(other)):
            self.add(other.workloads[k], other.rows[k], other.secs[k], other._tags[k])

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

    def workload_ids(self) -> np.ndarray:
        """An integer per candidate naming its workload (for the rank objective's pairs)."""
        index: dict = {}
        return np.array([index.setdefault(w, len(index)) for w in self.workloads], int)

    def fit(self, model):
        """``model`` fit on every candidate held; the workloads go to a model that takes
        them (``GBTModel``), so it ranks each workload's candidates among themselves."""
        x, y, groups = self.arrays()
        if isinstance(model, GBTModel):
            return model.fit(x, y, groups, self.workload_ids())
        return model.fit(x, y, groups)

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
                arrays = {k: data[k] for k in ("names", "x", "groups", "secs", "workloads",
                                               "tags")}
            _check(arrays)
        except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as exc:
            LOG.warning("%s: not used (%s); the cost model starts afresh", self.path, exc)
            return
        x, groups = arrays["x"], arrays["groups"]
        for k in range(len(arrays["secs"])):
            self.add(str(arrays["workloads"][k]), x[groups == k], float(arrays["secs"][k]),
                     str(arrays["tags"][k]))


def _check(a: dict) -> None:
    """Raise ValueError unless the arrays read are a training set of this feature layout:
    the names, the shapes, finite features, positive times, each row's candidate in range."""
    if a["names"].dtype.kind != "U" or list(a["names"]) != list(FEATURE_NAMES):
        raise ValueError(f"written with another feature layout ({len(a['names'])} features, "
                         f"this msc has {len(FEATURE_NAMES)})")
    x, groups, secs = a["x"], a["groups"], a["secs"]
    if x.ndim != 2 or x.shape[1] != len(FEATURE_NAMES) or x.dtype.kind != "f":
        raise ValueError(f"features of shape {x.shape} ({x.dtype}), not (rows, "
                         f"{len(FEATURE_NAMES)}) floats")
    if groups.ndim != 1 or len(groups) != len(x) or groups.dtype.kind not in "iu":
        raise ValueError("one integer candidate index per feature row is needed")
    if not len(secs) == len(a["workloads"]) == len(a["tags"]) or secs.dtype.kind != "f":
        raise ValueError("times, workloads and tags of different lengths")
    if len(x) and (groups.min() < 0 or groups.max() >= len(secs)):
        raise ValueError("a feature row names a candidate that is not there")
    if not np.isfinite(x).all() or not (secs > 0).all():
        raise ValueError("features that are not finite, or times that are not positive")
