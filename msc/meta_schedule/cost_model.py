"""Cost models that rank unmeasured candidates: gradient-boosted regression trees in numpy.

No tree library is installed here (xgboost, lightgbm and scikit-learn are absent), and the
data is small (tens to hundreds of measured candidates of one sketch, a few dozen
features), so exact greedy splits over every feature are cheap. The model predicts a score
(higher = faster: the log of the throughput relative to the best measured), as TVM's
XGBModel predicts ``min_cost / cost``::

    model = GBTModel()
    model.fit(features, scores)      # numpy (n, f) and (n,)
    model.predict(pool_features)     # (m,)
"""

from __future__ import annotations

import numpy as np

from ..errors import ValidationError

__all__ = ["GBTModel", "RandomModel", "make_cost_model"]


class _Tree:
    """A regression tree of fixed depth: nodes are (feature, threshold, left, right) or a
    leaf value, the weighted mean of its rows' targets."""

    def __init__(self, depth: int, min_leaf: int):
        self.depth, self.min_leaf = depth, min_leaf
        self.root = None

    def fit(self, x: np.ndarray, r: np.ndarray, w: np.ndarray | None = None) -> _Tree:
        self.root = self._grow(x, r, np.ones(len(r)) if w is None else w, self.depth)
        return self

    def _grow(self, x, r, w, depth):
        leaf = float((w * r).sum() / w.sum())
        if depth == 0 or len(r) < 2 * self.min_leaf:
            return leaf
        split = _best_split(x, r, w, self.min_leaf)
        if split is None:
            return leaf
        f, t = split
        left = x[:, f] <= t
        return (f, t, self._grow(x[left], r[left], w[left], depth - 1),
                self._grow(x[~left], r[~left], w[~left], depth - 1))

    def predict(self, x: np.ndarray) -> np.ndarray:
        out = np.empty(len(x))
        _fill(self.root, x, np.arange(len(x)), out)
        return out


def _fill(node, x: np.ndarray, rows: np.ndarray, out: np.ndarray) -> None:
    """Write the leaf value of each of ``rows`` into ``out`` (all rows of a node at once)."""
    if not isinstance(node, tuple):
        out[rows] = node
        return
    f, t, left, right = node
    goes_left = x[rows, f] <= t
    _fill(left, x, rows[goes_left], out)
    _fill(right, x, rows[~goes_left], out)


def _best_split(x: np.ndarray, r: np.ndarray, w: np.ndarray, min_leaf: int):
    """(feature, threshold) minimizing the weighted squared error of the two sides, or
    None."""
    best, best_gain = None, 1e-12
    wr = w * r
    total, weight, n = wr.sum(), w.sum(), len(r)
    base = total * total / weight
    k = np.arange(1, n)
    for f in range(x.shape[1]):
        order = np.argsort(x[:, f], kind="stable")
        xs = x[order, f]
        if xs[0] == xs[-1]:
            continue
        csum, cw = np.cumsum(wr[order])[:-1], np.cumsum(w[order])[:-1]
        valid = (xs[1:] != xs[:-1]) & (k >= min_leaf) & (n - k >= min_leaf)
        if not valid.any():
            continue
        gain = csum ** 2 / cw + (total - csum) ** 2 / np.maximum(weight - cw, 1e-12) - base
        gain = np.where(valid, gain, -np.inf)
        i = int(np.argmax(gain))
        if gain[i] > best_gain:
            best, best_gain = (f, float((xs[i] + xs[i + 1]) / 2)), gain[i]
    return best


class GBTModel:
    """Gradient-boosted trees for squared error: ``rounds`` trees of ``depth``, each fit to
    the residual and added with step ``learning_rate``.

    With ``groups`` (the candidate index of each row) a candidate is several rows, one per
    store (``features.per_store_features``), and its prediction is the sum of its rows'
    (TVM's XGBModel "pack-sum"). Each tree is a Newton step of the candidates' squared error:
    a row's target is its candidate's residual over the candidate's row count, weighted by
    that count, so a leaf moves a candidate of k rows by its residual, not k times it."""

    def __init__(self, rounds: int = 40, depth: int = 3, learning_rate: float = 0.3,
                 min_leaf: int = 2):
        self.rounds, self.depth, self.lr, self.min_leaf = rounds, depth, learning_rate, min_leaf
        self.base, self.trees = 0.0, []

    def fit(self, x, y, groups=None) -> GBTModel:
        x, y = np.asarray(x, float), np.asarray(y, float)
        groups = np.arange(len(x)) if groups is None else np.asarray(groups, int)
        rows = np.bincount(groups, minlength=len(y)).astype(float)
        per_row = rows[groups]
        self.base, self.trees = float(y.mean()), []
        pred = np.full(len(y), self.base)
        for _ in range(self.rounds):
            residual = (y - pred)[groups] / per_row
            tree = _Tree(self.depth, self.min_leaf).fit(x, residual, per_row)
            step = np.bincount(groups, tree.predict(x), minlength=len(y))
            if not np.any(step):
                break
            self.trees.append(tree)
            pred += self.lr * step
        return self

    def predict(self, x, groups=None) -> np.ndarray:
        """One score per candidate: per row, summed by ``groups`` when given."""
        x = np.asarray(x, float)
        out = np.zeros(len(x))
        for tree in self.trees:
            out += self.lr * tree.predict(x)
        if groups is None:
            return out + self.base
        groups = np.asarray(groups, int)
        return np.bincount(groups, out, minlength=groups.max() + 1 if len(groups) else 0) \
            + self.base


class RandomModel:
    """Random scores: the baseline a learned model must beat (and TVM's choice below 100
    measured samples)."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def fit(self, x, y, groups=None) -> RandomModel:
        return self

    def predict(self, x, groups=None) -> np.ndarray:
        count = len(x) if groups is None else (int(np.max(groups)) + 1 if len(groups) else 0)
        return self.rng.random(count)


def make_cost_model(name, seed: int = 0):
    """``"xgb"`` / ``"gbt"``: GBTModel (TVM's default name maps here), ``"random"``, or an
    object with fit/predict."""
    if not isinstance(name, str):
        return name
    table = {"xgb": GBTModel, "gbt": GBTModel, "random": lambda: RandomModel(seed)}
    if name not in table:
        raise ValidationError(f"unknown cost model {name!r}", key="cost_model",
                              hint="use 'xgb' (gradient-boosted trees), 'random', or an "
                                   "object with fit(x, y) and predict(x)")
    return table[name]()
