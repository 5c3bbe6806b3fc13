"""Cost models that rank unmeasured candidates: gradient-boosted trees in numpy.

No tree library is installed here (xgboost, lightgbm and scikit-learn are absent), and the
data is small (hundreds to a few thousand measured candidates, 146 features per store), so
every feature's splits are tried at every node, on at most 64 bins per feature (XGBoost's
"hist" method; exact for the many features with fewer distinct values).

The model scores candidates; higher means faster. What it learns from is each workload's
candidates ranked against each other: the target of a candidate is its workload's best time
over its own (TVM's XGBModel target ``min_cost / cost``, 1 for the best, 0 for a failure), and
the default objective is pairwise: every pair of candidates *of the same workload* whose
targets differ is a logistic loss on the difference of their scores, weighted by how far
apart the targets are (a pair among the fast candidates counts more than one among the slow
ones, which all sit near 0). Scores of different workloads are never compared, so the trees
need not learn how fast one workload is against another, only what makes a schedule faster
than its siblings, which is what carries over to a workload never measured. ``objective=
"regression"`` fits the targets by squared error instead (msc's model before the pairwise
one)::

    model = GBTModel()
    model.fit(features, scores, groups, workloads)   # rows (n, f); per candidate: (c,), (c,)
    model.predict(pool_features, pool_groups)        # (m,) one score per candidate
"""

from __future__ import annotations

import numpy as np

from ..errors import ValidationError

__all__ = ["GBTModel", "RandomModel", "make_cost_model", "pairwise_rank", "squared_error"]

_PAIR_BLOCK = 512   # rows of the pair matrix computed at once (memory: block x group size)


_BINS = 64         # split candidates per feature: its distinct values, or 64 quantiles


class _Tree:
    """A regression tree of fixed depth: nodes are (feature, threshold, left, right) or a
    leaf value, the Newton step ``sum(w * r) / (sum(w) + reg)`` of its rows."""

    def __init__(self, depth: int, min_leaf: int, reg: float = 0.0):
        self.depth, self.min_leaf, self.reg = depth, min_leaf, reg
        self.root = None

    def fit(self, x: np.ndarray, r: np.ndarray, w: np.ndarray, bins: _Bins) -> _Tree:
        self.root = self._grow(x, w * r, w, bins, np.arange(len(r)), self.depth)
        return self

    def _grow(self, x, wr, w, bins, rows, depth):
        leaf = float(wr[rows].sum() / (w[rows].sum() + self.reg))
        if depth == 0 or len(rows) < 2 * self.min_leaf:
            return leaf
        split = bins.best_split(wr, w, rows, self.min_leaf, self.reg)
        if split is None:
            return leaf
        f, t = split
        left = x[rows, f] <= t
        return (f, t, self._grow(x, wr, w, bins, rows[left], depth - 1),
                self._grow(x, wr, w, bins, rows[~left], depth - 1))

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


class _Bins:
    """Each feature's split thresholds, and each row's bin per feature, computed once per
    fit, so a node sums its rows per bin (one ``bincount``) instead of sorting them: the
    thresholds are the midpoints between a feature's distinct values (exact greedy splits,
    as the slog features mostly have few), or between 64 quantiles when there are more."""

    def __init__(self, x: np.ndarray):
        cuts = [_cuts(x[:, f]) for f in range(x.shape[1])]
        self.features = [f for f, c in enumerate(cuts) if len(c)]  # constant ones never split
        self.cuts = [cuts[f] for f in self.features]
        self.code = np.stack([np.searchsorted(c, x[:, f]) for f, c in
                              zip(self.features, self.cuts)], 1) \
            + np.arange(len(self.cuts)) * _BINS if self.cuts else np.zeros((len(x), 0), int)
        self.thresholds = np.full((len(self.cuts), _BINS), np.inf)
        for f, c in enumerate(self.cuts):
            self.thresholds[f, :len(c)] = c

    def best_split(self, wr, w, rows, min_leaf: int, reg: float):
        """(feature, threshold) of the largest gain ``WR_l^2 / (W_l + reg) + WR_r^2 / (W_r +
        reg) - WR^2 / (W + reg)`` over all features, or None."""
        f = len(self.cuts)
        if not f:
            return None
        codes = self.code[rows].ravel()
        size = f * _BINS

        def per_bin(values):
            return np.bincount(codes, np.repeat(values, f), size).reshape(f, _BINS).cumsum(1)

        cwr, cw = per_bin(wr[rows]), per_bin(w[rows])
        count = np.bincount(codes, minlength=size).reshape(f, _BINS).cumsum(1)
        total, weight, m = cwr[0, -1], cw[0, -1], len(rows)
        valid = (count >= min_leaf) & (m - count >= min_leaf) & np.isfinite(self.thresholds)
        if not valid.any():
            return None
        with np.errstate(divide="ignore", invalid="ignore"):  # empty sides: not valid
            gain = cwr ** 2 / (cw + reg) + (total - cwr) ** 2 / (weight - cw + reg) \
                - total ** 2 / (weight + reg)
        gain = np.where(valid & np.isfinite(gain), gain, -np.inf)
        feat, b = np.unravel_index(int(np.argmax(gain)), gain.shape)
        if not gain[feat, b] > 1e-12:
            return None
        return self.features[feat], float(self.thresholds[feat, b])


def _cuts(column: np.ndarray) -> np.ndarray:
    """Split thresholds of one feature: at most ``_BINS - 1`` increasing values."""
    values = np.unique(column)
    if len(values) > _BINS:
        values = np.unique(np.quantile(column, np.linspace(0, 1, _BINS)))
    return (values[1:] + values[:-1]) / 2


def squared_error(pred: np.ndarray, y: np.ndarray, workloads: np.ndarray) -> tuple:
    """(gradient, hessian) per candidate of ``(pred - y)^2 / 2``."""
    return pred - y, np.ones_like(y)


def pairwise_rank(pred: np.ndarray, y: np.ndarray, workloads: np.ndarray) -> tuple:
    """(gradient, hessian) per candidate of the pairwise logistic loss: for each pair (i, j)
    of one workload with ``y[i] > y[j]``, ``|y[i] - y[j]| * log(1 + exp(pred[j] - pred[i]))``,
    divided by the workload's candidate count so a long-tuned workload does not drown the
    others."""
    g, h = np.zeros_like(pred), np.zeros_like(pred)
    for wl in np.unique(workloads):
        members = np.nonzero(workloads == wl)[0]
        s, t = pred[members], y[members]
        for lo in range(0, len(members), _PAIR_BLOCK):
            rows = slice(lo, lo + _PAIR_BLOCK)
            weight = t[rows, None] - t[None, :]                 # > 0: row i is the better
            sign = np.sign(weight)
            wrong = 1 / (1 + np.exp(np.clip(sign * (s[rows, None] - s[None, :]), -50, 50)))
            g[members[rows]] -= (np.abs(weight) * sign * wrong).sum(1) / len(members)
            h[members[rows]] += (np.abs(weight) * wrong * (1 - wrong)).sum(1) / len(members)
    return g, h


OBJECTIVES = {"rank": pairwise_rank, "regression": squared_error}


class GBTModel:
    """Gradient-boosted trees: ``rounds`` trees of ``depth``, each a Newton step of the
    objective (``"rank"``: ``pairwise_rank``; ``"regression"``: ``squared_error``), added
    with step ``learning_rate``.

    With ``groups`` (the candidate index of each row) a candidate is several rows, one per
    store (``features.per_store_features``), and its score is the sum of its rows' (TVM's
    XGBModel "pack-sum"). A row carries its candidate's gradient over the candidate's row
    count, weighted by that count, so a leaf moves a candidate of k rows by one step, not k.
    ``workloads`` (one id per candidate) limits the pairs of the rank objective to
    candidates of one workload; without it all candidates are one workload."""

    def __init__(self, rounds: int = 40, depth: int = 3, learning_rate: float = 0.3,
                 min_leaf: int = 2, objective: str = "rank", reg: float = 1.0):
        if objective not in OBJECTIVES:
            raise ValidationError(f"unknown objective {objective!r}", key="objective",
                                  hint=f"use one of {sorted(OBJECTIVES)}")
        self.rounds, self.depth, self.lr, self.min_leaf = rounds, depth, learning_rate, min_leaf
        self.objective, self.reg = objective, reg
        self.base, self.trees = 0.0, []

    def fit(self, x, y, groups=None, workloads=None) -> GBTModel:
        x, y = np.asarray(x, float), np.asarray(y, float)
        groups = np.arange(len(x)) if groups is None else np.asarray(groups, int)
        workloads = np.zeros(len(y), int) if workloads is None else np.asarray(workloads)
        per_row = np.bincount(groups, minlength=len(y)).astype(float)[groups]
        gradient = OBJECTIVES[self.objective]
        self.base = float(y.mean()) if self.objective == "regression" else 0.0
        self.trees, pred = [], np.full(len(y), self.base)
        bins = _Bins(x)
        for _ in range(self.rounds):
            g, h = gradient(pred, y, workloads)
            scale = h.mean() if h.mean() > 0 else 1.0   # reg counts in candidates of weight 1
            g, h = (g / scale)[groups], (h / scale)[groups] + 1e-12
            tree = _Tree(self.depth, self.min_leaf, self.reg).fit(
                x, -g / (h * per_row), h * per_row, bins)
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

    def fit(self, x, y, groups=None, workloads=None) -> RandomModel:
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
