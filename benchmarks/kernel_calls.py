"""What one kernel call costs: called from Python vs inside a plan's native chain, vs
onnxruntime's per-node cost, on the small planes of the real corpus at batch 1.

    .venv/bin/python benchmarks/kernel_calls.py [--nodes 16] [--rounds 5]

Each row is one ONNX model of ``--nodes`` identical nodes in a row (a conv, depthwise conv,
pool or MatMul whose output feeds the next; random weights, batch 1, one thread), small enough
that what a runtime pays around each kernel shows: the corpus's toy CNNs run 8x8-16x16 planes
of 16-64 channels. Contenders, interleaved, each its fastest single call over ``--rounds``
rounds of >= 50 ms of calls:

- ``chain``: msc's VM as users call it (``vm["main"](x)``): the convs, pools and GEMMs are
  steps of the plan's native chains (one ctypes call for the run of them);
- ``python``: the same executable's plan with every kernel object entered from Python
  (``make_plan(native=False)``, its generated run function called directly: no VM argument
  checks, so this flatters it), which is how convs and pools ran before they joined chains;
- ``ort``: onnxruntime on the same file, one intra-op thread.

Columns: microseconds per node of each, chain / ort, python / ort. msc's output is checked
against onnxruntime's first. ``uptime``'s load is printed with the figures: compare ratios
of one run, not times across runs.
"""

from __future__ import annotations

import os

os.environ.setdefault("MSC_NUM_THREADS", "1")

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.blocks import _Graph
from benchmarks.common import best_interleaved, call_times, msc_executable, ort_session

# label -> (input shape, one node of the stack: graph, input name -> output name)
KINDS = {
    "conv3x3 16@16x16": ((1, 16, 16, 16), lambda g, x: g.act(g.conv(x, 16, 16, 3), "relu")),
    "conv3x3 64@8x8": ((1, 64, 8, 8), lambda g, x: g.act(g.conv(x, 64, 64, 3), "relu")),
    "conv1x1 32@16x16": ((1, 32, 16, 16), lambda g, x: g.conv(x, 32, 32, 1)),
    "conv1x1 64@4x4": ((1, 64, 4, 4), lambda g, x: g.conv(x, 64, 64, 1)),
    "dw3x3 32@16x16": ((1, 32, 16, 16), lambda g, x: g.act(g.conv(x, 32, 32, 3, groups=32),
                                                             "relu6")),
    "dw5x5 64@8x8": ((1, 64, 8, 8), lambda g, x: g.conv(x, 64, 64, 5, groups=64)),
    "maxpool3x3 32@16x16": ((1, 32, 16, 16), lambda g, x: g.op(
        "MaxPool", [x], kernel_shape=[3, 3], pads=[1] * 4)),
    "matmul 1x64x64": ((1, 64), lambda g, x: g.op("MatMul", [x, g.const(
        g.rng.standard_normal((64, 64)).astype(np.float32) / 8)])),
}


def stack(shape: tuple, node, count: int):
    g = _Graph()
    x = "x"
    for _ in range(count):
        x = node(g, x)
    return g.model(list(shape), x)


def python_entries(ex):
    """``run(x)`` of the executable's plan with every kernel called from Python."""
    from msc.backend.runtime import plan as plan_mod

    plan = plan_mod.make_plan(ex.programs["main"], {}, native=False)
    regs = plan.new_registers()
    regs[plan_mod.REGS], regs[plan_mod.ENV] = regs, {}

    def run(x):
        regs[plan.params[0]] = x
        plan.runner.fn(regs)
        return regs[plan.result]
    return run


def measure(label: str, nodes: int, rounds: int) -> dict:
    from msc import relax

    shape, node = KINDS[label]
    model = stack(shape, node, nodes)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    ex = msc_executable(model)
    f = relax.VirtualMachine(ex, relax.cpu(), num_threads=1)["main"]
    ort = ort_session(model, 1)
    want = ort(x)
    got = f(x).numpy()
    scale = max(float(np.abs(want).max()), 1e-6)
    if float(np.abs(got - want).max()) > 1e-3 * scale:
        raise SystemExit(f"{label}: msc and onnxruntime differ")
    chained = f.entry({}).plan.stats
    run = python_entries(ex)
    fns = {"chain": lambda: f(x), "python": lambda: run(x), "ort": lambda: ort(x)}
    best = best_interleaved(fns, rounds, lambda fn: min(call_times(fn, 0.05)))
    return {"label": label, "steps": chained["native_steps"], "chains": chained["chains"],
            **{who: 1e6 * s / nodes for who, s in best.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=list(KINDS))
    args = parser.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load "
          f"{os.getloadavg()[0]:.1f}, 1 thread, {args.nodes} nodes a model, us per node")
    print("| kind | chain us | python us | ort us | chain / ort | python / ort |")
    print("|---|---|---|---|---|---|")
    for label in args.kinds:
        r = measure(label, args.nodes, args.rounds)
        print(f"| {label} | {r['chain']:.2f} | {r['python']:.2f} | {r['ort']:.2f} | "
              f"{r['chain'] / r['ort']:.2f} | {r['python'] / r['ort']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
