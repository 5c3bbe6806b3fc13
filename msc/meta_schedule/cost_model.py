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
    leaf value."""

    def __init__(self, depth: int, min_leaf: int):
        self.depth, self.min_leaf = depth, min_leaf
        self.root = None

    def fit(self, x: np.ndarray, r: np.ndarray) -> _Tree:
        self.root = self._grow(x, r, self.depth)
        return self

    def _grow(self, x, r, depth):
        if depth == 0 or len(r) < 2 * self.min_leaf:
            return float(r.mean())
        split = _best_split(x, r, self.min_leaf)
        if split is None:
            return float(r.mean())
        f, t = split
        left = x[:, f] <= t
        return (f, t, self._grow(x[left], r[left], depth - 1),
                self._grow(x[~left], r[~left], depth - 1))

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.array([self._one(row, self.root) for row in x])

    @staticmethod
    def _one(row, node):
        while isinstance(node, tuple):
            f, t, left, right = node
            node = left if row[f] <= t else right
        return node


def _best_split(x: np.ndarray, r: np.ndarray, min_leaf: int):
    """(feature, threshold) minimizing the squared error of the two sides, or None."""
    best, best_gain = None, 1e-12
    total, n = r.sum(), len(r)
    base = total * total / n
    for f in range(x.shape[1]):
        order = np.argsort(x[:, f], kind="stable")
        xs, rs = x[order, f], r[order]
        csum = np.cumsum(rs)[:-1]
        k = np.arange(1, n)
        valid = (xs[1:] != xs[:-1]) & (k >= min_leaf) & (n - k >= min_leaf)
        if not valid.any():
            continue
        gain = csum ** 2 / k + (total - csum) ** 2 / (n - k) - base
        gain = np.where(valid, gain, -np.inf)
        i = int(np.argmax(gain))
        if gain[i] > best_gain:
            best, best_gain = (f, float((xs[i] + xs[i + 1]) / 2)), gain[i]
    return best


class GBTModel:
    """Gradient-boosted trees for squared error: ``rounds`` trees of ``depth``, each fit to
    the residual and added with step ``learning_rate``."""

    def __init__(self, rounds: int = 40, depth: int = 3, learning_rate: float = 0.3,
                 min_leaf: int = 2):
        self.rounds, self.depth, self.lr, self.min_leaf = rounds, depth, learning_rate, min_leaf
        self.base, self.trees = 0.0, []

    def fit(self, x, y) -> GBTModel:
        x, y = np.asarray(x, float), np.asarray(y, float)
        self.base, self.trees = float(y.mean()), []
        pred = np.full(len(y), self.base)
        for _ in range(self.rounds):
            tree = _Tree(self.depth, self.min_leaf).fit(x, y - pred)
            step = tree.predict(x)
            if not np.any(step):
                break
            self.trees.append(tree)
            pred += self.lr * step
        return self

    def predict(self, x) -> np.ndarray:
        x = np.asarray(x, float)
        out = np.full(len(x), self.base)
        for tree in self.trees:
            out += self.lr * tree.predict(x)
        return out


class RandomModel:
    """Random scores: the baseline a learned model must beat (and TVM's choice below 100
    measured samples)."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def fit(self, x, y) -> RandomModel:
        return self

    def predict(self, x) -> np.ndarray:
        return self.rng.random(len(x))


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
