"""``msc codegen MODEL --to relax|torch -o DIR [--test]``: the model as source you can run."""

from __future__ import annotations

import os
import subprocess
import sys

from ..errors import SerializationError
from . import options
from .guard import input_files
from .loaders import open_model
from .runners import check_weights, msc_runner, reference_name, reference_runner
from .stages import Stages

NAME = "codegen"
HELP = "write a model as a Relax builder script or a torch nn.Module (+ weights, standalone test)"
EPILOG = """examples:
  msc codegen model.onnx --to relax -o out/relax           # out/relax/main.py + weights
  msc codegen model.onnx --to torch -o out/torch --test    # + baseline/, then runs its test
  msc codegen net.py:make_model --input-info "x:N,3,32,32" --to torch -o out/net \\
      --test --dim N=2
With --test the golden outputs come from the model's own runtime (onnxruntime for ONNX,
torch for torch models; msc's VM for .json / TVMScript), and the generated script's test runs
as `python DIR/<script>`: exit 1 when it reports FAIL.
"""


def _codegen(target: str):
    from msc import codegen

    return getattr(codegen, f"to_{target}")  # to_torch imports torch only when chosen


def add_arguments(p) -> None:
    p.epilog = EPILOG
    options.add_model(p)
    p.add_argument("--to", required=True, choices=("relax", "torch"),
                   help="relax: a BlockBuilder script for msc's backend; torch: an nn.Module")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="the build folder")
    p.add_argument("--test", action="store_true",
                   help="save baseline inputs and golden outputs, then run the script's test")
    p.add_argument("--force", action="store_true", help="write into a non-empty DIR")
    options.add_inputs(p)
    options.add_tolerances(p, 1e-4, 1e-4)


def _check_folder(folder: str, spec: str, force: bool) -> None:
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise SerializationError("exists and is not a folder", file=folder,
                                 hint="-o takes a folder for the generated files")
    if os.path.isdir(folder) and os.listdir(folder) and not force:
        raise SerializationError("folder is not empty; not writing into it", file=folder,
                                 hint="pass --force to write (and replace files) there")
    inputs = [os.path.abspath(i) for i in input_files(spec)]
    if os.path.abspath(folder) in {os.path.dirname(i) for i in inputs}:
        raise SerializationError("the output folder holds the input model", file=folder,
                                 hint="generate into a folder of its own")


def run(args) -> int:
    _check_folder(args.output, args.model, args.force)
    with Stages("msc codegen", ["load", "codegen"]) as stage:
        stage("load")
        model = open_model(args.model, options.input_info(args))
        check_weights(model)
        stage("codegen")
        config = {"need_test": True, "atol": args.atol, "rtol": args.rtol}
        _codegen(args.to)(model.graph, model.weights, codegen_config=config,
                          build_folder=args.output)
    from msc.codegen.baseline import read_manifest

    script = read_manifest(args.output)["script"]
    print(f"wrote {os.path.join(args.output, script)} ({args.to}) and its weights")
    if not args.test:
        return 0
    return _test(args, model, script)


def _test(args, model, script: str) -> int:
    from msc.codegen import save_baseline

    arrays = options.model_inputs(args, model)
    reference = reference_runner(model)
    golden_from = reference_name(model) if reference else "msc's VM"
    golden = (reference or msc_runner(model)[0])(arrays)
    path = save_baseline(args.output, list(arrays.values()), golden)
    print(f"baseline {path}: golden outputs from {golden_from}")
    return _run_script(args.output, script)


def _run_script(folder: str, script: str) -> int:
    """``python <script>`` in the folder, with this msc importable; 1 when its test fails."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [root, os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, script], cwd=folder, capture_output=True, text=True,
                          env=env, check=False)
    print(proc.stdout.rstrip())
    if proc.returncode != 0:
        print(proc.stderr.rstrip()[-2000:], file=sys.stderr)
        print(f"msc codegen: the generated test failed (python {script} in {folder})",
              file=sys.stderr)
        return 1
    return 0
