"""The pruning report: per layer and total parameters, FLOPs and bytes before/after, the groups
with their kept channels, what could not be pruned and why, and the latency before/after
measured on the msc backend (``relax.build`` + ``VirtualMachine`` of ``codegen.to_relax``).

FLOPs are an estimate from the op's channel rule (a multiply-add counts 2; elementwise ops
count their outputs). ``format_report`` renders the JSON dict as a table.
"""

from __future__ import annotations

import tempfile
import time

import numpy as np

from msc.progress import progress

from .rules import rule_of

__all__ = ["format_report", "layer_costs", "measure_latency", "summarize"]

_NOT_OPS = ("input", "constant", "get_item", "tuple", "shape")


def layer_costs(graph) -> dict[str, dict]:
    """``{node: {"optype", "params", "flops", "bytes"}}`` (a shared weight counts once)."""
    seen, costs = set(), {}
    for node in graph.get_nodes():
        params = nbytes = 0
        for weight in node.weights.values():
            if weight.name in seen:
                continue
            seen.add(weight.name)
            size = max(weight.get_size(), 0)
            params += size
            nbytes += size * np.dtype(_np_dtype(weight.dtype)).itemsize
        flops = 0
        if node.optype not in _NOT_OPS:
            rule = rule_of(node.optype)
            flops = rule.flops(node) if rule.flops is not None else 0
        costs[node.name] = {"optype": node.optype, "params": params, "flops": int(flops),
                            "bytes": nbytes}
    return costs


def _np_dtype(dtype: str) -> str:
    return dtype if dtype in ("float32", "float16", "float64", "int8", "int32", "int64",
                              "uint8", "bool") else "float32"


def summarize(before, after, analysis, keep: dict, latency: dict | None) -> dict:
    """The report dict of one pruning run."""
    cost_b, cost_a = layer_costs(before), layer_costs(after)
    layers = []
    for name, b in cost_b.items():
        a = cost_a[name]
        if b["params"] or b["flops"]:
            layers.append({"node": name, "optype": b["optype"],
                           **{k: [b[k], a[k]] for k in ("params", "flops", "bytes")}})
    total = {k: [sum(c[k] for c in cost_b.values()), sum(c[k] for c in cost_a.values())]
             for k in ("params", "flops", "bytes")}
    for values in total.values():
        values.append(round(values[1] / values[0], 4) if values[0] else 1.0)
    groups = [{"name": g.name, "channels": [g.size, len(keep.get(g.sid, range(g.size)))],
               "owners": g.owners, "weights": sorted({m.weight for m in g.members})}
              for g in analysis.groups]
    report = {"total": total, "layers": layers, "groups": groups,
              "not_prunable": analysis.frozen()}
    if latency is not None:
        report["latency"] = latency
    return report


def measure_latency(graph, weights: dict, repeat: int = 20, seed: int = 0) -> float:
    """Median seconds of one run of ``graph`` on the msc backend (after one warm-up run)."""
    from msc import relax
    from msc.codegen import to_relax

    with tempfile.TemporaryDirectory(prefix="msc_prune_") as folder:
        mod = to_relax(graph, weights, {"need_test": False}, build_folder=folder)
        vm = relax.VirtualMachine(relax.build(mod, target="llvm"), relax.cpu())
    main = vm[mod.get_global_vars()[0].name_hint]
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal([max(d, 1) for d in t.shape]).astype(_np_dtype(t.dtype))
              for t in graph.get_inputs()]
    main(*inputs)
    times = []
    for _ in progress(range(repeat), desc=f"latency {graph.name}"):
        start = time.perf_counter()
        main(*inputs)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def latency_pair(before, w_before, after, w_after, repeat: int) -> dict:
    b = measure_latency(before, w_before, repeat)
    a = measure_latency(after, w_after, repeat)
    return {"before_ms": round(b * 1e3, 4), "after_ms": round(a * 1e3, 4),
            "speedup": round(b / a, 3) if a > 0 else None, "repeat": repeat}


def format_report(report: dict) -> str:
    """A readable table of the report: layers, then totals and latency."""
    rows = [f"{'layer':<24}{'optype':<20}{'params':>18}{'MFLOPs':>20}"]
    for layer in report["layers"]:
        p, f = layer["params"], layer["flops"]
        rows.append(f"{layer['node']:<24}{layer['optype']:<20}{p[0]:>9}->{p[1]:<7}"
                    f"{f[0] / 1e6:>10.3f}->{f[1] / 1e6:<8.3f}")
    total = report["total"]
    rows.append(f"total params {total['params'][0]} -> {total['params'][1]} "
                f"(x{total['params'][2]}), FLOPs {total['flops'][0]} -> {total['flops'][1]} "
                f"(x{total['flops'][2]}), bytes {total['bytes'][0]} -> {total['bytes'][1]}")
    if "latency" in report:
        lat = report["latency"]
        rows.append(f"latency {lat['before_ms']} ms -> {lat['after_ms']} ms "
                    f"(speedup x{lat['speedup']})")
    return "\n".join(rows)
