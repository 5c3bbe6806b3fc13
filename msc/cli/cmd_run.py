"""``msc run MODEL [--input ...] [--check]``: compile with msc's backend, run, compare."""

from __future__ import annotations

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
--check compares every output with |msc - ref| <= atol + rtol * |ref| and exits 1 when one
differs; it needs an ONNX model (onnxruntime) or a torch model (torch).
"""


def add_arguments(p) -> None:
    p.epilog = EPILOG
    options.add_model(p)
    options.add_inputs(p)
    p.add_argument("--check", action="store_true",
                   help="compare with onnxruntime (ONNX) or torch (torch models); exit 1 on a "
                        "mismatch")
    options.add_tolerances(p)
    options.add_threads(p)
    p.add_argument("--save", metavar="FILE.npz",
                   help="write the outputs to an .npz keyed by output name")
    p.add_argument("--force", action="store_true", help="replace an existing --save file")


def _stats(name: str, array: np.ndarray) -> str:
    head = f"{name}: {array.dtype}{list(array.shape)}"
    if array.size == 0 or array.dtype.kind not in "biuf":
        return head
    values = array.astype(np.float64)
    return (f"{head}  min {values.min():.4g}  max {values.max():.4g}  "
            f"mean {values.mean():.4g}  std {values.std():.4g}")


def _check_row(row: dict) -> str:
    if "error" in row:
        return f"{row['output']}: {row['error']} -> MISMATCH"
    status = "ok" if row["ok"] else f"MISMATCH ({row['mismatched']} of {row['size']})"
    return (f"{row['output']}: max abs err {row['max_abs']:.3g}, max rel err "
            f"{row['max_rel']:.3g} -> {status}")


def run(args) -> int:
    if args.save:
        if not args.save.endswith(".npz"):
            raise ValidationError(f"--save {args.save!r} is not an .npz file",
                                  hint="write --save outputs.npz")
        check_writable([args.save], input_files(args.model), args.force)
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
    print(f"msc: built in {built - start:.2f} s, ran in {(ran - built) * 1e3:.1f} ms "
          f"({executable.stats['kernels']['native']} native kernels)")
    for name, array in zip(names, outputs):
        print("  " + _stats(name, array))
    if args.save:
        from codegen.files import save_npz

        save_npz(args.save, dict(zip(names, outputs)))
        print(f"wrote {args.save}")
    return _check(reference, arrays, outputs, names, args, reference_name(model)) \
        if reference else 0


def _check(reference, arrays, outputs, names, args, who: str) -> int:
    rows = compare(outputs, reference(arrays), names, args.atol, args.rtol)
    print(f"check against {who} (atol {args.atol:g}, rtol {args.rtol:g}):")
    for row in rows:
        print("  " + _check_row(row))
    ok = all(row["ok"] for row in rows)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1
