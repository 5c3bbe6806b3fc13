"""``msc prune MODEL --density 0.5 [--config cfg.json] [--plan plan.json] -o OUT.json``.

Writes the pruned graph (``OUT.json``), its weights (``OUT.npz``, read back by ``msc`` and
``load_model``), the report (``OUT.report.json``), the applied plan (``OUT.plan.json``, edit
it and pass it back with ``--plan``) and an overlay for ``msc view OUT.json --overlay
OUT.overlay.json`` (``{joint: kept fraction of its parameters}``), and prints the before/after
table. MODEL is anything ``msc`` opens: an ONNX file, a graph JSON, ``file.py:factory``.

``--importance taylor|fisher|wanda`` and ``--compensate`` run the model on calibration data:
``--calib data.npz`` (one array per input, samples along axis 0, as ``msc quantize``), else
8 random N(0, 1) draws of the (float) inputs.
"""

from __future__ import annotations

import json
import os

import numpy as np

from ..errors import SerializationError
from . import options
from .loaders import load_model

CRITERIA = ("l1", "l2", "taylor", "fisher", "wanda")
RANDOM_DRAWS = 8
HELP = "prune a model's channels: a smaller graph + weights, a plan and a before/after report"


def add_arguments(p) -> None:
    p.epilog = ("examples:\n"
                "  msc prune net.json --density 0.5 -o out/small.json\n"
                "      # writes out/small.npz, .report.json, .plan.json, .overlay.json beside it\n"
                "  msc prune model.py:make --input-info ids:1,12:int64 --density 0.5 "
                "-o out/small.json\n"
                "  msc prune net.json --plan out/small.plan.json -o out/again.json  # re-apply\n"
                "  msc prune net.json --density 0.5 --importance fisher --compensate "
                "--calib calib.npz -o out/small.json\n")
    options.add_model(p)
    options.add_input_info(p)
    p.add_argument("-o", "--output", required=True, help="pruned graph JSON to write "
                   "(weights, report and plan go next to it: .npz, .report.json, .plan.json)")
    p.add_argument("--density", type=float, help="fraction of each channel group to keep, "
                   "e.g. 0.5 (overrides the config's)")
    p.add_argument("--stride", type=int, help="kept channels are a multiple of this (default 8)")
    p.add_argument("--config", help="JSON prune config: density (global or per layer), stride, "
                   "excludes, importance 'l1'/'l2', prune_head_dims, global_threshold, fold_bn")
    p.add_argument("--importance", choices=CRITERIA,
                   help="how channels are ranked: l1 / l2 weight magnitude (default l2); "
                        "taylor (|w * dL/dw|, L = 0.5 ||output||^2), fisher (expected output "
                        "change, from random output projections) or wanda (|W| * ||x|| of the "
                        "layers reading a channel) run the model on calibration data")
    p.add_argument("--compensate", action="store_true",
                   help="after pruning, refit the layers that read pruned channels by least "
                        "squares on calibration data (their output matches the unpruned one)")
    p.add_argument("--calib", help="calibration .npz for --importance taylor/fisher/wanda and "
                   "--compensate: one array per input, samples along axis 0 (default: 8 "
                   "random N(0, 1) draws of float inputs)")
    p.add_argument("--global-threshold", action="store_true",
                   help="one importance threshold over all groups (mean-normalized, as "
                        "Torch-Pruning's global pruning) instead of density per group")
    p.add_argument("--fold-bn", action="store_true",
                   help="fold inference batch norms into the convs before them first")
    p.add_argument("--plan", help="JSON plan to re-apply instead of choosing channels")
    p.add_argument("--no-latency", action="store_true",
                   help="skip measuring latency before/after on the msc backend")
    p.add_argument("--force", action="store_true", help="overwrite existing output files")


def _read_object(path: str, what: str, example: str) -> dict:
    """A JSON object from a file of the user's; anything else names the file."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as err:  # ValueError: bad JSON or not UTF-8
        raise SerializationError(f"cannot read the {what}: {err}", file=path,
                                 hint=f"a JSON object such as {example}") from None
    if not isinstance(data, dict):
        raise SerializationError(f"the {what} must be a JSON object", file=path,
                                 hint=f"e.g. {example}")
    return data


def _config(args) -> dict:
    config = _read_object(args.config, "config", '{"density": 0.5}') if args.config else {}
    if args.plan:  # read here so a bad file is named (the plan loader takes dicts as they are)
        config["plan"] = _read_object(args.plan, "plan", "the .plan.json msc prune wrote")
    for key in ("density", "stride", "importance"):
        if getattr(args, key) is not None:
            config[key] = getattr(args, key)
    if args.no_latency:
        config["latency"] = False
    for flag in ("global_threshold", "fold_bn", "compensate"):
        if getattr(args, flag):
            config[flag] = True
    return config


def _calibration(args, graph, config: dict) -> list | None:
    """The calibration items when the config needs them: ``--calib``, else random draws."""
    from msc.compression.prune.calibrate import random_calibration
    from msc.compression.prune.importance import DATA_CRITERIA

    from .cmd_quantize import calib_arrays, calibration_batches

    if not (config.get("compensate") or config.get("importance") in DATA_CRITERIA):
        return None
    if args.calib:
        return calibration_batches(graph, calib_arrays(args.calib), args.calib)
    print(f"calibrating on {RANDOM_DRAWS} random N(0, 1) inputs (pass --calib for real data)")
    return random_calibration(graph, RANDOM_DRAWS)


def _outputs(output: str, force: bool) -> dict[str, str]:
    stem = os.path.splitext(output)[0]
    paths = {"graph": output, "weights": stem + ".npz", "report": stem + ".report.json",
             "plan": stem + ".plan.json", "overlay": stem + ".overlay.json"}
    if not force:
        for path in paths.values():
            if os.path.exists(path):
                raise SerializationError("output file exists; not overwriting it", file=path,
                                         hint="pass --force to replace it")
    return paths


def kept_overlay(report: dict) -> dict[str, float]:
    """``{joint: parameters after / before}`` of every joint with parameters (the viewer's
    overlay: the pruned joints stand out)."""
    return {layer["node"]: round(layer["params"][1] / layer["params"][0], 4)
            for layer in report["layers"] if layer["params"][0]}


def run(args) -> int:
    from msc.compression.prune import format_report, prune, save_plan

    if os.path.splitext(args.output)[1].lower() != ".json":
        raise SerializationError("the pruned graph is written as JSON", file=args.output,
                                 hint="name the output <name>.json")
    paths = _outputs(args.output, args.force)
    graph, weights = load_model(args.model, options.input_info(args))
    config = _config(args)
    small, small_weights, report = prune(graph, weights, config, _calibration(args, graph, config))
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    small.to_json(paths["graph"])
    np.savez(paths["weights"], **{k: np.asarray(v) for k, v in small_weights.items()})
    save_plan(report["plan"], paths["plan"])
    with open(paths["report"], "w", encoding="utf-8") as f:
        json.dump({k: v for k, v in report.items() if k != "plan"}, f, indent=1)
    with open(paths["overlay"], "w", encoding="utf-8") as f:
        json.dump(kept_overlay(report), f, indent=1)
    print(format_report(report))
    print("wrote " + ", ".join(paths.values()))
    return 0


COMMAND = (HELP, add_arguments, run)
