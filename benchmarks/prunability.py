"""Prunability of the real corpus: msc and Torch-Pruning on the same torch modules, side by side.

    .venv/bin/python benchmarks/prunability.py                     # every corpus model
    .venv/bin/python benchmarks/prunability.py --models bert,llama --speed 10
    .venv/bin/python benchmarks/prunability.py --json out/prunability.json

Models are tests/helpers/corpus.py's (timm-style blocks and transformers' vision and text
models from small configs, random weights). Each is pruned at ``--density`` (kept channel
fraction; Torch-Pruning's ``pruning_ratio`` is 1 - density) with the same importance, group L2
magnitude (Torch-Pruning's ``GroupMagnitudeImportance(p=2)``), local to each group, no
rounding of the kept counts.

- msc: ``from_torch`` -> ``prune`` -> the pruned graph on every path (``to_relax`` +
  ``relax.build``, ``to_torch``, ``to_onnx`` in onnxruntime); see tests/helpers/prunability.py.
- Torch-Pruning: ``BasePruner`` (``MagnitudePruner`` is its deprecated alias) on the same
  module, with its transformer recipe: ``num_heads`` of every q/k/v projection (k/v with the
  KV head count for GQA), ``prune_num_heads=True, prune_head_dims=False`` (whole heads, as msc),
  the layer that makes the model's output ignored, and afterwards its documented manual step
  (the attention modules' head counts set from the pruned projections). The pruned module
  runs in torch eager.

Columns: pruned (fewer parameters), ran (msc: every path runs with the unpruned output shapes;
Torch-Pruning: the forward runs with the unpruned output shape), params and FLOPs kept
(msc: its report; Torch-Pruning: ``tp.utils.count_ops_and_params``, MACs), output SQNR of the
pruned model against the unpruned one (dB), and with ``--speed N`` msc's backend speedup
(unpruned / pruned, best of N interleaved). The last lines count the models each tool pruned
and ran, and name what msc reported as not prunable.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# As a script, this folder is sys.path[0]; benchmarks/transformers.py would shadow the
# transformers package: import from the repository root instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

from benchmarks.common import best_interleaved, print_table, single_calls, sqnr
from msc.progress import progress
from tests.helpers.corpus import FAMILIES, MODELS, _no_grad, leaves
from tests.helpers.fuzz import time_guard
from tests.helpers.prunability import prune_model

# q/k/v projection names in transformers' attention modules, and their head-count attrs
_QKV = (("query", "key", "value"), ("q_proj", "k_proj", "v_proj"), ("q", "k", "v"),
        ("q_lin", "k_lin", "v_lin"))
_HEADS = ("num_attention_heads", "num_heads", "n_heads", "n_head")
_HEAD_DIM = ("attention_head_size", "head_dim", "key_value_proj_dim", "d_head")
TP_SECONDS = 120  # Torch-Pruning's group search does not finish on GQA decoders
_NOT_RUN = {"pruned": False, "ran": False, "params": math.nan, "flops": math.nan,
            "sqnr": math.nan, "message": ""}


# --------------------------------------------------------------------------------------------
# Torch-Pruning with its transformer recipe

def _attention_modules(model) -> list[tuple]:
    """(module, q, k, v, head_dim) for every attention module with separate q/k/v linears."""
    from torch import nn

    found = []
    for module in model.modules():
        for names in _QKV:
            layers = [getattr(module, n, None) for n in names]
            if not all(isinstance(layer, nn.Linear) for layer in layers):
                continue
            head_dim = next((getattr(module, a) for a in _HEAD_DIM
                             if isinstance(getattr(module, a, None), int)), None)
            heads = next((getattr(module, a) for a in _HEADS
                          if isinstance(getattr(module, a, None), int)), None)
            if head_dim is None and heads:
                head_dim = layers[0].out_features // heads
            if head_dim:
                found.append((module, *layers, head_dim))
    return found


def _output_layer(model, x):
    """The last leaf module with parameters whose output has the model's output shape."""
    import torch

    last, hooks = [], []
    for module in model.modules():
        if not list(module.children()) and list(module.parameters(recurse=False)):
            hooks.append(module.register_forward_hook(
                lambda m, i, o: last.append((m, tuple(o.shape)))
                if isinstance(o, torch.Tensor) else None))
    try:
        out = leaves(_no_grad(model, [x.numpy()]))[0]
    finally:
        for hook in hooks:
            hook.remove()
    matching = [m for m, shape in last if shape == tuple(out.shape)]
    return matching[-1] if matching else None


def tp_settings(model, x) -> dict:
    """BasePruner keywords for ``model``: heads of q/k/v, the output layer ignored."""
    heads = {}
    for _module, q, k, v, head_dim in _attention_modules(model):
        heads[q] = q.out_features // head_dim
        heads[k] = k.out_features // head_dim
        heads[v] = v.out_features // head_dim
    out_layer = _output_layer(model, x)
    settings = {"ignored_layers": [out_layer] if out_layer is not None else []}
    if heads:
        settings.update(num_heads=heads, prune_num_heads=True, prune_head_dims=False)
    return settings


def _patch_heads(model) -> None:
    """Torch-Pruning's documented manual step: the attention modules' head counts from the
    pruned projections."""
    for module, q, k, _v, head_dim in _attention_modules(model):
        heads, kv = q.out_features // head_dim, k.out_features // head_dim
        for attr in _HEADS:
            if isinstance(getattr(module, attr, None), int):
                setattr(module, attr, heads)
        for attr in ("all_head_size", "inner_dim"):
            if isinstance(getattr(module, attr, None), int):
                setattr(module, attr, heads * head_dim)
        if isinstance(getattr(module, "num_key_value_heads", None), int):
            module.num_key_value_heads = kv
        if isinstance(getattr(module, "num_key_value_groups", None), int) and kv:
            module.num_key_value_groups = heads // kv


def run_tp(name: str, density: float) -> dict:
    """One corpus model pruned by Torch-Pruning: the same keys as msc's row."""
    import torch
    import torch_pruning as tp

    model, _info, inputs = MODELS[name]()
    x = torch.from_numpy(inputs[0])
    reference = leaves(_no_grad(model, inputs))
    row = dict(_NOT_RUN)
    try:
        with time_guard(TP_SECONDS, TimeoutError(f"no result after {TP_SECONDS} s (its "
                                                 "dependency-group search)")):
            macs0, params0 = tp.utils.count_ops_and_params(model, x)
            pruner = tp.pruner.BasePruner(
                model, x, importance=tp.importance.GroupMagnitudeImportance(p=2),
                pruning_ratio=1 - density, **tp_settings(model, x))
            pruner.step()
        _patch_heads(model)
    except Exception as err:  # noqa: BLE001  (the reference's failure is the measurement)
        row["message"] = f"prune fails: {type(err).__name__}: {_first_line(err)}"
        return row
    params1 = sum(p.numel() for p in model.parameters())
    row["pruned"] = params1 < params0
    try:
        outputs = leaves(_no_grad(model, inputs))
    except Exception as err:  # noqa: BLE001
        row["message"] = f"forward fails: {type(err).__name__}: {_first_line(err)}"
        return row
    shapes = [tuple(o.shape) for o in outputs]
    if shapes != [tuple(r.shape) for r in reference]:
        row["message"] = f"output shape {shapes[0]}, unpruned {tuple(reference[0].shape)}"
        return row
    macs1, _ = tp.utils.count_ops_and_params(model, x)
    row.update(ran=True, params=params1 / params0, flops=macs1 / macs0,
               sqnr=sqnr(reference, outputs))
    return row


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [""])[0][:160]


# --------------------------------------------------------------------------------------------
# msc and the table

def run_msc(name: str, density: float, speed: int) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"prunability_{name}_") as folder:
        try:
            row = prune_model(name, density, Path(folder), keep_calls=speed > 0)
        except Exception as err:  # noqa: BLE001  (a model msc cannot prune is a row)
            return {**_NOT_RUN, "message": f"{type(err).__name__}: {_first_line(err)}"}
        failed = [f"{p}: {r['message']}" for p, r in row["paths"].items() if not r["ok"]]
        row["message"] = "; ".join(failed)
        if speed and "calls" in row:
            best = best_interleaved(row.pop("calls"), speed,
                                    lambda fn: single_calls(fn, 1)[0])
            row["speedup"] = best["full"] / best["pruned"]
        row.pop("report", None)
    return row


def _yes(flag: bool) -> str:
    return "yes" if flag else "**no**"


def _num(value: float, digits: int = 3) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


COLUMNS = ["model", "family", "msc pruned", "msc ran", "msc params", "msc FLOPs", "msc SQNR dB",
           "msc speedup", "TP pruned", "TP ran", "TP params", "TP MACs", "TP SQNR dB"]


def cells(name: str, m: dict, t: dict) -> list[str]:
    tp = ["-"] * 5 if t.get("message") == "not run" else \
        [_yes(t["pruned"]), _yes(t["ran"]), _num(t["params"]), _num(t["flops"]),
         _num(t["sqnr"], 1)]
    return [name, FAMILIES[name], _yes(m["pruned"]), _yes(m["ran"]), _num(m["params"]),
            _num(m["flops"]), _num(m["sqnr"], 1),
            f"{m['speedup']:.2f}x" if "speedup" in m else "-", *tp]


def summary(rows: dict) -> list[str]:
    n = len(rows)
    lines = []
    for tool in ("msc", "tp"):
        good = sum(r[tool]["pruned"] and r[tool]["ran"] for r in rows.values())
        lines.append(f"{'msc' if tool == 'msc' else 'Torch-Pruning'}: {good}/{n} pruned and ran")
    for name, row in rows.items():
        for tool in ("msc", "tp"):
            if row[tool].get("message") not in (None, "", "not run"):
                lines.append(f"- {name} / {tool}: {row[tool]['message']}")
    for name, row in rows.items():
        frozen = row["msc"].get("frozen") or []
        if frozen:
            reasons = sorted({f["reason"] for f in frozen})
            lines.append(f"- {name}: {len(frozen)} joints not prunable: {'; '.join(reasons)}")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated corpus names (default: all)")
    parser.add_argument("--density", type=float, default=0.5, help="kept channel fraction")
    parser.add_argument("--speed", type=int, default=0,
                        help="time msc's backend unpruned vs pruned, best of N interleaved")
    parser.add_argument("--no-tp", action="store_true", help="msc only")
    parser.add_argument("--json", help="write the rows as JSON here")
    args = parser.parse_args(argv)
    names = args.models.split(",") if args.models else list(MODELS)
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        parser.error(f"unknown models {unknown}; see benchmarks/corpus.py --list")
    warnings.simplefilter("ignore")
    rows = {}

    def measured():
        for name in progress(names, desc="prunability"):
            rows[name] = {"msc": run_msc(name, args.density, args.speed),
                          "tp": {**_NOT_RUN, "message": "not run"} if args.no_tp else
                          run_tp(name, args.density)}
            yield cells(name, rows[name]["msc"], rows[name]["tp"])

    print_table(COLUMNS, measured(), flush=True)
    print()
    print("\n".join(summary(rows)))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
