"""Prunability of one corpus model (tests/helpers/corpus.py) with msc: prune at a density,
then run the pruned graph on every path and compare it with the *unpruned* torch model.

A model is **pruned** when the pruned graph has fewer parameters than the original (a
physically smaller graph, not masks); it **ran** when the pruned graph builds and runs on
every path (``to_relax`` + ``relax.build`` on the msc backend, ``to_torch``, ``to_onnx`` in
onnxruntime) and each gives the output shapes of the unpruned model. The output SQNR is the
msc backend's pruned output against torch's unpruned output (random weights, so it says how
much of the function half the channels keep, not accuracy); ``agree`` is the largest
difference between the paths, relative to the output's magnitude.

    >>> row = prune_model("repvgg", density=0.5)            # doctest: +SKIP
    >>> row["pruned"], row["ran"], row["params"]            # doctest: +SKIP
    (True, True, 0.27)
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from msc import relax
from msc.codegen import to_onnx, to_relax, to_torch
from msc.compression.prune import prune
from msc.compression.quantize.testing import sqnr
from msc.frontends import translate
from tests.helpers.corpus import MODELS, _no_grad, leaves

PRUNE_PATHS = ("relax", "to_torch", "to_onnx")


def msc_config(density: float) -> dict:
    """The settings the prunability run compares with Torch-Pruning: group L2 magnitude, the
    same channel ratio in every group, any kept count (Torch-Pruning's ``round_to=None``)."""
    return {"density": density, "stride": 1, "importance": "l2", "latency": False}


def _run_relax(graph, weights, inputs, folder: Path):
    mod = to_relax(graph, weights, {"need_test": False}, build_folder=str(folder / "relax"))
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), relax.cpu())
    main = vm[mod.get_global_vars()[0].name_hint]
    return leaves(main(*inputs)), lambda: main(*inputs)


def _run_torch(graph, weights, inputs, folder: Path):
    module = to_torch(graph, weights, {"need_test": False}, build_folder=str(folder / "torch"))
    return leaves(_no_grad(module, inputs)), None


def _run_onnx(graph, weights, inputs, folder: Path):
    import onnxruntime as ort

    proto = to_onnx(graph, weights)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {i.name: x for i, x in zip(session.get_inputs(), inputs)}
    return [np.asarray(o) for o in session.run(None, feeds)], None


RUNNERS = {"relax": _run_relax, "to_torch": _run_torch, "to_onnx": _run_onnx}


def run_paths(graph, weights, inputs, reference, folder: Path) -> dict:
    """``{path: {"ok", "message", "outputs"}}``: ok when the path runs and every output has
    the reference's shape; ``"relax"`` also holds a ``call`` (one more run, for timing)."""
    out = {}
    for path in PRUNE_PATHS:
        try:
            outputs, call = RUNNERS[path](graph, weights, inputs, folder)
        except Exception as err:  # noqa: BLE001  (every failure is a cell of the table)
            first = (str(err).strip().splitlines() or [""])[0][:200]
            out[path] = {"ok": False, "message": f"{type(err).__name__}: {first}"}
            continue
        shapes = [list(o.shape) for o in outputs]
        want = [list(r.shape) for r in reference]
        ok = shapes == want
        out[path] = {"ok": ok, "outputs": outputs, "call": call,
                     "message": "" if ok else f"shapes {shapes}, unpruned {want}"}
    return out


def _agree(results: dict) -> float:
    """The largest difference between two paths' outputs over the output's largest value."""
    runs = [r["outputs"] for r in results.values() if r["ok"]]
    worst = 0.0
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            scale = max(float(np.abs(a).max()), 1e-30) if a.size else 1.0
            worst = max(worst, float(np.abs(a.astype(np.float64) - b).max()) / scale
                        if a.size else 0.0)
    return worst


def prune_model(name: str, density: float = 0.5, tmp: Path | None = None,
                keep_calls: bool = False) -> dict:
    """One corpus model pruned by msc: ``{"pruned", "ran", "params", "flops", "sqnr",
    "agree", "paths", "frozen", "report"}`` (``params`` / ``flops``: kept fractions;
    ``frozen``: the report's not-prunable entries). ``keep_calls`` keeps the backend
    callables of the unpruned and pruned graphs (``"calls"``) for timing."""
    model, info, inputs = MODELS[name]()
    reference = leaves(_no_grad(model, inputs))
    folder = Path(tmp or tempfile.mkdtemp(prefix=f"prunability_{name}_"))
    graph, weights = translate.from_torch(model, info)
    small, small_w, report = prune(graph, weights, msc_config(density))
    paths = run_paths(small, small_w, inputs, reference, folder / "pruned")
    row = {"params": report["total"]["params"][2], "flops": report["total"]["flops"][2],
           "frozen": report["not_prunable"], "report": report, "paths": paths,
           "agree": _agree(paths)}
    row["pruned"] = report["total"]["params"][1] < report["total"]["params"][0]
    row["ran"] = all(p["ok"] for p in paths.values())
    relax_run = paths["relax"]
    row["sqnr"] = sqnr(reference, relax_run["outputs"]) if relax_run["ok"] else float("nan")
    if keep_calls and relax_run["ok"]:
        _, full_call = _run_relax(graph, weights, inputs, folder / "full")
        row["calls"] = {"full": full_call, "pruned": relax_run["call"]}
    for result in paths.values():  # the outputs are large; the row keeps the verdicts
        result.pop("outputs", None)
        result.pop("call", None)
    return row
