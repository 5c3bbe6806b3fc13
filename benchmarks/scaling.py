"""Cost against graph size: every stage of the tool on chains of 1k to 100k joints and on a
24-layer transformer, seconds per stage and the growth ratios.

    .venv/bin/python benchmarks/scaling.py                  # chains 1k, 5k, 20k, 100k + BERT-24
    .venv/bin/python benchmarks/scaling.py --sizes 1000,5000 --kinds add_relu --no-transformer
    .venv/bin/python benchmarks/scaling.py --memory         # memory plan vs onnxruntime only

Stages: from_onnx, from_torch, from_relax (the Relax module from_onnx made), TVMScript printing
(``mod.script()``) and parsing it back, the Relax / torch / ONNX codegens, ``relax.build``,
the graph JSON round trip, and one VM run checked against numpy. A stage that grows linearly
takes ~4x as long at 20k joints as at 5k (``20k/5k``) and ~5x from 20k to 100k; nothing may
recurse in the graph depth (the 100k chain is far deeper than Python's recursion limit).

Chains (``--kinds``): ``add_relu``, x -> Add(bias) -> Relu -> ... (the issue's chain), and
``mixed``, a cycle of MatMul(4x4 weight), Add, Sigmoid, Mul, Tanh, Neg, Transpose pairs. Each
chain is the same model in ONNX and torch (one weight array per node that has one).

``--memory``: the VM's memory plan for resnet50 (onnx light zoo) and a BERT-base-sized encoder
(transformers config, random weights, sequence 128): the plan's peak activation bytes against
the sum of every activation tensor's bytes, and against onnxruntime's and msc's peak RSS, each
measured in a child process of its own (``resource.getrusage``).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import scaling_models as models
from benchmarks.common import best_of, print_table

STAGES = ("from_onnx", "from_torch", "from_relax", "script", "parse", "to_relax", "to_torch",
          "to_onnx", "build", "json", "run")
SIZES = (1000, 5000, 20000, 100000)


class Run:
    """The stages of one model, each timed best-of-``repeat``; later stages use the results
    of earlier ones, as a user would chain them."""

    def __init__(self, onnx_model, torch_model, input_info, inputs: list, reference,
                 repeat: int, stages: tuple, tolerance: float, measure=None):
        self.onnx_model, self.torch_model = onnx_model, torch_model
        self.input_info, self.inputs, self.reference = input_info, inputs, reference
        self.stages, self.tolerance = stages, tolerance
        # measure(fn) -> (fn's result, a figure): here the best CPU seconds of the process (all
        # its threads), not wall time: on a shared machine the growth ratios then measure the
        # code, not the neighbours; call counts in the tests
        self.measure = measure or (lambda fn: best_of(fn, repeat, time.process_time))
        self.times: dict[str, float] = {}
        self.facts: dict[str, object] = {}

    def _time(self, stage: str, fn):
        if stage not in self.stages:
            return None
        result, self.times[stage] = self.measure(fn)
        return result

    def all(self, folder: str) -> dict:
        from msc import relax
        from msc.codegen import to_onnx, to_relax, to_torch
        from msc.frontends import translate
        from msc.graph import MSCGraph

        translated = self._time("from_onnx", lambda: translate.from_onnx(self.onnx_model))
        graph, weights = translated or translate.from_onnx(self.onnx_model)
        self.facts["joints"] = graph.inspect()["nodes"]["total"]
        self._time("from_torch",
                   lambda: translate.from_torch(self.torch_model, self.input_info))
        mod, _ = translate.from_onnx(self.onnx_model, as_msc=False)
        self._time("from_relax", lambda: translate.from_relax(mod))
        text = self._time("script", lambda: mod.script(show_meta=True))
        self._time("parse", lambda: relax.from_script(text))
        built = self._time("to_relax", lambda: to_relax(graph, weights,
                                                         build_folder=f"{folder}/relax"))
        self._time("to_torch", lambda: to_torch(graph, weights, build_folder=f"{folder}/torch"))
        self._time("to_onnx", lambda: to_onnx(graph, weights))
        self._time("json", lambda: MSCGraph.from_json(graph.to_json()))
        if "build" in self.stages or "run" in self.stages:
            built = built or to_relax(graph, weights, build_folder=f"{folder}/relax")
            ex = self._time("build", lambda: relax.build(built, target="llvm"))
            ex = ex or relax.build(built, target="llvm")
            vm = relax.VirtualMachine(ex, relax.cpu())
            got = self._time("run", lambda: vm["main"](*self.inputs))
            if got is not None:
                self._check(got.numpy())
        return self.times

    def _check(self, got: np.ndarray) -> None:
        want = self.reference
        err = float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-6))
        self.facts["run max rel err"] = err
        if not err <= self.tolerance:
            raise SystemExit(f"scaling: the VM's result differs from the reference ({err:.2e})")


def _repeat_for(size: int, repeat: int | None) -> int:
    return repeat if repeat is not None else (3 if size <= 5000 else 1)


def chain_rows(kind: str, sizes: list, stages: tuple, repeat: int | None) -> dict:
    """size -> (stage -> seconds, facts) for one chain kind."""
    rows = {}
    for size in sizes:
        chain = models.Chain(kind, size)
        x = chain.input()
        run = Run(chain.onnx(), chain.torch(), [((1, 4), "float32")], [x], chain.reference(x),
                  _repeat_for(size, repeat), stages, 1e-4)
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            run.all(folder)
        rows[size] = (run.times, run.facts)
        print(f"  {kind} {size:>6}: {run.facts['joints']} joints, all stages "
              f"{time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    return rows


def print_chain_table(kind: str, rows: dict, stages: tuple) -> None:
    sizes = sorted(rows)
    head = [f"{s // 1000}k s" for s in sizes]
    ratios = list(itertools.pairwise(sizes))
    head += [f"{b // 1000}k/{a // 1000}k" for a, b in ratios]
    print(f"\n{kind} chain ({', '.join(str(rows[s][1]['joints']) for s in sizes)} joints; "
          "ratio = growth, the joint ratio is linear)")
    lines = []
    for stage in (s for s in stages if s in rows[sizes[0]][0]):
        times = [rows[s][0][stage] for s in sizes]
        lines.append([stage, *(f"{t:.3f}" for t in times),
                      *(f"{b / max(a, 1e-9):.1f}" for a, b in itertools.pairwise(times))])
    joints = [f"{rows[b][1]['joints'] / rows[a][1]['joints']:.1f}" for a, b in ratios]
    print_table(["stage", *head], [*lines, ["(joints)", *(["-"] * len(sizes)), *joints]])


def transformer_table(stages: tuple, layers: int, hidden: int) -> None:
    bert = models.Transformer(layers, hidden)
    run = Run(bert.onnx(), bert.torch(), bert.input_info(), bert.inputs(), bert.reference(),
              1, stages, 1e-3)
    with tempfile.TemporaryDirectory() as folder:
        run.all(folder)
    joints = run.facts["joints"]
    print(f"\nBERT-style encoder, {layers} layers, hidden {hidden}, sequence {bert.seq}: "
          f"{joints} joints (run max rel err {run.facts.get('run max rel err', 0):.1e})")
    print_table(["stage", "s", "us / joint"], ([stage, f"{seconds:.3f}",
                                                f"{1e6 * seconds / joints:.0f}"]
                                               for stage, seconds in run.times.items()))


def _load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="chain lengths in ONNX nodes, comma separated")
    parser.add_argument("--kinds", default="add_relu,mixed", help="chain kinds: add_relu, mixed")
    parser.add_argument("--stages", default=",".join(STAGES), help="stages to time")
    parser.add_argument("--repeat", type=int, default=None,
                        help="best of N per stage (default 3 up to 5k joints, else 1)")
    parser.add_argument("--layers", type=int, default=24, help="transformer layers")
    parser.add_argument("--hidden", type=int, default=256, help="transformer hidden size")
    parser.add_argument("--no-transformer", action="store_true", help="chains only")
    parser.add_argument("--memory", action="store_true",
                        help="only the memory section: plan peak vs tensors vs onnxruntime RSS")
    args = parser.parse_args(argv)
    print(f"load average {_load()} (uptime)")
    if args.memory:
        from benchmarks import scaling_memory

        scaling_memory.main()
        return
    stages = tuple(s for s in args.stages.split(",") if s)
    unknown = set(stages) - set(STAGES)
    if unknown:
        parser.error(f"unknown stages {sorted(unknown)}; known: {', '.join(STAGES)}")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    for kind in [k for k in args.kinds.split(",") if k]:
        print_chain_table(kind, chain_rows(kind, sizes, stages, args.repeat), stages)
    if not args.no_transformer:
        transformer_table(stages, args.layers, args.hidden)
    print(f"\nload average {_load()} (uptime)")


if __name__ == "__main__":
    main()
