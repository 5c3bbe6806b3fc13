"""Every conv of a zoo model alone: msc (which kernel path) vs onnxruntime, 1 thread, CPU time.

    .venv/bin/python benchmarks/conv_shapes.py [--models inception_v2 resnet50] [--top 15]

Each Conv (+ its Relu when that is its only reader) of the model (batch norms folded, as
benchmarks/speed.py runs it) becomes a one-node ONNX model; msc and onnxruntime run it
interleaved, best of 5 rounds of >= 50 ms, timed in time.thread_time (other processes' load does
not count). Rows: input, weight, stride, msc's kernel (pixel tiles, direct, GEMM path), ms,
GFLOP/s of both, ratio; sorted by the ms msc is behind, so the top is where time goes. Run
alone, onnxruntime pays its session overhead and NCHWc reorders on every node, which it does
not inside a whole model: small convs look better for msc here than in the model.
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import speed
from benchmarks.common import (
    best_interleaved,
    ms,
    msc_executable,
    ort_session,
    per_call,
    print_table,
)

COLUMNS = ["input", "weight", "stride", "msc path", "msc ms", "ORT ms", "msc GF/s", "ORT GF/s",
           "msc/ORT"]

def _nodes(model) -> list:
    """(conv node, nodes of its one-node model, output name) per Conv of ``model``."""
    readers: dict = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    out = []
    for node in model.graph.node:
        if node.op_type != "Conv":
            continue
        after = readers.get(node.output[0], [])
        if len(after) == 1 and after[0].op_type == "Relu":
            out.append((node, [node, after[0]], after[0].output[0]))
        else:
            out.append((node, [node], node.output[0]))
    return out


def _single(model, shapes: dict, nodes: list, output: str):
    from onnx import helper

    inits = {i.name: i for i in model.graph.initializer}
    conv = nodes[0]
    graph = helper.make_graph(
        nodes, "conv", [helper.make_tensor_value_info(conv.input[0], 1, shapes[conv.input[0]])],
        [helper.make_tensor_value_info(output, 1, shapes[output])],
        [inits[name] for name in conv.input[1:] if name in inits])
    one = helper.make_model(graph, opset_imports=model.opset_import)
    one.ir_version = model.ir_version
    return one


def _path(ex) -> str:
    names = {type(k).__name__ for k in _kernels(ex)}
    return next((label for cls, label in (("PixelConv2d", "pixel"), ("DirectConv2d", "direct"),
                                          ("_Conv2dNHWC", "gemm")) if cls in names), "other")


def _kernels(ex) -> list:
    found = []
    for program in getattr(ex, "programs", {}).values():
        for node in program.walk():
            fn = getattr(node, "fn", None)
            if fn is not None and type(fn).__module__.startswith("msc.backend.kernels"):
                found.append(fn)
    return found


def run_model(name: str, top: int) -> None:
    from onnx import numpy_helper, shape_inference

    from msc import relax

    model = shape_inference.infer_shapes(speed.zoo_case(name, False)["float"])
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in [*model.graph.value_info, *model.graph.input, *model.graph.output]}
    weights = {i.name: i for i in model.graph.initializer}
    rows = []
    for conv, nodes, output in _nodes(model):
        one = _single(model, shapes, nodes, output)
        ex = msc_executable(one)
        ours = relax.VirtualMachine(ex, relax.cpu(), num_threads=1)["main"]
        theirs = ort_session(one, 1)
        x = np.random.default_rng(0).random(shapes[conv.input[0]], dtype=np.float32)
        ours(x), theirs(x)
        best = best_interleaved({"msc": partial(ours, x), "ort": partial(theirs, x)}, 5,
                                lambda fn: per_call(fn, 0.05, time.thread_time), warm=False)
        t_msc, t_ort = best["msc"], best["ort"]
        w = numpy_helper.to_array(weights[conv.input[1]])
        flop = 2.0 * np.prod(shapes[output]) * np.prod(w.shape[1:])
        stride = next((list(a.ints) for a in conv.attribute if a.name == "strides"), [1, 1])
        rows.append((t_msc - t_ort, shapes[conv.input[0]], list(w.shape), stride, _path(ex),
                     t_msc, t_ort, flop))
    total_msc, total_ort = sum(r[5] for r in rows), sum(r[6] for r in rows)
    print(f"\n{name}: {len(rows)} convs alone, msc {total_msc * 1e3:.2f} ms, onnxruntime "
          f"{total_ort * 1e3:.2f} ms, msc/ORT {total_msc / total_ort:.3f}")
    print_table(COLUMNS, ([xs, ws, stride, path, ms(t_msc, digits=3), ms(t_ort, digits=3),
                           f"{flop / t_msc / 1e9:.0f}", f"{flop / t_ort / 1e9:.0f}",
                           f"{t_msc / t_ort:.2f}"]
                          for _, xs, ws, stride, path, t_msc, t_ort, flop
                          in sorted(rows, key=lambda r: -r[0])[:top]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["inception_v2", "resnet50"],
                        help="zoo models of benchmarks/speed.py")
    parser.add_argument("--top", type=int, default=15, help="rows per model")
    args = parser.parse_args()
    for name in args.models:
        run_model(name, args.top)


if __name__ == "__main__":
    main()
