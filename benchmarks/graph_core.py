"""MSCGraph core timings: JSON round trip and lookups on synthetic graphs of growing size.

    .venv/bin/python benchmarks/graph_core.py [--sizes 2500 5000 10000] [--repeat 3]

Targets (DESIGN.md): the JSON round trip of a 10k-joint graph under 1 s; lookups linear in the
graph size in total (constant per lookup), which the per-item column shows. Each figure is the
best of ``--repeat`` runs, so other load on the machine inflates it as little as possible.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import best_of
from msc.graph import MSCGraph
from msc.graph.testing import synthetic_chain


def measure(size: int, repeat: int) -> dict[str, float]:
    graph = synthetic_chain(size)
    text = graph.to_json()
    tensors = [t.name for n in graph.get_nodes() for t in n.outputs]
    tensors += [w.name for w in graph.get_weights()]
    def best(fn) -> float:
        return best_of(fn, repeat)[1]
    return {
        "joints": size, "tensors": len(tensors), "json_mb": len(text) / 1e6,
        "to_json": best(graph.to_json),
        "from_json": best(lambda: MSCGraph.from_json(text)),
        "producers": best(lambda: [graph.find_producer(t) for t in tensors]),
        "consumers": best(lambda: [graph.find_consumers(t) for t in tensors]),
        "prototxt": best(graph.visualize),
        "check": best(graph.check),
    }


COLUMNS = ["to_json", "from_json", "producers", "consumers", "prototxt", "check"]


def report(rows: list[dict[str, float]]) -> str:
    head = f"{'joints':>7} {'tensors':>8} {'MB':>6} " + " ".join(f"{c:>10}" for c in COLUMNS)
    head += f" {'round trip':>11} {'us/lookup':>10}"
    lines = [head, "-" * len(head)]
    for row in rows:
        cells = " ".join(f"{row[c] * 1e3:>8.1f}ms" for c in COLUMNS)
        trip = (row["to_json"] + row["from_json"]) * 1e3
        per = (row["producers"] + row["consumers"]) / (2 * row["tensors"]) * 1e6
        lines.append(f"{row['joints']:>7} {row['tensors']:>8} {row['json_mb']:>6.2f} {cells} "
                     f"{trip:>9.1f}ms {per:>10.2f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2500, 5000, 10000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(report([measure(size, args.repeat) for size in args.sizes]))


if __name__ == "__main__":
    main()
