"""The CNN blocks mobile models are made of, each alone: msc vs onnxruntime on one ONNX model.

    .venv/bin/python benchmarks/blocks.py [--threads 1 2] [--only dw se] [--rounds 5]
    .venv/bin/python benchmarks/blocks.py --models a.onnx b.onnx     # whole models, 1 thread

Blocks (random weights, batch 1, MobileNetV2/V3, EfficientNet-B0, ShuffleNetV2, RegNet and
SqueezeNet channel counts and resolutions): depthwise 3x3 / 5x5 convs at stride 1 and 2 (with
the folded batch norm's bias and ReLU6 / hard-swish after them, as the models run them; also
on the 2x2-4x4 planes of small inputs, and ConvNeXt's 7x7), dense convs with short sums on
small planes (RepVGG's, PoolFormer's),
squeeze-excite (global average pool -> 1x1 -> ReLU -> 1x1 -> hard-sigmoid / sigmoid ->
multiply), hard-swish, channel shuffle (reshape -> transpose -> reshape), grouped 3x3 convs
(group width 8-64), the inverted-residual block (1x1 expand + dw + 1x1 project + residual) and
SqueezeNet's fire module. Each block is one ONNX model that both runtimes load; msc's output
is checked against onnxruntime's first. For every thread count the contenders run
interleaved, ``--rounds`` rounds of >= 50 ms of calls each, and a contender's time is its
fastest single call in wall time (the thread count matters, so CPU time would mislead; on a
loaded machine the fastest call is the one no other process interrupted). The table is sorted by how far msc is behind.

``--models`` times whole ONNX models (a random input of the model's shape) at one thread in
CPU time (``time.thread_time``: onnxruntime with one intra-op thread and msc with one thread
both run on the calling thread, so other processes' load does not count), averaged over
>= 0.2 s a round, best of ``--rounds`` interleaved rounds.
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (
    best_interleaved,
    call_times,
    geomean,
    msc_executable,
    msc_runner,
    ort_session,
    per_call,
    print_table,
)

OPSET = 17


class _Graph:
    """An ONNX graph under construction: nodes, random initializers, fresh names."""

    def __init__(self, seed: int = 0):
        self.nodes, self.inits, self.rng, self.count = [], [], np.random.default_rng(seed), 0

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def const(self, array) -> str:
        from onnx import numpy_helper

        name = self.name("w")
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type: str, inputs: list, **attrs) -> str:
        from onnx import helper

        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> str:
        fan = cin // groups * k * k
        w = self.rng.standard_normal((cout, cin // groups, k, k)).astype(np.float32)
        b = self.rng.standard_normal(cout).astype(np.float32) * 0.1
        return self.op("Conv", [x, self.const(w / np.float32(np.sqrt(fan))), self.const(b)],
                       kernel_shape=[k, k], strides=[stride, stride], group=groups,
                       pads=[k // 2] * 4)

    def act(self, x: str, kind: str | None) -> str:
        if kind == "relu":
            return self.op("Relu", [x])
        if kind == "relu6":
            return self.op("Clip", [x, self.const(np.float32(0)), self.const(np.float32(6))])
        if kind == "hswish":
            return self.op("HardSwish", [x])
        if kind == "swish":
            return self.op("Mul", [x, self.op("Sigmoid", [x])])
        return x

    def model(self, x_shape: list, out: str):
        from onnx import TensorProto, helper

        graph = helper.make_graph(
            self.nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def depthwise(c: int, hw: int, k: int, stride: int, act: str):
    g = _Graph()
    return g.model([1, c, hw, hw], g.act(g.conv("x", c, c, k, stride, groups=c), act))


def dense(c: int, hw: int, out: int, k: int, act: str | None, stride: int = 1):
    g = _Graph()
    return g.model([1, c, hw, hw], g.act(g.conv("x", c, out, k, stride), act))


def squeeze_excite(c: int, hw: int, gate: str):
    g = _Graph()
    pooled = g.op("GlobalAveragePool", ["x"])
    mid = g.act(g.conv(pooled, c, max(8, c // 4), 1), "relu")
    scale = g.conv(mid, max(8, c // 4), c, 1)
    scale = g.op("HardSigmoid", [scale], alpha=1 / 6, beta=0.5) if gate == "hsig" \
        else g.op("Sigmoid", [scale])
    return g.model([1, c, hw, hw], g.op("Mul", ["x", scale]))


def hard_swish(c: int, hw: int):
    g = _Graph()
    return g.model([1, c, hw, hw], g.op("HardSwish", ["x"]))


def unary(c: int, hw: int, kind: str):
    """One activation pass: an ONNX unary op, swish (x * sigmoid(x)) or erf-gelu written out
    (0.5 x (1 + erf(x / sqrt 2)), as exporters at opset 17 write it; msc fuses it)."""
    g = _Graph()
    if kind == "gelu":
        erf = g.op("Erf", [g.op("Mul", ["x", g.const(np.float32(2 ** -0.5))])])
        half = g.op("Mul", ["x", g.const(np.float32(0.5))])
        return g.model([1, c, hw, hw], g.op("Mul", [half, g.op("Add", [erf, g.const(
            np.float32(1))])]))
    return g.model([1, c, hw, hw], g.act("x", kind) if kind == "swish" else g.op(kind, ["x"]))


def channel_shuffle(c: int, hw: int, groups: int = 2):
    g = _Graph()
    r = g.op("Reshape", ["x", g.const(np.array([1, groups, c // groups, hw, hw], np.int64))])
    t = g.op("Transpose", [r], perm=[0, 2, 1, 3, 4])
    return g.model([1, c, hw, hw], g.op("Reshape", [t, g.const(np.array([1, c, hw, hw],
                                                                          np.int64))]))


def grouped(c: int, hw: int, width: int, stride: int = 1):
    g = _Graph()
    return g.model([1, c, hw, hw], g.act(g.conv("x", c, c, 3, stride, groups=c // width),
                                         "relu"))


def inverted_residual(c: int, hw: int, expand: int, k: int, act: str, se: bool = False):
    g = _Graph()
    e = c * expand
    y = g.act(g.conv("x", c, e, 1), act)
    y = g.act(g.conv(y, e, e, k, groups=e), act)
    if se:
        pooled = g.op("GlobalAveragePool", [y])
        s = g.conv(g.act(g.conv(pooled, e, e // 4, 1), "relu"), e // 4, e, 1)
        y = g.op("Mul", [y, g.op("HardSigmoid", [s], alpha=1 / 6, beta=0.5)])
    return g.model([1, c, hw, hw], g.op("Add", [g.conv(y, e, c, 1), "x"]))


def fire(c: int, hw: int, squeeze: int, expand: int):
    g = _Graph()
    s = g.act(g.conv("x", c, squeeze, 1), "relu")
    a, b = g.act(g.conv(s, squeeze, expand, 1), "relu"), g.act(g.conv(s, squeeze, expand, 3),
                                                                "relu")
    return g.model([1, c, hw, hw], g.op("Concat", [a, b], axis=1))


# (family, label, input shape, model maker)
BLOCKS = [
    ("dw", "dw3x3 s1 32@112 relu6 (mbv2)", partial(depthwise, 32, 112, 3, 1, "relu6")),
    ("dw", "dw3x3 s1 144@56 relu6 (mbv2)", partial(depthwise, 144, 56, 3, 1, "relu6")),
    ("dw", "dw3x3 s1 384@14 relu6 (mbv2)", partial(depthwise, 384, 14, 3, 1, "relu6")),
    ("dw", "dw3x3 s1 960@7 relu6 (mbv2)", partial(depthwise, 960, 7, 3, 1, "relu6")),
    ("dw", "dw3x3 s1 480@14 hswish (mbv3)", partial(depthwise, 480, 14, 3, 1, "hswish")),
    ("dw", "dw3x3 s2 96@112 relu6 (mbv2)", partial(depthwise, 96, 112, 3, 2, "relu6")),
    ("dw", "dw3x3 s2 144@56 relu6 (mbv2)", partial(depthwise, 144, 56, 3, 2, "relu6")),
    ("dw", "dw3x3 s2 240@28 hswish (mbv3)", partial(depthwise, 240, 28, 3, 2, "hswish")),
    ("dw", "dw5x5 s1 240@28 swish (effb0)", partial(depthwise, 240, 28, 5, 1, "swish")),
    ("dw", "dw5x5 s1 672@14 swish (effb0)", partial(depthwise, 672, 14, 5, 1, "swish")),
    ("dw", "dw5x5 s1 1152@7 swish (effb0)", partial(depthwise, 1152, 7, 5, 1, "swish")),
    ("dw", "dw5x5 s1 120@28 relu (mbv3)", partial(depthwise, 120, 28, 5, 1, "relu")),
    ("dw", "dw5x5 s2 144@56 swish (effb0)", partial(depthwise, 144, 56, 5, 2, "swish")),
    ("dw", "dw5x5 s2 672@14 swish (effb0)", partial(depthwise, 672, 14, 5, 2, "swish")),
    ("dw", "dw5x5 s2 72@56 relu (mbv3)", partial(depthwise, 72, 56, 5, 2, "relu")),
    ("dw", "dw3x3 s1 960@2 relu6 (mbv2 at 64 px)", partial(depthwise, 960, 2, 3, 1, "relu6")),
    ("dw", "dw3x3 s2 576@4 relu6 (mbv2 at 64 px)", partial(depthwise, 576, 4, 3, 2, "relu6")),
    ("dw", "dw5x5 s1 672@4 swish (effb0 at 128 px)", partial(depthwise, 672, 4, 5, 1, "swish")),
    ("dw", "dw7x7 s1 96@14 (convnext)", partial(depthwise, 96, 14, 7, 1, None)),
    ("dw", "dw7x7 s1 768@7 (convnext)", partial(depthwise, 768, 7, 7, 1, None)),
    ("se", "SE 72@28 hsig (mbv3)", partial(squeeze_excite, 72, 28, "hsig")),
    ("se", "SE 480@14 hsig (mbv3)", partial(squeeze_excite, 480, 14, "hsig")),
    ("se", "SE 960@7 hsig (mbv3)", partial(squeeze_excite, 960, 7, "hsig")),
    ("se", "SE 240@28 sigmoid (effb0)", partial(squeeze_excite, 240, 28, "sig")),
    ("se", "SE 672@14 sigmoid (effb0)", partial(squeeze_excite, 672, 14, "sig")),
    ("act", "hard-swish 16@112", partial(hard_swish, 16, 112)),
    ("act", "hard-swish 240@28", partial(hard_swish, 240, 28)),
    ("act", "hard-swish 960@7", partial(hard_swish, 960, 7)),
    ("act", "swish 240@28 (effb0)", partial(unary, 240, 28, "swish")),
    ("act", "swish 16@64 (nfnet's at batch 16)", partial(unary, 16, 64, "swish")),
    ("act", "gelu 16@64 (nfnet's at batch 16)", partial(unary, 16, 64, "gelu")),
    ("act", "sigmoid 240@28", partial(unary, 240, 28, "Sigmoid")),
    ("act", "tanh 240@28", partial(unary, 240, 28, "Tanh")),
    ("act", "exp 240@28", partial(unary, 240, 28, "Exp")),
    ("shuffle", "shuffle 116@28 g2 (shufflenetv2)", partial(channel_shuffle, 116, 28)),
    ("shuffle", "shuffle 232@14 g2 (shufflenetv2)", partial(channel_shuffle, 232, 14)),
    ("grouped", "grouped 3x3 64@56 gw8 (regnetx)", partial(grouped, 64, 56, 8)),
    ("grouped", "grouped 3x3 152@28 gw8 (regnetx)", partial(grouped, 152, 28, 8)),
    ("grouped", "grouped 3x3 192@28 gw16", partial(grouped, 192, 28, 16)),
    ("grouped", "grouped 3x3 384@14 gw32", partial(grouped, 384, 14, 32)),
    ("grouped", "grouped 3x3 576@14 gw64 (regnety)", partial(grouped, 576, 14, 64)),
    ("grouped", "grouped 3x3 s2 128@56 gw16", partial(grouped, 128, 56, 16, 2)),
    ("dense", "conv3x3 24->24@8 relu (repvgg)", partial(dense, 24, 8, 24, 3, "relu")),
    ("dense", "conv1x1 16->64@8 (poolformer mlp)", partial(dense, 16, 8, 64, 1, None)),
    ("dense", "conv3x3 s2 16->32@8 (poolformer embed)", partial(dense, 16, 8, 32, 3, None, 2)),
    ("block", "inv-res 24@56 x6 dw3 relu6 (mbv2)", partial(inverted_residual, 24, 56, 6, 3,
                                                           "relu6")),
    ("block", "inv-res 96@14 x6 dw3 relu6 (mbv2)", partial(inverted_residual, 96, 14, 6, 3,
                                                           "relu6")),
    ("block", "inv-res 40@28 x3 dw5 SE relu (mbv3)", partial(inverted_residual, 40, 28, 3, 5,
                                                             "relu", True)),
    ("block", "inv-res 80@14 x6 dw3 hswish (mbv3)", partial(inverted_residual, 80, 14, 6, 3,
                                                            "hswish")),
    ("block", "inv-res 112@14 x6 dw3 SE hswish (mbv3)",
     partial(inverted_residual, 112, 14, 6, 3, "hswish", True)),
    ("block", "fire2 96@55 16->64+64 (squeezenet)", partial(fire, 96, 55, 16, 64)),
    ("block", "fire5 256@27 32->128+128", partial(fire, 256, 27, 32, 128)),
    ("block", "fire9 512@13 64->256+256", partial(fire, 512, 13, 64, 256)),
]


def _input(model) -> np.ndarray:
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    return np.random.default_rng(1).standard_normal(dims, dtype=np.float32)


def measure(label: str, model, threads: list[int], rounds: int) -> dict:
    """{threads: (msc s, ORT s)} after checking msc's output against onnxruntime's."""
    ex = msc_executable(model)
    x = _input(model)
    fns = {}
    for count in threads:
        fns[f"msc{count}"], fns[f"ort{count}"] = msc_runner(ex, count), ort_session(model, count)
    want, got = fns[f"ort{threads[0]}"](x), fns[f"msc{threads[0]}"](x)
    if not np.allclose(got, want, rtol=1e-3, atol=1e-3):
        raise SystemExit(f"{label}: msc differs from onnxruntime by "
                         f"{np.abs(got - want).max():.3g}")
    best = best_interleaved({k: partial(f, x) for k, f in fns.items()}, rounds,
                            lambda fn: min(call_times(fn, 0.05)))
    return {count: (best[f"msc{count}"], best[f"ort{count}"]) for count in threads}


def run_models(paths: list[str], rounds: int) -> None:
    """msc / onnxruntime of whole models at one thread, CPU time (see the module doc)."""
    import onnx

    rows = []
    for path in paths:
        model = onnx.load(path)
        ex = msc_executable(model)
        x = _input(model)
        ours, theirs = msc_runner(ex, 1), ort_session(model, 1)
        want = theirs(x)
        err = float(np.abs(ours(x) - want).max() / max(float(np.abs(want).max()), 1e-30))
        best = best_interleaved({"msc": partial(ours, x), "ort": partial(theirs, x)}, rounds,
                                lambda fn: per_call(fn, 0.2, time.thread_time))
        rows.append([Path(path).stem, f"{best['msc'] * 1e3:.2f}", f"{best['ort'] * 1e3:.2f}",
                     f"{best['msc'] / best['ort']:.2f}", f"{err:.1e}"])
        print("  ".join(rows[-1]), flush=True)
    print()
    print_table(["model", "msc ms", "ORT ms", "msc/ORT", "max err / max|ORT|"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--only", nargs="+",
                        help="families: dw se act shuffle grouped dense block")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--models", nargs="+", help="ONNX files: whole models, 1 thread")
    args = parser.parse_args()
    if args.models:
        run_models(args.models, args.rounds)
        return
    rows, ratios = [], {count: {} for count in args.threads}
    for family, label, make in BLOCKS:
        if args.only and family not in args.only:
            continue
        seen = measure(label, make(), args.threads, args.rounds)
        cells = [label]
        for count in args.threads:
            ours, theirs = seen[count]
            ratios[count].setdefault(family, []).append(ours / theirs)
            cells += [f"{ours * 1e6:.0f}", f"{theirs * 1e6:.0f}", f"{ours / theirs:.2f}"]
        rows.append((seen[args.threads[0]][0] / seen[args.threads[0]][1], cells))
        print("  ".join(cells), flush=True)
    columns = ["block"] + [f"{name} {count}T" for count in args.threads
                           for name in ("msc us", "ORT us", "msc/ORT")]
    print()
    print_table(columns, (cells for _, cells in sorted(rows, key=lambda r: -r[0])))
    print()
    for count in args.threads:
        per = {family: geomean(values) for family, values in ratios[count].items()}
        every = geomean([v for values in ratios[count].values() for v in values])
        print(f"{count} thread(s): geomean msc/ORT {every:.2f}; " +
              ", ".join(f"{family} {value:.2f}" for family, value in per.items()))


if __name__ == "__main__":
    main()
