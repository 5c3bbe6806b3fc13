"""``msc quantize MODEL --calib data.npz -o OUT.json``: int8 QDQ graph plus its report.

Writes ``OUT.json`` (the QDQ MSCGraph), ``OUT.npz`` (its weights, so ``msc inspect OUT.json``
and ``load_model`` find them), ``OUT.plan.json`` (the plan, to edit and re-apply) and
``OUT.report.json``, and prints the report table. ``--calib`` is an ``.npz`` with one array per
graph input (by input name or alias; a single unnamed array feeds a single input); its first
axis is cut into batches of the input's batch size. ``--weight-only int4|int8`` packs the
linear weights instead, activations stay float (cli/weight_only.py: LLM decode).
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from ..errors import SerializationError, ValidationError
from . import options, weight_only
from .loaders import load_model

__all__ = ["COMMAND", "calibration_batches"]


def _smooth_value(text: str):
    """--smooth's value: 'search' or an alpha (read_config checks its range)."""
    if text == "search":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither an alpha nor 'search'") from None


def _add_arguments(p) -> None:
    p.epilog = ("examples:\n"
                "  msc quantize net.json --calib calib.npz -o out/int8.json\n"
                "  msc quantize model.onnx --calib calib.npz --method entropy --target-sqnr 30 "
                "-o out/int8.json\n"
                "  msc quantize llm.onnx --calib prompts.npz --weight-only int4 --group-size 64 "
                "--awq --eval held.npz -o out/int4.json\n")
    options.add_model(p)
    options.add_input_info(p)
    p.add_argument("--calib", required=True,
                   help="calibration .npz: one array per input, samples along axis 0")
    p.add_argument("--method", default="minmax",
                   choices=["minmax", "percentile", "entropy", "entropy_trt"],
                   help="activation range: min/max, percentile (99.999), entropy (KL as "
                        "onnxruntime: 128 signed bins, i.e. min/max) or entropy_trt (TensorRT's "
                        "2048-bin |x| KL search)")
    p.add_argument("--activation-dtype", default="uint8", choices=["uint8", "int8"],
                   help="per-tensor activations: asymmetric uint8 or symmetric int8")
    p.add_argument("--target-sqnr", type=float, default=30.0,
                   help="output SQNR (dB) the suggested exclude list must reach (default 30)")
    p.add_argument("--exclude", nargs="*", default=[], metavar="NODE",
                   help="node names to keep float")
    p.add_argument("--exclude-regex", default=None, help="keep float the nodes matching this")
    p.add_argument("--quantize-outputs", action=argparse.BooleanOptionalAction, default=True,
                   help="QDQ on the chosen ops' outputs too, after a following relu "
                        "(onnxruntime's placement, fused into its QLinearConv / QGemm after msc "
                        "export; the default); --no-quantize-outputs: inputs only")
    p.add_argument("--smooth", default=None, type=_smooth_value, metavar="ALPHA|search",
                   help="SmoothQuant first: move activation outliers into the linears' "
                        "weights with this alpha in [0, 1], or 'search' (the best of 0.3 / "
                        "0.5 / 0.7 / none on the calibration data); default off")
    p.add_argument("--no-fold-bn", action="store_true",
                   help="keep batch norms (default: folded into the convs before them)")
    p.add_argument("--no-per-layer", action="store_true",
                   help="skip the per-layer ranking and the exclude search (one pass per "
                        "layer; slow on big models)")
    p.add_argument("--executor", default="torch", choices=["torch", "relax"],
                   help="what runs the float and QDQ graphs while measuring (default torch)")
    p.add_argument("-o", "--output", required=True,
                   help="QDQ graph JSON to write (weights beside it: .npz, int8 kept int8)")
    p.add_argument("--force", action="store_true", help="overwrite existing output files")
    weight_only.add_arguments(p)


def _outputs(path: str) -> dict:
    stem = os.path.splitext(path)[0]
    return {"graph": path, "weights": stem + ".npz", "plan": stem + ".plan.json",
            "report": stem + ".report.json"}


def _check_outputs(args, paths: dict) -> None:
    if not args.output.lower().endswith(".json"):
        raise SerializationError("the output must be a .json file", file=args.output,
                                 hint="e.g. -o out/model_int8.json")
    if os.path.exists(args.output) and os.path.samefile(args.output, args.model):
        raise SerializationError("output file is the input model; not overwriting it",
                                 file=args.output, hint="write to another file")
    taken = [p for p in paths.values() if os.path.exists(p)]
    if taken and not args.force:
        raise SerializationError("output file exists; not overwriting it", file=taken[0],
                                 hint="pass --force to replace it")


def calib_arrays(path: str) -> dict:
    from msc.codegen.weight_files import load_weights

    if not path.lower().endswith(".npz"):
        raise SerializationError("calibration data must be an .npz file", file=path)
    return load_weights(path)


def calibration_batches(graph, arrays: dict, file: str = "") -> list[dict]:
    """The ``.npz`` arrays as a list of input dicts, cut along axis 0 into input batches."""
    inputs = graph.get_inputs()
    if len(arrays) == 1 and len(inputs) == 1:
        arrays = {inputs[0].alias or inputs[0].name: next(iter(arrays.values()))}
    columns = {}
    for tensor in inputs:
        key = next((k for k in (tensor.alias, tensor.name, tensor.name.rpartition(":")[0])
                    if k in arrays), None)
        if key is None:
            raise ValidationError("no calibration array for this input", file=file,
                                  tensor=tensor.name, hint=f"arrays in the file: {sorted(arrays)}")
        value = np.asarray(arrays[key])
        if value.ndim != tensor.ndim or value.shape[1:] != tuple(
                d if d >= 0 else value.shape[i + 1] for i, d in enumerate(tensor.shape[1:])):
            raise ValidationError(f"calibration array has shape {list(value.shape)}, the input "
                                  f"{list(tensor.shape)}", file=file, tensor=tensor.name,
                                  hint="stack samples along axis 0")
        size = tensor.shape[0] if tensor.shape[0] > 0 else value.shape[0]
        columns[tensor.alias or tensor.name] = [value[i:i + size] for i in
                                                range(0, value.shape[0] - size + 1, size)]
    count = min(len(c) for c in columns.values())
    return [{k: c[i] for k, c in columns.items()} for i in range(count)]


def _run(args) -> int:
    from msc.codegen.files import save_npz
    from msc.codegen.qweight import pack_weights
    from msc.compression.quantize import quantize, save_plan

    paths = _outputs(args.output)
    _check_outputs(args, paths)
    graph, weights = load_model(args.model, options.input_info(args))
    batches = calibration_batches(graph, calib_arrays(args.calib), args.calib)
    if args.weight_only:
        held = calibration_batches(graph, calib_arrays(args.eval), args.eval) \
            if args.eval else None
        return weight_only.run_weight_only(args, graph, weights, batches, held, paths)
    config = {"method": args.method, "activation_dtype": args.activation_dtype,
              "target_sqnr": args.target_sqnr, "quantize_outputs": args.quantize_outputs,
              "fold_bn": not args.no_fold_bn,
              "per_layer": not args.no_per_layer, "executor": args.executor,
              "smooth": args.smooth,
              "exclude": {"names": args.exclude, "regex": args.exclude_regex}}
    qgraph, qweights, report = quantize(graph, weights, batches, config)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    qgraph.to_json(paths["graph"])
    save_npz(paths["weights"], pack_weights(qweights))  # int8 weights stay int8
    save_plan(report.plan, paths["plan"])
    report.save(paths["report"])
    print(report.table())
    print(f"\nwrote {paths['graph']} ({len(qgraph.node_names)} nodes), {paths['weights']}, "
          f"{paths['plan']}, {paths['report']}")
    return 0


COMMAND = ("int8-quantize a model (QDQ graph) and report which layers lose accuracy",
           _add_arguments, _run)
