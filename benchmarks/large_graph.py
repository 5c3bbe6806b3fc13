"""A long chain model through the whole tool, stage by stage: seconds and peak RSS.

    .venv/bin/python benchmarks/large_graph.py [--depth 20000]

x -> Neg -> Relu -> ... (``--depth`` ONNX nodes on a [1, 4] input): from_onnx, to_json,
from_json, str(graph), the prototxt, to_relax, to_torch, relax.build and one VM run checked
against numpy. Nothing in msc may recurse in the graph depth; build time shows whether equal
kernels are shared (they compile once) and whether long native chains stay affordable.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codegen import to_relax, to_torch
from frontends import translate
from msc import relax
from msc.graph import MSCGraph
from tests.test_long_chain import chain_model, chain_reference


def _stage(rows: list, name: str, fn):
    start = time.perf_counter()
    result = fn()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows.append((name, time.perf_counter() - start, rss))
    print(f"{name:12s} {rows[-1][1]:8.2f} s   peak RSS {rss:8.1f} MB", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depth", type=int, default=20000, help="nodes in the chain")
    args = parser.parse_args()
    model, rows = chain_model(args.depth), []
    print(f"chain of {args.depth} nodes")
    graph, weights = _stage(rows, "from_onnx", lambda: translate.from_onnx(model))
    text = _stage(rows, "to_json", graph.to_json)
    _stage(rows, "from_json", lambda: MSCGraph.from_json(text))
    _stage(rows, "str(graph)", lambda: str(graph))
    with tempfile.TemporaryDirectory() as out:
        _stage(rows, "prototxt", lambda: graph.visualize(f"{out}/g.prototxt"))
        mod = _stage(rows, "to_relax",
                     lambda: to_relax(graph, weights, build_folder=f"{out}/relax"))
        _stage(rows, "to_torch",
               lambda: to_torch(graph, weights, build_folder=f"{out}/torch"))
    ex = _stage(rows, "build", lambda: relax.build(mod, target="llvm"))
    x = np.random.default_rng(0).standard_normal((1, 4)).astype("float32")
    vm = relax.VirtualMachine(ex, relax.cpu())
    got = _stage(rows, "run", lambda: vm["main"](x).numpy())
    if not np.array_equal(got, chain_reference(x, args.depth)):
        raise SystemExit("large_graph: the chain's result differs from numpy")
    print(f"total {sum(r[1] for r in rows):.1f} s; result equals numpy")


if __name__ == "__main__":
    main()
