"""msc's backend (relax.build + VirtualMachine) vs onnxruntime, TVM and torch: model latency.

    .venv/bin/python benchmarks/backend.py --all [--threads 1]      # the full report
    .venv/bin/python benchmarks/backend.py --zoo --threads 1 2      # 1 and 2 threads, scaling
    .venv/bin/python benchmarks/backend.py --quick                  # smoke run: squeezenet only
    .venv/bin/python benchmarks/backend.py [--models ...] [--zoo] [--tvm] [--gemm] [--builds]

Without flags: small hand-built models (mlp, convnet) against onnxruntime and torch. Models
are built from one layer list, so the three are the same network, and outputs are checked
against each other before timing.

``--zoo``: the onnx package's light model zoo (resnet50, densenet121, inception_v1,
squeezenet, shufflenet, bvlc_alexnet, vgg19) at batch 1 through frontends/onnx/api.py, against
onnxruntime. The shipped light models make most weights ``ConstantOfShape(0.02)``, which hides
any mix-up between channels; so each model is also copied with random weights (every
weight-producing constant and float initializer replaced, batch-norm variances and scales kept
positive) and its final Softmax dropped, so that the comparison is on the logits. Latency is
timed on the random copy; the table reports the difference from onnxruntime for both (relative
for the shipped weights, whose logits reach ~1e20). "msc build s" is the model's first build in
the process, with kernels from the disk cache when it has them (``--builds`` times cold builds).
``--tvm`` adds TVM 0.27 (``from_onnx``, ``relax.get_pipeline("zero")``, ``relax.build(mod,
target="llvm")``, ``time_evaluator``) on the random copy. TVM runs each model in its own child
process (it can segfault, and untuned it is far slower than onnxruntime), with fewer repeats
and a timeout per step; a model that crashes or times out shows "crash" / "timeout".
``--gemm``: a 1024x1024x1024 fp32 GEMM (benchmarks/gemm.py's msc and onnxruntime contenders)
in GFLOP/s, as % of the measured FMA peak and of the formula peak (benchmarks/peak.py).
``--builds``: resnet50 build times, msc cold / warm vs TVM (benchmarks/build_time.py).
``--all`` is ``--zoo --tvm --gemm --builds`` and ends with one summary.

Contenders are timed interleaved (one run of each per round, TVM included, so load from other
processes hits all alike) and each figure is the best of ``--repeats`` rounds of at least
``--min-time`` seconds. ``--threads N`` gives every contender N threads: MSC_NUM_THREADS for
msc, intra_op_num_threads for onnxruntime, TVM_NUM_THREADS for TVM, torch.set_num_threads.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import importlib.util
import itertools
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (
    ZOO,
    as_logits,
    best_interleaved,
    geomean,
    input_shape,
    light_model,
    ms,
    msc_session,
    ort_session,
    per_call,
    print_table,
    ratio,
    threads,
    with_random_weights,
)
from benchmarks.tvm_child import TvmChild
from msc import relax
from msc.relax import op as R

RNG = np.random.default_rng(0)


def at_threads(fn, count: int):
    """``fn`` run with ``count`` msc threads (one msc build serves every count)."""
    from msc.backend.runtime.threads import num_threads

    def run(*args):
        with num_threads(count):
            return fn(*args)
    return run


# ---------------------------------------------------------------------------------------------
# Models as layer lists: ("dense", w[K, N], b), ("conv", w[O, I, kh, kw], b, stride, pad),
# ("relu",), ("maxpool", k, stride), ("gap",) (global average pool + flatten).


def _weight(*shape):
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
    return (RNG.standard_normal(shape) * np.sqrt(2 / fan_in)).astype(np.float32)


def mlp(widths=(784, 512, 512, 10)):
    layers = []
    for k, n in itertools.pairwise(widths):
        layers += [("dense", _weight(n, k).T.copy(), _weight(n) * 0.1), ("relu",)]
    return layers[:-1]


def convnet():
    def conv(cin, cout, k, stride=1):
        return [("conv", _weight(cout, cin, k, k), _weight(cout) * 0.1, stride, k // 2),
                ("relu",)]
    return (conv(3, 32, 3, 2) + conv(32, 32, 3) + [("maxpool", 2, 2)] + conv(32, 64, 3)
            + conv(64, 64, 3) + [("maxpool", 2, 2)] + conv(64, 128, 3) + conv(128, 128, 1)
            + [("gap",), ("dense", _weight(10, 128).T.copy(), _weight(10) * 0.1)])


MODELS = {  # name: (layers, input shape)
    "mlp b1": (mlp(), (1, 784)),
    "mlp b64": (mlp(), (64, 784)),
    "convnet 1x3x112x112": (convnet(), (1, 3, 112, 112)),
    "convnet 8x3x112x112": (convnet(), (8, 3, 112, 112)),
}


# ---------------------------------------------------------------------------------------------
# The three builders.


def _msc_layer(bb, h, layer):
    kind = layer[0]
    if kind == "dense":
        h = bb.emit(R.matmul(h, relax.const(layer[1])))
        return bb.emit(R.add(h, relax.const(layer[2])))
    if kind == "conv":
        _, w, b, stride, pad = layer
        h = bb.emit(R.nn.conv2d(h, relax.const(w), strides=stride, padding=pad))
        return bb.emit(R.add(h, relax.const(b.reshape(1, -1, 1, 1))))
    if kind == "relu":
        return bb.emit(R.nn.relu(h))
    if kind == "maxpool":
        return bb.emit(R.nn.max_pool2d(h, layer[1], layer[2]))
    if kind == "gap":
        h = bb.emit(R.mean(h, axis=[2, 3]))
        return h
    raise ValueError(kind)


def build_msc(layers, shape):
    x = relax.Var("x", relax.TensorStructInfo(shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            h = x
            for layer in layers:
                h = _msc_layer(bb, h, layer)
            out = bb.emit_output(h)
        bb.emit_func_output(out)
    start = time.perf_counter()
    ex = relax.build(bb.get())
    build_s = time.perf_counter() - start
    f = relax.VirtualMachine(ex, relax.cpu())["main"]
    return (lambda x: f(x).numpy()), ex, build_s


def build_onnxruntime(layers, shape):
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, name = [], [], "x"

    def add(op, inputs, **attrs):
        out = f"t{len(nodes)}"
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    for i, layer in enumerate(layers):
        kind = layer[0]
        if kind in ("dense", "conv"):
            inits += [numpy_helper.from_array(layer[1], f"w{i}"),
                      numpy_helper.from_array(layer[2], f"b{i}")]
        if kind == "dense":
            name = add("Gemm", [name, f"w{i}", f"b{i}"])
        elif kind == "conv":
            k, pad = layer[1].shape[2], layer[4]
            name = add("Conv", [name, f"w{i}", f"b{i}"], kernel_shape=[k, k],
                       strides=[layer[3]] * 2, pads=[pad] * 4)
        elif kind == "relu":
            name = add("Relu", [name])
        elif kind == "maxpool":
            name = add("MaxPool", [name], kernel_shape=[layer[1]] * 2, strides=[layer[2]] * 2)
        elif kind == "gap":
            name = add("Flatten", [add("GlobalAveragePool", [name])])
    graph = helper.make_graph(
        nodes, "model", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return ort_session(model)


def build_torch(layers, shape):
    import torch

    torch.set_num_threads(threads())
    mods = []
    for layer in layers:
        kind = layer[0]
        if kind == "dense":
            lin = torch.nn.Linear(*layer[1].shape)
            lin.weight.data = torch.from_numpy(layer[1].T.copy())
            lin.bias.data = torch.from_numpy(layer[2])
            mods.append(lin)
        elif kind == "conv":
            w = layer[1]
            conv = torch.nn.Conv2d(w.shape[1], w.shape[0], w.shape[2], layer[3], layer[4])
            conv.weight.data, conv.bias.data = torch.from_numpy(w), torch.from_numpy(layer[2])
            mods.append(conv)
        elif kind == "relu":
            mods.append(torch.nn.ReLU())
        elif kind == "maxpool":
            mods.append(torch.nn.MaxPool2d(layer[1], layer[2]))
        elif kind == "gap":
            mods += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()]
    model = torch.nn.Sequential(*mods).eval()

    def run(x):
        with torch.inference_mode():
            return model(torch.from_numpy(x)).numpy()
    return run


def max_abs_diff(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float64) - b)))


# ---------------------------------------------------------------------------------------------
# Measurements.


def zoo_row(name: str, args) -> dict:
    """One zoo model: shipped-weights check, then msc / ORT / TVM interleaved on random weights,
    msc and ORT at every count of ``--threads`` in the same rounds ("msc@2": 2 threads)."""
    shipped = light_model(name)
    shape = input_shape(shipped)
    x = np.random.default_rng(1).random(shape, dtype=np.float32)
    model = with_random_weights(as_logits(shipped))
    msc_fn, ex, build_s = msc_session(model)  # first: its build time is not warmed by shipped's
    shipped = as_logits(shipped)
    ref = ort_session(shipped)(x)  # with 0.02 weights logits reach ~1e20: relative diff
    diff_shipped = max_abs_diff(msc_session(shipped)[0](x), ref) / np.max(np.abs(ref))
    fns = {"msc": msc_fn, "onnxruntime": ort_session(model)}
    ref = fns["onnxruntime"](x)
    row = {"rel diff 0.02": diff_shipped, "diff": max_abs_diff(fns["msc"](x), ref),
           "logit scale": float(np.max(np.abs(ref))), "build": build_s,
           "kernels": f"{ex.stats['kernels']['native']} native / {ex.stats['kernels']['numpy']}"
                      " numpy"}
    calls = {}
    for count in args.threads:
        ort_fn = ort_session(model, count)
        for who, fn in (("msc", at_threads(msc_fn, count)), ("onnxruntime", ort_fn)):
            calls[f"{who}@{count}"] = lambda fn=fn: fn(x)
    with tempfile.TemporaryDirectory() as workdir:
        tvm = TvmChild(model, x, args.tvm_timeout, workdir, threads()) if args.tvm else None
        row["seconds"] = interleaved(calls, tvm, args)
        for who in ("msc", "onnxruntime"):  # the first count's times, for the one-count table
            row["seconds"][who] = row["seconds"][f"{who}@{args.threads[0]}"]
        if tvm:
            row["tvm status"], row["tvm build"] = tvm.status, tvm.build_s
            row["tvm diff"] = None if tvm.output is None else max_abs_diff(tvm.output, ref)
            if tvm.error:
                print(f"  TVM {name}: {tvm.status}: {tvm.error}", file=sys.stderr)
            tvm.close()
    return row


def interleaved(fns: dict, tvm: TvmChild | None, args) -> dict:
    """Best seconds per call of each contender; TVM joins the first ``--tvm-repeats`` rounds."""
    best = dict.fromkeys(fns, float("inf"))
    tvm_times = []
    for round_ in range(args.repeats):
        for who, fn in fns.items():
            best[who] = min(best[who], per_call(fn, args.min_time))
        if tvm and round_ < args.tvm_repeats:
            tvm_times.append(tvm.timed(args.min_time))
    if tvm:
        done = [t for t in tvm_times if t is not None]
        best["tvm"] = min(done) if done and not tvm.status else None
    return best


def model_row(name: str, args) -> dict:
    """A hand-built model: msc vs onnxruntime vs torch, outputs checked before timing."""
    layers, shape = MODELS[name]
    msc_fn, ex, build_s = build_msc(layers, shape)
    fns = {"msc": msc_fn, "onnxruntime": build_onnxruntime(layers, shape),
           "torch": build_torch(layers, shape)}
    x = RNG.random(shape, dtype=np.float32)
    ref = fns["onnxruntime"](x)
    for who, fn in fns.items():
        np.testing.assert_allclose(fn(x), ref, rtol=1e-3, atol=1e-3, err_msg=who)
    best = interleaved({who: (lambda fn=fn: fn(x)) for who, fn in fns.items()}, None, args)
    k = ex.stats["kernels"]
    return {"seconds": best, "build": build_s,
            "kernels": f"{k['native']} native / {k['numpy']} numpy",
            "peak_mb": ex.stats["memory"].get("peak_bytes", 0) / 2 ** 20}


def gemm_row(args, n: int = 1024) -> dict:
    """GFLOP/s of an n^3 fp32 GEMM (msc, onnxruntime) and of the FMA peak probe, interleaved."""
    from benchmarks.gemm import run_msc, run_onnxruntime
    from benchmarks.peak import describe_host, fma_probe, formula_peak

    rng = np.random.default_rng(0)
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    probe = fma_probe()
    fns = {"msc": run_msc(a, b), "onnxruntime": run_onnxruntime(a, b), "peak": probe.run}
    seconds = best_interleaved(fns, args.repeats, lambda fn: per_call(fn, args.min_time))
    rate = {who: 2.0 * n ** 3 / seconds[who] / 1e9 for who in ("msc", "onnxruntime")}
    # The probe runs on one core; N threads can at best reach N times its rate.
    rate["measured peak"] = probe.flops / seconds["peak"] / 1e9 * threads()
    rate["formula peak"] = (formula_peak() or float("nan")) * threads()
    return {"n": n, "gflops": rate, "host": describe_host()}


# ---------------------------------------------------------------------------------------------
# Report.


MODEL_COLUMNS = ["model", "msc ms", "onnxruntime ms", "torch ms", "msc / ORT", "msc / torch",
                 "kernels", "build s", "planned MB"]


def _model_cells(name: str, r: dict) -> list[str]:
    s = r["seconds"]
    return [name, ms(s["msc"]), ms(s["onnxruntime"]), ms(s["torch"]),
            ratio(s["msc"], s["onnxruntime"]), ratio(s["msc"], s["torch"]), r["kernels"],
            f"{r['build']:.2f}", f"{r['peak_mb']:.1f}"]


def print_models(rows: dict) -> None:
    print_table(MODEL_COLUMNS, (_model_cells(name, r) for name, r in rows.items()))


ZOO_COLUMNS = ["model", "msc ms", "ORT ms", "TVM ms", "msc / ORT", "msc / TVM",
               "0.02 weights: max rel diff", "random: max abs diff", "random: max abs logit",
               "TVM random: max abs diff", "msc build s", "TVM build s", "msc kernels"]


def _tvm_cell(r) -> str:
    if "tvm status" not in r:
        return "-"
    return r["tvm status"] or ms(r["seconds"]["tvm"])


def _zoo_cells(name: str, r: dict) -> list[str]:
    s, tvm = r["seconds"], r["seconds"].get("tvm")
    tvm_diff, tvm_build = r.get("tvm diff"), r.get("tvm build")
    return [name, ms(s["msc"]), ms(s["onnxruntime"]), _tvm_cell(r),
            ratio(s["msc"], s["onnxruntime"]), ratio(s["msc"], tvm),
            f"{r['rel diff 0.02']:.1e}", f"{r['diff']:.1e}", f"{r['logit scale']:.1f}",
            "-" if tvm_diff is None else f"{tvm_diff:.1e}", f"{r['build']:.2f}",
            "-" if tvm_build is None else f"{tvm_build:.1f}", r["kernels"]]


def print_zoo(rows: dict) -> None:
    print_table(ZOO_COLUMNS, (_zoo_cells(name, r) for name, r in rows.items()))
    ratios = {pair: [s[pair[0]] / s[pair[1]] for s in (r["seconds"] for r in rows.values())
                     if s.get(pair[0]) and s.get(pair[1])]
              for pair in [("msc", "onnxruntime"), ("msc", "tvm"), ("tvm", "onnxruntime")]}
    print()
    for (a, b), values in ratios.items():
        if values:
            print(f"geomean {a} / {b}: {geomean(values):.2f}x over {len(values)} of "
                  f"{len(rows)} models")


def print_scaling(rows: dict, counts: list[int]) -> None:
    """msc / ORT at every thread count, and each one's speed-up from the first count."""
    first, cols = counts[0], []
    for t in counts:
        cols += [f"{t}T msc ms", f"{t}T ORT ms", f"{t}T msc / ORT"]
    cols += [f"{who} {first}->{t}T" for t in counts[1:] for who in ("msc", "ORT")]
    ratios = {t: [] for t in counts}

    def cells(name: str, s: dict) -> list[str]:
        out = [name]
        for t in counts:
            out += [ms(s[f"msc@{t}"]), ms(s[f"onnxruntime@{t}"]),
                    ratio(s[f"msc@{t}"], s[f"onnxruntime@{t}"])]
            ratios[t].append(s[f"msc@{t}"] / s[f"onnxruntime@{t}"])
        return out + [ratio(s[f"{who}@{first}"], s[f"{who}@{t}"]) for t in counts[1:]
                      for who in ("msc", "onnxruntime")]
    print_table(["model", *cols], (cells(name, r["seconds"]) for name, r in rows.items()))
    print()
    for t, values in ratios.items():
        print(f"geomean msc / ORT at {t} thread(s): {geomean(values):.2f}x, worst "
              f"{max(values):.2f}x over {len(values)} models")


def print_gemm(g: dict) -> None:
    rate, n = g["gflops"], g["n"]
    print(f"GEMM {n}x{n}x{n} fp32, {threads()} thread(s); {g['host']}")
    for who in ("msc", "onnxruntime"):
        measured, formula = (100 * rate[who] / rate[p] for p in ("measured peak", "formula peak"))
        print(f"  {who:<11} {rate[who]:6.1f} GFLOP/s = {measured:3.0f}% of measured peak, "
              f"{formula:3.0f}% of formula peak")
    print(f"  measured FMA peak {rate['measured peak']:.1f} GFLOP/s (benchmarks/peak.py); "
          f"formula 2 FMA pipes x lanes x 2 x nominal clock = {rate['formula peak']:.1f}")


def print_builds(builds: dict, repeats: int) -> None:
    print(f"resnet50 build (best of {repeats}, fresh process each): " + ", ".join(
        f"{k} {v:.2f} s" if v is not None else f"{k} n/a" for k, v in builds.items()))
    if builds["tvm"] and builds["msc cold"]:
        print(f"  msc cold / TVM = {builds['msc cold'] / builds['tvm']:.2f}x, "
              f"msc warm / TVM = {builds['msc warm'] / builds['tvm']:.2f}x")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=None,
                        help=f"hand-built models (default: all of {list(MODELS)}, none with "
                             "--all/--quick)")
    parser.add_argument("--zoo", action="store_true", help="add the onnx light model zoo")
    parser.add_argument("--zoo-models", nargs="*", default=ZOO, help="zoo subset")
    parser.add_argument("--tvm", action="store_true", help="add TVM 0.27 to the zoo")
    parser.add_argument("--gemm", action="store_true", help="1024^3 GEMM vs FMA peak")
    parser.add_argument("--builds", action="store_true", help="resnet50 cold/warm build vs TVM")
    parser.add_argument("--all", action="store_true", help="--zoo --tvm --gemm --builds")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: zoo squeezenet only, one repeat, no TVM")
    parser.add_argument("--threads", type=int, nargs="+", default=[1],
                        help="threads for every contender; several counts (--threads 1 2) "
                             "time the zoo at each in the same rounds, with a scaling table")
    parser.add_argument("--repeats", type=int, default=7, help="interleaved rounds")
    parser.add_argument("--min-time", type=float, default=0.2, help="seconds per timed run")
    parser.add_argument("--tvm-repeats", type=int, default=2, help="rounds TVM joins")
    parser.add_argument("--tvm-timeout", type=float, default=600,
                        help="seconds TVM may take per step (build, or one timed run)")
    parser.add_argument("--build-repeats", type=int, default=2, help="fresh-process builds")
    args = parser.parse_args(argv)
    if args.all:
        args.zoo = args.tvm = args.gemm = args.builds = True
    if args.quick:
        args.zoo, args.tvm, args.zoo_models, args.repeats, args.min_time = (
            True, False, ["squeezenet"], 1, 0.01)
    if args.models is None:
        args.models = [] if args.all or args.quick else list(MODELS)
    if args.tvm and importlib.util.find_spec("tvm") is None:
        print("(TVM not installed: no TVM column)", file=sys.stderr)
        args.tvm = False
    return args


def main() -> None:
    args = parse_args()
    os.environ["MSC_NUM_THREADS"] = str(args.threads[0])  # all but the zoo: the first count
    models = {name: model_row(name, args) for name in args.models}
    zoo = {}
    for name in args.zoo_models if args.zoo else []:
        zoo[name] = zoo_row(name, args)
        print(f"  done {name}: {zoo[name]['seconds']}", file=sys.stderr, flush=True)
    gemm = gemm_row(args) if args.gemm else None
    if args.builds:
        from benchmarks.build_time import build_times

        builds = build_times("light_resnet50", args.build_repeats, args.threads[0])
    tvm = f" (TVM: {args.tvm_repeats})" if args.tvm else ""
    print(f"{args.threads[0]} thread(s); best of {args.repeats} interleaved rounds{tvm} "
          f"of >= {args.min_time} s")
    for title, rows, show in [("hand-built models", models, print_models),
                              ("onnx light zoo, batch 1", zoo, print_zoo)]:
        if rows:
            print(f"\n## {title}\n")
            show(rows)
    if zoo and len(args.threads) > 1:
        print(f"\n## onnx light zoo, thread scaling (load {os.getloadavg()[0]:.2f})\n")
        print_scaling(zoo, args.threads)
    if gemm:
        print()
        print_gemm(gemm)
    if args.builds:
        print()
        print_builds(builds, args.build_repeats)


if __name__ == "__main__":
    main()
