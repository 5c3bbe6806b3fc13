"""``msc bench MODEL``: msc's latency next to the model's own runtime (onnxruntime / torch)."""

from __future__ import annotations

import os
import statistics
import time

from ..errors import ValidationError
from ..graph.files import write_atomic
from ..progress import progress
from . import options
from .loaders import KINDS, open_model, split_torch_spec
from .runners import msc_runner, reference_name, reference_runner
from .stages import Stages

NAME = "bench"
HELP = "time msc against onnxruntime (ONNX) or torch (torch models): a latency table"
EPILOG = """examples:
  msc bench model.onnx                         # msc vs onnxruntime
  msc bench model.onnx --threads 1 --repeat 10
  msc bench net.py:make_model --input-info "x:8,3,224,224"   # msc vs torch
  msc bench model.onnx --profile --profile-json out/profile.json   # time per joint
  msc view model.onnx --overlay out/profile.json                    # ... drawn on the graph
  msc bench model.onnx --against-ort           # msc's profile beside onnxruntime's, by node
Each round times every runtime in turn (so load from other processes hits all alike) for at
least --min-time seconds; the table shows the best and median round, in ms per call, and
msc / <runtime> (below 1.00x: msc is faster). --profile then runs msc --repeat times with
a clock around every kernel (each native kernel by itself) and prints ms, share and calls per
joint, sorted by time; --profile-json writes the overlay of `msc view --overlay`: ms per run
of each joint, a collapsed module showing the sum of its joints, on a log scale when the
times span decades. --against-ort (ONNX models) also profiles onnxruntime
(enable_profiling) and joins the two by ONNX node: groups of nodes that one msc joint or one
onnxruntime node covers, with ms per run in each, the groups where msc loses most first.
"""


def add_arguments(p) -> None:
    p.epilog = EPILOG
    options.add_model(p)
    options.add_inputs(p)
    options.add_threads(p)
    p.add_argument("--repeat", type=options.positive_int, default=5, metavar="R",
                   help="rounds; the best one counts (default 5)")
    p.add_argument("--min-time", type=options.seconds, default=0.2, metavar="SECONDS",
                   help="time of one round of one runtime (default 0.2)")
    p.add_argument("--profile", action="store_true",
                   help="also time every joint of msc's plan: a table sorted by time")
    p.add_argument("--profile-json", metavar="JSON",
                   help="write the profile as the overlay of `msc view --overlay` (ms per "
                        "run of each joint; implies --profile; example: out/profile.json)")
    p.add_argument("--against-ort", action="store_true",
                   help="profile onnxruntime too and join both profiles by ONNX node, the "
                        "nodes where msc loses most first (ONNX models; implies --profile)")
    p.add_argument("--profile-top", type=options.positive_int, default=25, metavar="N",
                   help="rows of the profile table (default 25)")


def timed(fn, min_time: float) -> float:
    """Seconds per call, averaged over at least ``min_time`` seconds (and one call)."""
    calls, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < min_time or not calls:
        fn()
        calls += 1
    return elapsed / calls


def measure(calls: dict, repeat: int, min_time: float) -> dict[str, list[float]]:
    """Seconds per call of each runtime, one entry per round; rounds interleave runtimes."""
    for fn in calls.values():
        fn()  # warm up: lazy kernels, buffers, caches
    seconds = {who: [] for who in calls}
    for _ in progress(range(repeat), desc="bench", unit="round"):
        for who, fn in calls.items():
            seconds[who].append(timed(fn, min_time))
    return seconds


def format_table(seconds: dict[str, list[float]]) -> str:
    base = min(seconds["msc"])
    rows = [f"{'runtime':<14}{'best ms':>10}{'median ms':>11}{'msc / this':>12}"]
    for who, values in seconds.items():
        best = min(values)
        rows.append(f"{who:<14}{best * 1e3:>10.3f}{statistics.median(values) * 1e3:>11.3f}"
                    f"{base / best:>11.2f}x")
    return "\n".join(rows)


def _reference(model, threads):
    """The model's own runtime, or None (said so) when it has none or it is not installed."""
    try:
        reference = reference_runner(model, threads)
    except ValidationError as err:  # onnxruntime not installed: time msc alone
        print(f"({err}; msc only)")
        return None
    if reference is None:
        print(f"({model.kind} model: no runtime of its own to compare with; msc only)")
    return reference


def run(args) -> int:
    with Stages("msc bench", ["load", "build"]) as stage:
        stage("load")
        if args.against_ort:
            _check_onnx(args.model)
        model = open_model(args.model, options.input_info(args))
        arrays = options.model_inputs(args, model)
        stage("build")
        msc_fn, executable = msc_runner(model, args.threads)
        reference = _reference(model, args.threads)
    calls = {"msc": lambda: msc_fn(arrays)}
    if reference is not None:
        calls[reference_name(model)] = lambda: reference(arrays)
    shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in arrays.items())
    threads = args.threads or "default"
    print(f"{model.spec}: inputs {shapes}; threads {threads}; best of {args.repeat}")
    print(format_table(measure(calls, args.repeat, args.min_time)))
    if args.profile or args.profile_json or args.against_ort:
        _profile(args, model, executable, arrays)
    return 0


def _profile(args, model, executable, arrays: dict) -> None:
    """The per-joint table, and the overlay JSON keyed by the graph's joint names."""
    from .. import relax

    vm = relax.VirtualMachine(executable, relax.cpu(), num_threads=args.threads)
    keys = [t.alias or t.name for t in model.graph.get_inputs()]
    report = vm.profile(*[arrays[k] for k in keys], number=args.repeat)
    print(f"\nprofile of msc ({args.repeat} runs, kernels one by one):")
    print(report.table(top=args.profile_top))
    if args.against_ort:
        _against_ort(args, model, report, arrays)
    if args.profile_json:
        from ..viewer.overlay import Overlay, overlay_json

        # a collapsed module shows the time of its joints together
        overlay = Overlay("ms per run", report.to_dict(model.graph.node_names), group="sum")
        write_atomic(args.profile_json, overlay_json(overlay))
        print(f"wrote {args.profile_json} (msc view {args.model} --overlay "
              f"{args.profile_json})")


def _check_onnx(spec: str) -> None:
    """--against-ort needs an ONNX file: said before the model is loaded and built."""
    ext = os.path.splitext(spec)[1].lower()
    if split_torch_spec(spec) or KINDS.get(ext) != "onnx":
        raise ValidationError(f"--against-ort profiles onnxruntime on the ONNX file; {spec} is "
                              "not one", hint="give an .onnx file")


def _against_ort(args, model, report, arrays: dict) -> None:
    import onnx

    from .profile_join import against_ort, format_rows

    original = onnx.load(model.path, load_external_data=False)
    rows = against_ort(model.path, original, model.graph, report, arrays, args.threads,
                       args.repeat)
    print(f"\nmsc beside onnxruntime's profile ({args.repeat} runs each), by ONNX node:")
    print(format_rows(rows, top=args.profile_top))
