"""What lets the cost model carry across workloads: targets normalized per workload, a
pairwise objective that ranks each workload's candidates among themselves, and the kept
training file read only when it checks out."""

import logging

import numpy as np
import pytest

from msc import meta_schedule as ms
from msc.meta_schedule.cost_model import pairwise_rank
from msc.meta_schedule.database import FAILED
from msc.meta_schedule.features import FEATURE_NAMES
from msc.meta_schedule.training import FILE, TrainingSet

F = len(FEATURE_NAMES)


def spearman(a, b) -> float:
    ra, rb = (np.argsort(np.argsort(v)) for v in (a, b))
    return float(np.corrcoef(ra, rb)[0, 1])


def test_targets_are_each_workloads_best_time_over_the_candidates():
    data = TrainingSet(None)
    for k, (workload, secs) in enumerate([("a", 1.0), ("a", 2.0), ("b", 40.0), ("a", 4.0),
                                          ("b", 10.0), ("a", FAILED)]):
        data.add(workload, np.full((k % 2 + 1, F), float(k)), secs, f"{workload}|{k}")
    x, y, groups = data.arrays()
    np.testing.assert_allclose(y, [1.0, 0.5, 0.25, 0.25, 1.0, 0.0])
    assert list(data.workload_ids()) == [0, 0, 1, 0, 1, 0]
    assert list(groups) == [0, 1, 1, 2, 3, 3, 4, 5, 5] and x.shape == (9, F)


def _pair_loss(s, y, workloads):
    """The pairwise objective written out pair by pair."""
    total = 0.0
    for w in set(workloads):
        idx = [i for i in range(len(s)) if workloads[i] == w]
        for i in idx:
            for j in idx:
                if y[i] > y[j]:
                    total += (y[i] - y[j]) * np.log1p(np.exp(s[j] - s[i])) / len(idx)
    return total


def test_the_pairwise_gradient_and_hessian_are_the_losss_derivatives():
    rng = np.random.default_rng(1)
    s, y = rng.standard_normal(9), rng.random(9)
    workloads = np.array([0, 0, 1, 0, 1, 1, 0, 2, 2])
    g, h = pairwise_rank(s, y, workloads)
    eps = 1e-5
    for i in range(len(s)):
        step = np.eye(len(s))[i] * eps
        numeric = (_pair_loss(s + step, y, workloads) - _pair_loss(s - step, y, workloads))
        assert g[i] == pytest.approx(numeric / (2 * eps), rel=1e-4, abs=1e-8)
        second = (pairwise_rank(s + step, y, workloads)[0][i]
                  - pairwise_rank(s - step, y, workloads)[0][i]) / (2 * eps)
        assert h[i] == pytest.approx(second, rel=1e-4, abs=1e-8)
    # pairs never cross workloads: each workload's gradients sum to zero
    for w in range(3):
        assert g[workloads == w].sum() == pytest.approx(0.0, abs=1e-12)


def _workload(rng, n, size, scale):
    """Candidates of two stores each (an init store whose features do not matter, and the
    update): time grows with feature 0 and doubles when feature 1 > 0.5, whatever the
    workload; feature 2 is the workload's size, ``scale`` its speed."""
    update = rng.random((n, F))
    update[:, 2] = size
    init = np.zeros((n, F))
    init[:, 3] = rng.random(n)
    secs = scale * np.exp(1.5 * update[:, 0]) * (1 + (update[:, 1] > 0.5)) \
        * rng.lognormal(0, 0.05, n)
    return [np.stack([init[k], update[k]]) for k in range(n)], secs


def _trained_on(sets, objective):
    data = TrainingSet(None)
    for w, (rows, secs) in enumerate(sets):
        for k in range(len(secs)):
            data.add(f"w{w}", rows[k], secs[k], f"w{w}|{k}")
    return data.fit(ms.GBTModel(objective=objective))


@pytest.mark.parametrize("objective", ["rank", "regression"])
def test_a_model_trained_on_workload_a_ranks_workload_bs_candidates(objective):
    """B is 16x larger and 10x slower than A, its speed depends on the same features: the
    model fit on A alone ranks B's candidates with a Spearman correlation above 0.8
    (random scores: about 0)."""
    rng = np.random.default_rng(0)
    a = _workload(rng, 120, size=8.0, scale=1e-3)
    rows_b, secs_b = _workload(rng, 60, size=12.0, scale=1e-2)
    model = _trained_on([a], objective)
    x = np.concatenate(rows_b)
    groups = np.repeat(np.arange(len(secs_b)), 2)
    assert spearman(model.predict(x, groups), -secs_b) > 0.8
    assert abs(spearman(ms.RandomModel(0).predict(x, groups), -secs_b)) < 0.3


def test_the_rank_objective_does_not_learn_how_fast_workloads_are_against_each_other():
    """Two training workloads whose normalized targets sit at different levels (A's
    candidates all within 10% of its best, C's spread tenfold) and a feature naming the
    workload: squared error spends trees telling A from C, the rank objective only ranks
    within each. Both rank B (a third size) well; the rank model's scores of A's candidates
    do not sit above C's as the regression's do."""
    rng = np.random.default_rng(2)
    a_rows, a_secs = _workload(rng, 80, size=8.0, scale=1e-3)
    a_secs = 1e-3 * (1 + 0.1 * (a_secs - a_secs.min()) / np.ptp(a_secs))
    c = _workload(rng, 80, size=10.0, scale=1e-3)
    rows_b, secs_b = _workload(rng, 60, size=12.0, scale=1e-2)
    x_b, groups_b = np.concatenate(rows_b), np.repeat(np.arange(60), 2)
    gaps = {}
    for objective in ("rank", "regression"):
        model = _trained_on([(a_rows, a_secs), c], objective)
        assert spearman(model.predict(x_b, groups_b), -secs_b) > 0.7, objective
        score = {w: model.predict(np.concatenate(r), np.repeat(np.arange(80), 2)).mean()
                 for w, r in (("a", a_rows), ("c", c[0]))}
        gaps[objective] = score["a"] - score["c"]
    assert gaps["regression"] > 0.3 and abs(gaps["rank"]) < gaps["regression"] / 2


def _saved(tmp_path, **change):
    data = TrainingSet(str(tmp_path))
    for k in range(3):
        data.add("w", np.full((2, F), float(k)), 1e-3 * (k + 1), f"w|{k}")
    data.save()
    if change:
        with np.load(tmp_path / FILE, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
        arrays.update(change)
        np.savez(tmp_path / FILE, **arrays)
    return TrainingSet(str(tmp_path))


def test_the_training_file_is_read_back(tmp_path):
    kept = _saved(tmp_path)
    assert len(kept) == 3 and kept.secs == [1e-3, 2e-3, 3e-3]
    np.testing.assert_array_equal(kept.rows[2], np.full((2, F), 2.0))


@pytest.mark.parametrize("change, why", [
    ({"x": np.zeros((6, F - 1))}, "features of shape"),
    ({"names": np.array(["a", "b"])}, "another feature layout"),
    ({"x": np.full((6, F), np.nan)}, "not finite"),
    ({"secs": np.array([1e-3, -1.0, 1e-3])}, "not positive"),
    ({"groups": np.array([0, 0, 1, 1, 2, 7])}, "not there"),
    ({"tags": np.array(["w|0"])}, "different lengths"),
    ({"x": np.array([{"a": 1}] * 6, dtype=object)}, "pickled"),
])
def test_a_training_file_that_does_not_check_out_is_ignored_with_a_warning(
        tmp_path, caplog, change, why):
    with caplog.at_level(logging.WARNING, logger="msc.meta_schedule"):
        kept = _saved(tmp_path, **change)
    assert len(kept) == 0
    assert "not used" in caplog.text and "starts afresh" in caplog.text
    assert why in caplog.text or why == "pickled"


def test_a_damaged_training_file_is_ignored(tmp_path, caplog):
    (tmp_path / FILE).write_bytes(b"PK\x03\x04 not a zip")
    with caplog.at_level(logging.WARNING, logger="msc.meta_schedule"):
        assert len(TrainingSet(str(tmp_path))) == 0
    assert "not used" in caplog.text
