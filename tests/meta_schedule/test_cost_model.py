"""The cost model's inputs and what it learns: per-store features equal to hand-computed
values (TVM's per-store-feature definitions), the pack-sum GBT ranks held-out good schedules
above bad ones after training on recorded measurements, and the training set kept in
work_dir is what a new tune starts from."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from msc import meta_schedule as ms
from msc import tir
from msc.meta_schedule import search as search_mod
from msc.meta_schedule.features import FEATURE_NAMES, per_store_features
from msc.meta_schedule.training import TrainingSet
from msc.tir.parser import parse_tir_text

SCALE = '''
@T.prim_func
def main(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 16), "float32")):
    for i, j in T.grid(8, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2) + T.float32(1)
'''
DATA = Path(__file__).parent / "data" / "matmul_64x96x128_measured.json"


def slog(x):
    return math.log2(abs(x) + 1)


def test_the_features_of_a_small_prim_func_equal_hand_computed_values():
    sch = tir.Schedule(parse_tir_text(SCALE)["main"])
    i, j = sch.get_loops(sch.get_block("B"))
    sch.parallel(i)
    sch.vectorize(j)
    rows = per_store_features(sch.mod["main"])
    assert rows.shape == (1, len(FEATURE_NAMES))
    got = dict(zip(FEATURE_NAMES, rows[0]))
    # 128 iterations of one multiply and one add; A read and B written with unit stride
    # (8 cache lines of 64 bytes each: 512 bytes), no reuse (proxy count 0.5).
    expected = {
        "float_mul": slog(128), "float_add_sub": slog(128),
        "vectorized.num": slog(1), "vectorized.prod": slog(16), "vectorized.len": slog(16),
        "vectorized.pos_mixed": 1, "parallel.num": slog(1), "parallel.prod": slog(8),
        "parallel.len": slog(8), "parallel.pos_mixed": 1, "unrolled.pos_none": 1,
        "outer_prod": slog(128), "num_loops": slog(2),
    }
    for b, access in (("B0", "is_read"), ("B1", "is_write")):   # equal lines: by name
        expected.update({
            f"{b}.{access}": 1, f"{b}.bytes": slog(512), f"{b}.unique_bytes": slog(512),
            f"{b}.lines": slog(8), f"{b}.unique_lines": slog(8), f"{b}.reuse_no_reuse": 1,
            f"{b}.bytes_d_reuse_ct": slog(1024), f"{b}.unique_bytes_d_reuse_ct": slog(1024),
            f"{b}.lines_d_reuse_ct": slog(16), f"{b}.unique_lines_d_reuse_ct": slog(16),
            f"{b}.stride": slog(1)})
    for name, value in got.items():
        assert value == pytest.approx(expected.get(name, 0.0)), name


def test_reuse_and_allocation_features_of_a_matmul_with_a_cache():
    """C[i, j] += A[i, k] * B[k, j]: the innermost k loop does not move C (loop reuse, count
    48, distance 1 iteration); the cache_write buffer is an allocation of 32 x 64 floats."""
    text = (Path(__file__).parent / "test_tune.py").read_text().split("MM = '''")[1]
    func = parse_tir_text(text.split("'''")[0])["main"]
    sch = tir.Schedule(func)
    sch.cache_write(sch.get_block("C"), 0, "global")
    rows = per_store_features(sch.mod["main"])
    names = {n: k for k, n in enumerate(FEATURE_NAMES)}
    update = max(rows, key=lambda r: r[names["float_mul"]])
    written = next(b for b in range(5) if update[names[f"B{b}.is_read_write"]] == 1)
    assert update[names[f"B{written}.reuse_loop_multiple_read"]] == 1
    assert update[names[f"B{written}.reuse_ct"]] == pytest.approx(slog(48))
    assert update[names[f"B{written}.reuse_dis_iter"]] == pytest.approx(slog(1))
    assert update[names["alloc_size"]] == pytest.approx(slog(32 * 64 * 4))


def _recorded():
    data = json.loads(DATA.read_text())
    func = parse_tir_text(data["func"])["main"]
    rows = [per_store_features(search_mod.apply_candidate(func, d).mod["main"])
            for d, _ in data["records"]]
    return rows, np.array([s for _, s in data["records"]])


def _stack(rows, idx):
    return (np.concatenate([rows[i] for i in idx]),
            np.concatenate([np.full(len(rows[i]), k) for k, i in enumerate(idx)]))


def test_the_model_ranks_held_out_good_schedules_above_bad_ones():
    """60 candidates of a 64x96x128 matmul measured once on a loaded 2-core machine
    (tests/meta_schedule/data): trained on the 50 middle ones, the model scores the 5
    fastest above the 5 slowest in most pairs; random scores would in half."""
    rows, secs = _recorded()
    order = list(np.argsort(secs))
    good, bad = order[:5], order[-5:]
    train = [i for i in order if i not in good + bad]
    x, groups = _stack(rows, train)
    model = ms.GBTModel().fit(x, secs.min() / secs[train], groups)
    scores = model.predict(*_stack(rows, good + bad))
    pairs = [a > b for a in scores[:5] for b in scores[5:]]
    assert np.mean(pairs) >= 0.8
    assert scores[:5].mean() > scores[5:].mean()


def test_pack_sum_fits_candidates_of_several_rows():
    """A candidate's score is the sum of its rows' predictions: two rows whose features add
    to a known target are fit exactly enough to rank."""
    rng = np.random.default_rng(0)
    x = rng.random((200, 3))
    groups = np.repeat(np.arange(100), 2)
    y = np.bincount(groups, x[:, 0] * 2, minlength=100)
    model = ms.GBTModel(rounds=80).fit(x, y, groups)
    pred = model.predict(x, groups)
    assert np.corrcoef(np.argsort(np.argsort(pred)), np.argsort(np.argsort(y)))[0, 1] > 0.9


def test_the_training_set_is_kept_in_work_dir(tmp_path):
    mm = (Path(__file__).parent / "test_tune.py").read_text().split("MM = '''")[1]
    func = parse_tir_text(mm.split("'''")[0])["main"]
    ms.tune_tir(func, "llvm --num-cores=1", str(tmp_path), max_trials_global=3,
                num_trials_per_iter=3, min_repeat_ms=1.0, seed=0)
    kept = TrainingSet(str(tmp_path))
    assert len(kept) == 3 and kept.valid_count() == 3
    x, y, groups = kept.arrays()
    assert x.shape[1] == len(FEATURE_NAMES) and y.max() == 1.0 and groups.max() == 2
    (tmp_path / "cost_model_features.npz").write_bytes(b"not a zip")
    assert len(TrainingSet(str(tmp_path))) == 0   # a damaged file: set aside, not fatal
