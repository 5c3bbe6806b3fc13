"""``msc run MODEL [--input ...] [--check]``: compile with msc's backend, run, compare."""

from __future__ import annotations

import json
import time

import numpy as np

from ..errors import ValidationError
from . import options
from .guard import check_writable, input_files
from .loaders import open_model
from .runners import compare, msc_runner, reference_name, reference_runner
from .stages import Stages

NAME = "run"
HELP = "compile a model with msc's backend, run it, and optionally check it against its runtime"
EPILOG = """examples:
  msc run model.onnx                                   # random inputs (seed 0)
  msc run model.onnx --input data_0:image.npy --check  # compare with onnxruntime
  msc run model.onnx --input x:4,3,224,224 --check --atol 1e-3 --rtol 1e-3
  msc run net.py:make_model --input-info "x:N,3,32,32" --dim N=2 --check   # vs torch
  msc run model.onnx --save out/outputs.npz
  msc run model.onnx --check --json | jq .check.ok
  msc run model.onnx --check --layerwise out/errors.json   # the first node that differs
--check compares every output with |msc - ref| <= atol + rtol * |ref| and exits 1 when one
differs; it needs an ONNX model (onnxruntime) or a torch model (torch). --layerwise compares
every intermediate tensor too (ONNX: every node output, through the user's path; torch: every
torch.fx node) and names the first node whose outputs differ while its inputs agree;
ERRORS.json is an overlay of the model's graph: each joint's max abs error on a log scale,
the first divergence as its focus (`msc view MODEL --overlay ERRORS.json` opens it, ringed).
"""


def add_arguments(p) -> None:
    p.epilog = EPILOG
    options.add_model(p)
    options.add_inputs(p)
    p.add_argument("--check", action="store_true",
                   help="compare with onnxruntime (ONNX; a QDQ model with its graph "
                        "optimizations off: the model as written) or torch (torch models); "
                        "exit 1 on a mismatch")
    options.add_tolerances(p)
    options.add_threads(p)
    p.add_argument("--layerwise", nargs="?", const="", metavar="ERRORS.json",
                   help="with --check: compare every intermediate tensor with onnxruntime "
                        "(ONNX) or torch (torch.fx nodes) and name the first node that "
                        "differs (optionally write the errors as an overlay of the graph "
                        "to ERRORS.json, for `msc view --overlay`)")
    p.add_argument("--save", metavar="FILE.npz",
                   help="write the outputs to an .npz keyed by output name")
    p.add_argument("--force", action="store_true", help="replace an existing --save file")
    p.add_argument("--json", action="store_true",
                   help="print a JSON report (timings, output stats, check rows)")


def stats(name: str, array: np.ndarray) -> dict:
    """Name, dtype, shape and (for numbers) min / max / mean / std of one output."""
    row = {"name": name, "dtype": str(array.dtype), "shape": list(array.shape)}
    if array.size and array.dtype.kind in "biuf":
        values = array.astype(np.float64)
        row |= {"min": float(values.min()), "max": float(values.max()),
                "mean": float(values.mean()), "std": float(values.std())}
    return row


def _stats_line(row: dict) -> str:
    head = f"{row['name']}: {row['dtype']}{row['shape']}"
    if "min" not in row:
        return head
    return (f"{head}  min {row['min']:.4g}  max {row['max']:.4g}  mean {row['mean']:.4g}  "
            f"std {row['std']:.4g}")


def _check_line(row: dict) -> str:
    if "error" in row:
        return f"{row['output']}: {row['error']} -> MISMATCH"
    status = "ok" if row["ok"] else f"MISMATCH ({row['mismatched']} of {row['size']})"
    return (f"{row['output']}: max abs err {row['max_abs']:.3g}, max rel err "
            f"{row['max_rel']:.3g} -> {status}")


def _check_save(args) -> None:
    if not args.save.endswith(".npz"):
        raise ValidationError(f"--save {args.save!r} is not an .npz file",
                              hint="write --save outputs.npz")
    check_writable([args.save], input_files(args.model), args.force)


def run(args) -> int:
    if args.save:
        _check_save(args)
    _check_layerwise(args)
    with Stages("msc run", ["load", "build", "run"]) as stage:
        stage("load")
        model = open_model(args.model, options.input_info(args))
        reference = reference_runner(model, args.threads) if args.check else None
        if args.check and reference is None:
            raise ValidationError(f"--check needs a runtime of the model's own; a {model.kind} "
                                  "model has none", file=model.spec,
                                  hint="check an ONNX model (onnxruntime) or a torch model")
        arrays = options.model_inputs(args, model)
        stage("build")
        start = time.perf_counter()
        fn, executable = msc_runner(model, args.threads)
        built = time.perf_counter()
        stage("run")
        outputs = fn(arrays)
        ran = time.perf_counter()
    names = [t.alias or t.name for t in model.graph.get_outputs()]
    report = {"model": model.spec, "build_s": built - start, "run_ms": (ran - built) * 1e3,
              "native_kernels": executable.stats["kernels"]["native"],
              "outputs": [stats(n, a) for n, a in zip(names, outputs)]}
    if args.save:
        from msc.codegen.files import save_npz

        save_npz(args.save, dict(zip(names, outputs)))
    if reference:
        rows = compare(outputs, reference(arrays), names, args.atol, args.rtol)
        report["check"] = {"reference": reference_name(model), "atol": args.atol,
                           "rtol": args.rtol, "ok": all(r["ok"] for r in rows), "outputs": rows}
    if args.layerwise is not None:
        report["layerwise"] = _layerwise(args, model, arrays)
    print(json.dumps(report, indent=2) if args.json else _text(report, args.save))
    return 0 if report.get("check", {"ok": True})["ok"] else 1


def _check_layerwise(args) -> None:
    if args.layerwise is None:
        return
    from .loaders import split_torch_spec

    if not args.check or not (args.model.lower().endswith(".onnx") or
                              split_torch_spec(args.model)):
        raise ValidationError("--layerwise compares an ONNX model with onnxruntime or a torch "
                              "model with torch: give one of them and --check", file=args.model,
                              hint="msc run model.onnx --check --layerwise")
    if args.layerwise:
        check_writable([args.layerwise], input_files(args.model), args.force)


def _layerwise(args, model, arrays: dict) -> dict:
    from .layerwise import layerwise, layerwise_torch

    if model.kind == "torch":
        report = layerwise_torch(model.module, arrays, args.atol, args.rtol, args.threads)
    else:
        report = layerwise(model.path, arrays, args.atol, args.rtol, args.threads)
    if args.layerwise:
        from ..graph.files import write_atomic
        from ..viewer.overlay import overlay_json
        from .layerwise import error_overlay

        write_atomic(args.layerwise, overlay_json(error_overlay(report, model.graph)))
    return report


def _text(report: dict, saved: str | None) -> str:
    head = (f"msc: built in {report['build_s']:.2f} s, ran in {report['run_ms']:.1f} ms "
            f"({report['native_kernels']} native kernels)")
    lines = [head]
    lines += ["  " + _stats_line(row) for row in report["outputs"]]
    lines += [f"wrote {saved}"] if saved else []
    check = report.get("check")
    if check:
        lines.append(f"check against {check['reference']} (atol {check['atol']:g}, "
                     f"rtol {check['rtol']:g}):")
        lines += ["  " + _check_line(row) for row in check["outputs"]]
        lines.append("PASS" if check["ok"] else "FAIL")
    if "layerwise" in report:
        from .layerwise import text_report

        lines.append(text_report(report["layerwise"]))
    return "\n".join(lines)
