"""``msc inspect MODEL``: inputs, outputs, op histogram, parameters and layouts."""

from __future__ import annotations

import json
import re
from collections import Counter

from . import options
from .loaders import open_model

NAME = "inspect"
HELP = "summarize a model: inputs, outputs, op histogram, parameter count and bytes, layouts"
EPILOG = """examples:
  msc inspect model.onnx
  msc inspect model.onnx --json | jq .params
  msc inspect net.py:make_model --input-info "x:1,3,224,224"
  msc inspect msc/data/conv_relu.json --graph     # also print every joint
"""

_BITS = re.compile(r"[a-z]+?(\d+)")


def _bits(dtype: str) -> int:
    """Bits per element of a dtype name (``bool`` is stored in a byte, as numpy does)."""
    match = _BITS.match(dtype)
    return int(match.group(1)) if match else 8


def summarize(graph) -> dict:
    """``graph.inspect()`` plus the parameter count and bytes and the layouts in use."""
    summary = {"name": graph.name, **graph.inspect()}
    weights = list(graph.get_weights())
    count = sum(max(w.get_size(), 0) for w in weights)
    size = sum(-(-max(w.get_size(), 0) * _bits(w.dtype) // 8) for w in weights)
    summary["params"] = {"weights": len(weights), "count": count, "bytes": size,
                         "dtypes": dict(Counter(w.dtype for w in weights))}
    outputs = [t for node in graph.get_nodes() for t in node.outputs]
    summary["layouts"] = {"tensors": _histogram(t.layout.name or "(none)" for t in outputs),
                          "weights": _histogram(w.layout.name or "(none)" for w in weights)}
    return summary


def _histogram(items) -> dict:
    return dict(Counter(items).most_common())


def _human_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _tensor_line(t: dict) -> str:
    shape = "[" + ", ".join(str(d) for d in t["shape"]) + "]"
    return f"{t['name']}  {shape}  {t['dtype']}  {t['layout'] or '-'}"


def format_summary(summary: dict, model) -> str:
    nodes = dict(summary["nodes"])
    total = nodes.pop("total")
    params = summary["params"]
    items = ", ".join(f"{k} {v}" for k, v in sorted(nodes.items(), key=lambda kv: -kv[1]))
    layouts = summary["layouts"]
    lines = [f"model    {model.spec} ({model.kind}), graph {summary['name']!r}, {total} joints"]
    lines += [f"input    {_tensor_line(t)}" for t in summary["inputs"]]
    lines += [f"output   {_tensor_line(t)}" for t in summary["outputs"]]
    dtypes = ", ".join(params["dtypes"]) or "no weights"
    lines += [f"params   {params['count']:,} in {params['weights']} weights, "
              + f"{_human_bytes(params['bytes'])} ({dtypes})",
              "layouts  tensors " + _pairs(layouts["tensors"])
              + "; weights " + (_pairs(layouts["weights"]) or "-"),
              f"ops      {items}"]
    if "prims" in summary:
        lines.append(f"prims    {summary['prims']['total']} (symbolic dims)")
    return "\n".join(lines)


def _pairs(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items())


def add_arguments(p) -> None:
    p.epilog = EPILOG
    options.add_model(p)
    options.add_input_info(p)
    p.add_argument("--json", action="store_true",
                   help="print the summary as JSON (graph.inspect() keys plus params, layouts)")
    p.add_argument("--graph", action="store_true", help="also print every joint of the graph")


def run(args) -> int:
    model = open_model(args.model, options.input_info(args))
    summary = summarize(model.graph)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    if args.graph:
        print(model.graph)
    print(format_summary(summary, model))
    return 0

