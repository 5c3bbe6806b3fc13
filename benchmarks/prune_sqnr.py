"""How much of the function pruning keeps: output SQNR at equal parameters, msc's importance
criteria (with and without least-squares compensation) beside Torch-Pruning's.

    .venv/bin/python benchmarks/prune_sqnr.py                      # every corpus model
    .venv/bin/python benchmarks/prune_sqnr.py --models resnet,bert --json out/sqnr.json

Per corpus model (tests/helpers/corpus.py, random weights):

- *Calibration*: the corpus example input plus 7 random draws of the same shapes (float
  inputs N(0, 1); integer inputs uniform over the example's value range, a constant input
  such as an all-ones mask kept); *held out*: 4 other draws (another seed). Every SQNR is the
  pruned model's output against the unpruned torch model's on the held-out draws, in dB.
- *Torch-Pruning* (benchmarks/prunability.py's recipe, ``BasePruner``, ``pruning_ratio`` 0.5)
  with ``GroupMagnitudeImportance(p=2)`` (TP L2) and ``GroupTaylorImportance`` (TP Taylor:
  after a backward of ``0.5 ||y||^2`` of the float outputs over the calibration items, msc's
  Taylor loss).
- *msc*: ``from_torch`` -> ``prune`` at the density that keeps *at most* Torch-Pruning's
  (L2) fraction of the parameters (bisection; 0.5 when Torch-Pruning did not run), ``stride``
  1, with each importance (``l2``, ``taylor``, ``fisher``, ``wanda``) without and with
  ``compensate`` (its ridge chosen by 2-fold validation on the calibration items), run
  through ``to_torch``.

The family rows average the dB (the geometric mean of the SQNR power ratios) over the models
where Torch-Pruning ran and pruned, and say whether msc's best column is at least
Torch-Pruning's best. ``--tables out.json`` prints the tables again from a ``--json`` file.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

from benchmarks.common import print_table, sqnr
from benchmarks.prunability import TP_SECONDS, _first_line, _patch_heads, tp_settings
from msc.codegen import to_torch
from msc.compression.prune import prune
from msc.frontends import translate
from msc.progress import progress
from tests.helpers.corpus import FAMILIES, MODELS, _no_grad, leaves
from tests.helpers.fuzz import time_guard

CRITERIA = ("l2", "taylor", "fisher", "wanda")
MSC_COLUMNS = [f"{c}{'+c' if comp else ''}" for c in CRITERIA for comp in (False, True)]
TP_COLUMNS = ["TP L2", "TP Taylor"]


def draws(inputs: list, count: int, seed: int) -> list[list[np.ndarray]]:
    """``count`` random items shaped as ``inputs`` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    items = []
    for _ in range(count):
        item = []
        for x in inputs:
            if np.issubdtype(x.dtype, np.floating):
                item.append(rng.standard_normal(x.shape).astype(x.dtype))
            elif np.unique(x).size == 1:
                item.append(x.copy())
            else:
                item.append(rng.integers(x.min(), x.max() + 1, size=x.shape).astype(x.dtype))
        items.append(item)
    return items


def data(name: str) -> tuple[list, list]:
    """(calibration items, held-out items) of one corpus model."""
    _model, _info, inputs = MODELS[name]()
    return [list(inputs), *draws(inputs, 7, seed=1)], draws(inputs, 4, seed=2)


def outputs(module, items: list) -> list[np.ndarray]:
    return [o for item in items for o in leaves(_no_grad(module, item))]


# --------------------------------------------------------------------------------------------
# Torch-Pruning

def _taylor_backward(model, calib: list) -> None:
    import torch

    model.zero_grad()
    for item in calib:
        out = model(*[torch.from_numpy(x) for x in item])
        ys = [y for y in leaves_torch(out) if y.is_floating_point()]
        sum(0.5 * (y ** 2).sum() for y in ys).backward()


def leaves_torch(out) -> list:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict) or hasattr(out, "values"):
        return [t for v in out.values() for t in leaves_torch(v)]
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in leaves_torch(v)]
    return []


def run_tp(name: str, importance: str, calib: list, held: list) -> dict:
    """``{"params", "sqnr", "message"}`` of Torch-Pruning at ratio 0.5."""
    import torch
    import torch_pruning as tp

    model, _info, inputs = MODELS[name]()
    reference = outputs(model, held)
    x = torch.from_numpy(inputs[0])
    try:
        with time_guard(TP_SECONDS, TimeoutError(f"no result after {TP_SECONDS} s")):
            params0 = sum(p.numel() for p in model.parameters())
            imp = tp.importance.GroupMagnitudeImportance(p=2) if importance == "l2" else \
                tp.importance.GroupTaylorImportance()
            pruner = tp.pruner.BasePruner(model, x, importance=imp, pruning_ratio=0.5,
                                          **tp_settings(model, x))
            if importance == "taylor":
                _taylor_backward(model, calib)
            pruner.step()
        _patch_heads(model)
        got = outputs(model, held)
    except Exception as err:  # noqa: BLE001  (the reference's failure is a cell)
        return {"params": math.nan, "sqnr": math.nan,
                "message": f"{type(err).__name__}: {_first_line(err)}"}
    if [g.shape for g in got] != [r.shape for r in reference]:
        return {"params": math.nan, "sqnr": math.nan, "message": "output shape changed"}
    params = sum(p.numel() for p in model.parameters()) / params0
    return {"params": params, "sqnr": sqnr(reference, got), "message": ""}


# --------------------------------------------------------------------------------------------
# msc

def _params(graph, weights, density: float) -> float:
    _, _, report = prune(graph, weights, {"density": density, "stride": 1, "latency": False})
    return report["total"]["params"][2]


def matched_density(graph, weights, target: float | None) -> float:
    """The largest density (to 1/256) whose kept parameter fraction is at most ``target``
    (0.5 without one)."""
    if target is None or not math.isfinite(target):
        return 0.5
    lo, hi = 0.0, 1.0
    for _ in range(8):
        mid = (lo + hi) / 2
        if _params(graph, weights, mid) <= target + 1e-9:
            lo = mid
        else:
            hi = mid
    return max(lo, 1 / 256)


def run_msc(name: str, density: float, calib: list, held: list, graph, weights) -> dict:
    model, _info, _inputs = MODELS[name]()
    reference = outputs(model, held)
    row = {"density": density, "message": ""}
    for column, (criterion, comp) in zip(MSC_COLUMNS, [(c, k) for c in CRITERIA
                                                       for k in (False, True)]):
        config = {"density": density, "stride": 1, "importance": criterion,
                  "compensate": comp, "latency": False}
        try:
            small, small_w, report = prune(graph, weights, config, calib_data=calib)
            with tempfile.TemporaryDirectory(prefix=f"prune_sqnr_{name}_") as folder:
                module = to_torch(small, small_w, {"need_test": False}, build_folder=folder)
            row[column] = sqnr(reference, outputs(module, held))
            row["params"] = report["total"]["params"][2]
        except Exception as err:  # noqa: BLE001  (a failure is a cell, named below)
            row[column] = math.nan
            row["message"] += f"{column}: {type(err).__name__}: {_first_line(err)}; "
    return row


# --------------------------------------------------------------------------------------------
# the table

def _db(value) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.1f}"


COLUMNS = ["model", "family", "TP params", "msc params", *TP_COLUMNS, *MSC_COLUMNS]


def cells(name: str, row: dict) -> list[str]:
    m, t = row["msc"], row["tp"]
    return [name, FAMILIES[name], _db(t["l2"]["params"] * 100) + "%",
            _db(m.get("params", math.nan) * 100) + "%", _db(t["l2"]["sqnr"]),
            _db(t["taylor"]["sqnr"]), *[_db(m.get(c)) for c in MSC_COLUMNS]]


def compared(row: dict) -> bool:
    """Both Torch-Pruning importances ran and pruned something (GPT-2's Conv1D layers it
    leaves whole: 100% kept is no point of comparison)."""
    return all(math.isfinite(row["tp"][k]["sqnr"]) and row["tp"][k]["params"] < 0.999
               for k in ("l2", "taylor"))


def family_rows(rows: dict) -> list[list[str]]:
    """Per family, the mean dB of each column over the ``compared`` models; the last cell
    compares msc's best column with Torch-Pruning's best."""
    out = []
    for family in dict.fromkeys(FAMILIES[n] for n in rows):
        names = [n for n in rows if FAMILIES[n] == family and compared(rows[n])]
        if not names:
            continue
        tp = [float(np.mean([rows[n]["tp"][k]["sqnr"] for n in names]))
              for k in ("l2", "taylor")]
        msc = [float(np.mean([rows[n]["msc"].get(c, math.nan) for n in names]))
               for c in MSC_COLUMNS]
        out.append([f"**{family} mean ({len(names)})**", family, "", "", *map(_db, tp),
                    *map(_db, msc)])
        best, verdict = max(msc), "ahead" if max(msc) >= max(tp) else "behind"
        out.append([f"{family}: msc best {best:.1f} dB vs TP best {max(tp):.1f} dB",
                    family, "", "", "", "", f"{verdict} {best - max(tp):+.1f} dB",
                    *[""] * (len(MSC_COLUMNS) - 1)])
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated corpus names (default: all)")
    parser.add_argument("--json", help="write the rows as JSON here")
    parser.add_argument("--tables", help="print the tables of an earlier --json file")
    args = parser.parse_args(argv)
    if args.tables:
        rows = json.loads(Path(args.tables).read_text())
        print_table(COLUMNS, [cells(n, r) for n, r in rows.items()])
        print()
        print_table(COLUMNS, family_rows(rows))
        return 0
    names = args.models.split(",") if args.models else list(MODELS)
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        parser.error(f"unknown models {unknown}; see benchmarks/corpus.py --list")
    warnings.simplefilter("ignore")
    import torch

    torch.set_num_threads(1)  # small models: more threads only contend on a shared machine
    rows = {}

    def measured():
        for name in progress(names, desc="prune sqnr"):
            calib, held = data(name)
            tp = {k: run_tp(name, k, calib, held) for k in ("l2", "taylor")}
            model, info, _ = MODELS[name]()
            graph, weights = translate.from_torch(model, info)
            density = matched_density(graph, weights, tp["l2"]["params"])
            rows[name] = {"tp": tp, "msc": run_msc(name, density, calib, held, graph, weights)}
            yield cells(name, rows[name])

    print_table(COLUMNS, measured(), flush=True)
    print()
    print_table(COLUMNS, family_rows(rows))
    for name, row in rows.items():
        for who, message in [("msc", row["msc"]["message"]),
                             *[(f"TP {k}", r["message"]) for k, r in row["tp"].items()]]:
            if message:
                print(f"- {name} / {who}: {message}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
