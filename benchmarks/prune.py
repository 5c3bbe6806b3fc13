"""Structured pruning, msc vs Torch-Pruning (torch-pruning on PyPI), side by side in one run.

    .venv/bin/python benchmarks/prune.py [--quick] [--repeat 20] [--density 0.5] [--zoo]

On the same models, importance (group L2 magnitude) and density, per model:

- msc: parameters and FLOPs after/before, latency before -> after on the msc backend
  (``relax.build`` + VirtualMachine) and in torch eager (the ``to_torch`` codegen), and whether
  the two codegens of the pruned graph agree;
- Torch-Pruning: whether pruning and the pruned model's forward work (its users' reported
  failure classes: residual + concat/split, attention heads, packed q/k/v, HF GPT-2), its
  parameter and MAC ratios and torch eager latency, and how many pruned weights keep the same
  channels as msc ("agree k/n": the out-channel index sets of the conv/linear weights both
  pruned).

``--zoo`` adds the onnx package's light zoo (ONNX in, so msc only; random weights, stride 8):
parameters and FLOPs after/before and the msc VM latency before -> after (and pruned with
``fold_bn``), next to onnxruntime's latency on the unpruned model, all best-of-N interleaved
(``--zoo-only`` skips the Torch-Pruning table).

Torch-Pruning gets the settings its docs give: ``ignored_layers`` = the classifier, and for
attention ``num_heads`` with ``prune_num_heads=True, prune_head_dims=False`` (whole heads, as
msc). Where its forward fails because the module's head count is stale (its documented manual
step), the row says so and the script applies that patch and retries.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import copy
import functools
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# As a script, this folder is sys.path[0]; benchmarks/transformers.py would shadow the
# transformers package (the GPT-2 row): import from the repository root instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

from benchmarks.common import best_interleaved, light_folder, print_table, single_calls


def _models(quick: bool) -> dict:
    """name: (what it exercises, factory, input shape, tp settings(model) -> dict)."""
    from torch import nn

    from tests.helpers import prune_models as pm

    s = 2 if quick else 1  # --quick: half the widths
    enc = {"d": 128 // s, "heads": 8, "head_dim": 16 // s, "hidden": 512 // s}
    return {
        "resnet": ("residual + downsample", lambda: pm.ResNet((64 // s, 64 // s, 128 // s,
                                                               128 // s)),
                   (1, 3, 32, 32), lambda m: {"ignored_layers": [m.fc]}),
        "densenet": ("concat + split + flatten", lambda: pm.Dense((64 // s, 32 // s, 32 // s,
                                                                   64 // s)),
                     (1, 3, 8, 8), lambda m: {"ignored_layers": [m.fc]}),
        "mobilenet": ("depthwise + grouped + GN", lambda: pm.Mobile((64 // s, 128 // s,
                                                                     128 // s)),
                      (1, 3, 32, 32), lambda m: {"ignored_layers": [m.fc]}),
        "encoder": ("attention heads (q/k/v/o)", lambda: pm.Encoder(**enc), (1, 64, enc["d"]),
                    lambda m: {"num_heads": {m.q: m.heads, m.k: m.heads, m.v: m.heads},
                               "prune_num_heads": True, "prune_head_dims": False}),
        "torch_layer": ("nn.TransformerEncoderLayer (packed q/k/v)",
                        lambda: nn.TransformerEncoderLayer(enc["d"], 8, enc["hidden"],
                                                           dropout=0.0, batch_first=True),
                        (1, 64, enc["d"]),
                        lambda m: {"num_heads": {m.self_attn: m.self_attn.num_heads},
                                   "prune_num_heads": True, "prune_head_dims": False}),
        "gpt2": ("HF GPT-2 (packed q/k/v Conv1D + split)", lambda: _gpt2(enc["d"]), (1, 32),
                 lambda m: {"num_heads": {b.attn.c_attn: 8 for b in m.h},
                            "prune_num_heads": True, "prune_head_dims": False,
                            "ignored_layers": [m.wte, m.wpe]}),
    }


def _gpt2(width: int):
    import transformers

    transformers.logging.set_verbosity_error()
    config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=width, n_layer=2, n_head=8,
                                     n_positions=64, use_cache=False)
    return transformers.GPT2Model(config)


VOCAB = 100


def _input(shape):
    """Token ids for 2-D inputs (the language model), images / sequences otherwise."""
    rng = np.random.default_rng(0)
    if len(shape) == 2:
        return rng.integers(0, VOCAB, shape).astype("int64")
    return rng.standard_normal(shape).astype("float32")


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) or hasattr(out, "last_hidden_state") \
        else out


def _median_ms(fn, repeat: int) -> float:
    fn()
    return float(np.median(single_calls(fn, repeat))) * 1e3


def _vm(graph, weights):
    from msc import relax
    from msc.codegen import to_relax

    with tempfile.TemporaryDirectory() as folder:
        mod = to_relax(graph, weights, {"need_test": False}, build_folder=folder)
    vm = relax.VirtualMachine(relax.build(mod), relax.cpu())
    return vm[mod.get_global_vars()[0].name_hint]


def _torch_ms(model, x, repeat: int) -> float:
    import torch

    with torch.no_grad():
        return _median_ms(lambda: model(x), repeat)


def run_msc(full, shape, density: float, repeat: int) -> dict:
    import torch

    from msc.codegen import to_torch
    from msc.compression.prune import prune
    from msc.frontends.translate import from_torch

    x = _input(shape)
    graph, weights = from_torch(copy.deepcopy(full), [(list(shape), str(x.dtype))])
    small, small_w, report = prune(graph, weights, {"density": density, "stride": 1,
                                                    "importance": "l2", "latency": False})
    before, after = _vm(graph, weights), _vm(small, small_w)
    with tempfile.TemporaryDirectory() as folder:
        pruned_torch = to_torch(small, small_w, {"need_test": False}, build_folder=folder)
    tx = torch.from_numpy(x)
    with torch.no_grad():
        diff = float(np.abs(_first(after(x)).numpy() - _first(pruned_torch(tx)).numpy()).max())
    plan = {graph.find_tensor(k).alias: v["out_indices"] for k, v in report["plan"].items()}
    return {"params": report["total"]["params"][2], "flops": report["total"]["flops"][2],
            "vm": (_median_ms(lambda: before(x), repeat), _median_ms(lambda: after(x), repeat)),
            "torch": (_torch_ms(full, tx, repeat), _torch_ms(pruned_torch, tx, repeat)),
            "diff": diff, "plan": plan}


def _tp_prune(model, x, density: float, settings: dict) -> dict[str, list[int]]:
    import torch_pruning as tp

    pruner = tp.pruner.BasePruner(model, x,
                                  importance=tp.importance.GroupMagnitudeImportance(p=2),
                                  pruning_ratio=1 - density, **settings)
    names = {m: n for n, m in model.named_modules()}
    out_fns = (tp.prune_conv_out_channels, tp.prune_linear_out_channels)
    kept = {}
    for group in pruner.step(interactive=True):
        for dep, idxs in group:
            layer = dep.target.module
            if dep.handler in out_fns and hasattr(layer, "weight"):
                size = layer.weight.shape[0]
                kept[f"{names[layer]}.weight"] = sorted(set(range(size)) - {int(i) for i in idxs})
        group.prune()
    return kept


def _patch_heads(model) -> bool:
    """Torch-Pruning's documented manual step: update the head count the module keeps."""
    if hasattr(model, "head_dim") and hasattr(model, "q"):
        model.heads = model.q.out_features // model.head_dim
        return True
    return False


def _forward(model, x):
    import torch

    try:
        with torch.no_grad():
            return model(x)
    except Exception as err:  # noqa: BLE001 - the reference's failure is the measurement
        return err


def run_tp(full, shape, density: float, settings, repeat: int) -> dict:
    import torch
    import torch_pruning as tp

    model = copy.deepcopy(full).eval()
    x = torch.from_numpy(_input(shape))
    macs0, params0 = tp.utils.count_ops_and_params(model, x)
    try:
        kept = _tp_prune(model, x, density, settings(model))
    except Exception as err:  # noqa: BLE001 - the reference's failure is the measurement
        return {"status": f"prune fails: {type(err).__name__}"}
    status, out = "ok", _forward(model, x)
    if isinstance(out, Exception) and _patch_heads(model):
        status, out = "ok after manual heads patch", _forward(model, x)
        if isinstance(out, Exception):
            return {"status": f"forward fails: {type(out).__name__} (also after the manual "
                              f"heads patch)", "kept": kept}
    if isinstance(out, Exception):
        return {"status": f"forward fails: {type(out).__name__}", "kept": kept}
    with torch.no_grad():
        if _first(out).shape != _first(full(x)).shape:
            status = f"output shape {tuple(_first(out).shape)}"
    macs1, params1 = tp.utils.count_ops_and_params(model, x)
    if params1 == params0:
        status = "runs, prunes nothing"
    return {"status": status, "kept": kept, "params": params1 / params0, "macs": macs1 / macs0,
            "torch": _torch_ms(model, x, repeat)}


def _agrees(diff: float) -> str:
    return "yes" if diff < 1e-3 else f"NO ({diff:.1e})"


def _agree(msc_plan: dict, tp_kept: dict | None) -> str:
    if not tp_kept:
        return "-"
    both = [k for k in tp_kept if msc_plan.get(k)]
    return f"{sum(msc_plan[k] == tp_kept[k] for k in both)}/{len(both)}"


ZOO = ["squeezenet", "shufflenet", "resnet50", "inception_v1", "densenet121"]


def _best_interleaved_ms(fns: dict, repeat: int) -> dict:
    """Best-of-``repeat`` ms of each callable, run in turn (round robin) so that the load of
    a shared machine hits them alike."""
    best = best_interleaved(fns, repeat, lambda fn: single_calls(fn, 1)[0])
    return {k: seconds * 1e3 for k, seconds in best.items()}


ZOO_COLUMNS = ["zoo model", "params x", "FLOPs x", "groups",
               "msc VM ms: full -> pruned (speedup)", "pruned, BN folded", "ORT ms (unpruned)"]


def zoo_rows(density: float, repeat: int) -> None:
    print()
    print_table(ZOO_COLUMNS, (_zoo_cells(name, density, repeat) for name in ZOO), flush=True)


def _zoo_cells(name: str, density: float, repeat: int) -> list[str]:
    """One light zoo model (random weights) pruned to ``density``, and BN folded: params and
    FLOPs kept, msc VM latency of each, interleaved with onnxruntime's of the unpruned one."""
    from msc.compression.prune import prune
    from msc.frontends.translate import from_onnx

    folder = light_folder()
    rng = np.random.default_rng(0)
    graph, weights = from_onnx(str(folder / f"light_{name}.onnx"))
    weights = {k: _random_like(v, rng) for k, v in weights.items()}
    settings = {"density": density, "latency": False}
    small, small_w, report = prune(graph, weights, settings)
    folded, folded_w, _ = prune(graph, weights, {**settings, "fold_bn": True})
    x = rng.standard_normal([max(d, 1) for d in graph.get_inputs()[0].shape])
    x = x.astype("float32")
    fns = {k: functools.partial(_vm(g, w), x) for k, (g, w) in
           {"full": (graph, weights), "pruned": (small, small_w),
            "folded": (folded, folded_w)}.items()}
    ort_fn = _ort_fn(folder, name, x)
    if ort_fn is not None:
        fns["ort"] = ort_fn
    ms = _best_interleaved_ms(fns, repeat)
    return [name, f"{report['total']['params'][2]:.3f}", f"{report['total']['flops'][2]:.3f}",
            len(report["groups"]),
            f"{ms['full']:.2f} -> {ms['pruned']:.2f} ({ms['full'] / ms['pruned']:.2f}x)",
            f"{ms['folded']:.2f} ({ms['full'] / ms['folded']:.2f}x)",
            f"{ms['ort']:.2f}" if "ort" in ms else "-"]


def _random_like(array, rng):
    """The light zoo ships constant weights; BN variances stay positive."""
    if array.dtype.kind != "f":
        return array
    return (np.abs(rng.standard_normal(array.shape)) * 0.1 + 0.01).astype(array.dtype)


def _ort_fn(folder: Path, name: str, x):
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(folder / f"light_{name}.onnx"), options)
    feed = {session.get_inputs()[0].name: x}
    return lambda: session.run(None, feed)


MODEL_COLUMNS = ["model", "exercises", "msc params x", "msc FLOPs x", "msc VM ms (speedup)",
                 "msc torch ms (speedup)", "codegens agree", "TP status", "TP params x",
                 "TP MACs x", "TP torch ms (speedup)", "channels agree"]


def _model_cells(name: str, case: tuple, density: float, repeat: int, torch_pruning) -> list:
    """One torch model pruned by msc and (when installed) by Torch-Pruning, side by side."""
    import torch

    what, make, shape, settings = case
    torch.manual_seed(0)
    full = make().eval()
    m = run_msc(full, shape, density, repeat)
    t = run_tp(full, shape, density, settings, repeat) if torch_pruning else \
        {"status": "not installed"}
    vm0, vm1 = m["vm"]
    th0, th1 = m["torch"]
    tp_ms = f"{th0:.3f} -> {t['torch']:.3f} ({th0 / t['torch']:.2f}x)" if "torch" in t else "-"
    return [name, what, f"{m['params']:.3f}", f"{m['flops']:.3f}",
            f"{vm0:.3f} -> {vm1:.3f} ({vm0 / vm1:.2f}x)",
            f"{th0:.3f} -> {th1:.3f} ({th0 / th1:.2f}x)", _agrees(m["diff"]), t["status"],
            f"{t.get('params', float('nan')):.3f}", f"{t.get('macs', float('nan')):.3f}", tp_ms,
            _agree(m["plan"], t.get("kept"))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="half widths, 3 timing runs")
    parser.add_argument("--repeat", type=int, default=20, help="timed runs per latency")
    parser.add_argument("--density", type=float, default=0.5, help="kept channel fraction")
    parser.add_argument("--zoo", action="store_true",
                        help="also the onnx light zoo (msc only, next to onnxruntime)")
    parser.add_argument("--zoo-only", action="store_true", help="the light zoo rows alone")
    args = parser.parse_args(argv)
    if args.zoo_only:
        zoo_rows(args.density, 3 if args.quick else args.repeat)
        return 0

    repeat = 3 if args.quick else args.repeat
    try:
        import torch_pruning
    except ImportError:
        torch_pruning = None
    models = _models(args.quick).items()
    print_table(MODEL_COLUMNS, (_model_cells(name, case, args.density, repeat, torch_pruning)
                                for name, case in models))
    if args.zoo:
        zoo_rows(args.density, repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
