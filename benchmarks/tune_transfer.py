"""Does the cost model carry across workloads? Leave-one-workload-out on recorded data.

    .venv/bin/python benchmarks/tune_transfer.py DIR [DIR ...] [--min-candidates 16]

Each DIR is searched for work dirs (``cost_model_features.npz``: per-store features and
times of measured candidates, as ``tune_tir`` keeps them); ``tests/meta_schedule/data``'s
recorded matmul is added. For every workload with enough measured candidates, a model is
fit on all the *other* workloads and ranks this one's candidates; the table gives the
Spearman rank correlation with the measured times, and how close the model's top 5 come to
the best candidate (best time / best time among the 5 predicted fastest: 1.00 = it found the
best), for each model configuration side by side:

- ``regression``: squared error on the normalized targets (msc's model before #31 goal 4);
- ``rank``: the pairwise objective within each workload (``GBTModel``'s default).

Use work dirs of random searches: their candidates are unbiased samples of each space.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

DATA = Path(__file__).resolve().parents[1] / "tests" / "meta_schedule" / "data"
MODELS = {"regression": {"objective": "regression", "reg": 0.0}, "rank": {"objective": "rank"}}


def recorded_matmul():
    """The test data's 64x96x128 matmul candidates as a TrainingSet."""
    import json

    from msc.meta_schedule import search
    from msc.meta_schedule.features import per_store_features
    from msc.meta_schedule.training import TrainingSet
    from msc.tir.parser import parse_tir_text

    data = json.loads((DATA / "matmul_64x96x128_measured.json").read_text())
    func = parse_tir_text(data["func"])["main"]
    out = TrainingSet(None)
    for d, secs in data["records"]:
        rows = per_store_features(search.apply_candidate(func, d).mod["main"])
        out.add("matmul_64x96x128|1", rows, secs, f"test|{d}")
    return out


def load_all(dirs: list):
    from msc.meta_schedule.training import FILE, TrainingSet

    data = recorded_matmul()
    for root in dirs:
        for path in sorted(Path(root).rglob(FILE)):
            data.extend(TrainingSet(str(path.parent)))
    return data


def known_names() -> dict:
    """workload key -> name, for the workloads of benchmarks/search_workloads.py."""
    from search_workloads import BUILDERS, load_workloads

    from msc.meta_schedule.database import workload_key

    names = list(BUILDERS) + ["matmul512", "conv3x3"]
    return {workload_key(f): n for n, f in load_workloads(names)}


def spearman(a, b) -> float:
    ra, rb = (np.argsort(np.argsort(v)) for v in (a, b))
    return float(np.corrcoef(ra, rb)[0, 1])


def subset(data, keep: list):
    from msc.meta_schedule.training import TrainingSet

    out = TrainingSet(None)
    for k in keep:
        out.add(data.workloads[k], data.rows[k], data.secs[k], str(k))
    return out


def held_out(data, workload: str, config: dict) -> tuple:
    """(rank correlation, best / best of the predicted top 5) on ``workload``'s valid
    candidates of a model fit on the other workloads."""
    from msc.meta_schedule import GBTModel

    train = subset(data, [k for k, w in enumerate(data.workloads) if w != workload])
    test = [k for k, w in enumerate(data.workloads) if w == workload and data.secs[k] < 1e9]
    model = train.fit(GBTModel(**config))
    x = np.concatenate([data.rows[k] for k in test])
    groups = np.concatenate([np.full(len(data.rows[k]), i) for i, k in enumerate(test)])
    pred = model.predict(x, groups)
    secs = np.array([data.secs[k] for k in test])
    top = np.argsort(-pred, kind="stable")[:5]
    return spearman(pred, -secs), float(secs.min() / secs[top].min())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+")
    parser.add_argument("--min-candidates", type=int, default=16)
    args = parser.parse_args()
    data = load_all(args.dirs)
    counts = {w: sum(1 for v, s in zip(data.workloads, data.secs) if v == w and s < 1e9)
              for w in dict.fromkeys(data.workloads)}
    names = [w for w, c in counts.items() if c >= args.min_candidates]
    label = known_names()
    head = ["held-out workload", "candidates"] + [f"{m} {k}" for m in MODELS
                                                  for k in ("rank corr", "top-5")]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    results = {m: [] for m in MODELS}
    for w in names:
        cells = []
        for m, config in MODELS.items():
            corr, top = held_out(data, w, config)
            results[m].append(corr)
            cells += [f"{corr:.2f}", f"{top:.2f}"]
        key, threads = w.rsplit("|", 1) if "|" in w else (w, "?")
        print(f"| {label.get(key, key[:16])} ({threads}T) | {counts[w]} | " + " | ".join(cells)
              + " |",
              flush=True)
    for m, corrs in results.items():
        print(f"# {m}: mean rank corr {np.mean(corrs):.3f} over {len(corrs)} workloads")


if __name__ == "__main__":
    main()
