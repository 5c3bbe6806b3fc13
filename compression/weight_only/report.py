"""The weight-only report: per layer (weight and output SQNR, RTN against the choice), bytes,
and the model's logits against the float model's on held-out inputs.

    report.output            # {"sqnr_db": 31.2, "top1_agreement": 0.98, "items": 4}
    report.layers[0]         # the worst layer first
    print(report.table())
"""

from __future__ import annotations

import json

import numpy as np

from msc.graph.files import write_atomic

from ..quantize.runner import input_arrays, make_runner
from .awq import output_sqnr

__all__ = ["WeightOnlyReport", "compare_outputs"]


class WeightOnlyReport:
    """A read-only view on the report dict (``to_dict()``), with ``table()`` and ``save()``."""

    def __init__(self, data: dict):
        self._data = data

    def to_dict(self) -> dict:
        return json.loads(json.dumps(self._data))

    @property
    def output(self) -> dict | None:
        out = self._data.get("output")
        return None if out is None else dict(out)

    @property
    def plan(self) -> dict:
        """The per-layer choices (plan.py): ``apply_weight_plan(graph, weights, plan)``."""
        return json.loads(json.dumps(self._data["plan"]))

    @property
    def layers(self) -> list[dict]:
        return [dict(r) for r in self._data["layers"]]

    def save(self, path: str) -> None:
        write_atomic(path, json.dumps(self._data, indent=1))

    def table(self, rows: int = 15) -> str:
        d = self._data
        cfg = d["config"]
        group = "per channel" if cfg["group_size"] is None else f"g{cfg['group_size']}"
        kind = "sym" if cfg["symmetric"] else "asym"
        size = d["bytes"]
        head = (f"weight-only int{cfg['bits']} {group} {kind} ({cfg['method']}): "
                f"{len(d['layers'])} layers, weights {size['float'] / 1e6:.3f} MB float -> "
                f"{size['packed'] / 1e6:.3f} MB packed ({size['float'] / size['packed']:.2f}x)")
        lines = [head]
        out = d.get("output")
        if out:
            lines.append(f"logits vs float on {out['items']} held-out input(s): SQNR "
                         f"{out['sqnr_db']:.2f} dB, top-1 agreement {out['top1_agreement']:.4f}")
        lines += ["", _HEAD]
        for row in d["layers"][:rows]:
            shape = "x".join(map(str, row["shape"]))
            lines.append(f"{row['name'][:32]:<32} {shape:>12} {row['weight_sqnr_db']:>9.2f} "
                         f"{_db(row.get('rtn_sqnr_db')):>8} {_db(row.get('sqnr_db')):>9} "
                         f"{row['alpha']:>5.2f}")
        return "\n".join(lines)


_HEAD = (f"{'layer':<32} {'shape':>12} {'weight dB':>9} {'RTN dB':>8} {'chosen dB':>9} "
         f"{'alpha':>5}")


def _db(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def compare_outputs(graph, weights, qgraph, qweights, items, executor: str = "torch") -> dict:
    """Logits SQNR and top-1 agreement (argmax of the last axis of output 0) of the quantized
    graph against the float one on ``items`` (calibration-style input dicts or arrays)."""
    run_float = make_runner(graph, weights, executor)
    run_quant = make_runner(qgraph, qweights, executor)
    name, qname = graph.output_names[0], qgraph.output_names[0]
    refs, outs = [], []
    for item in items:
        arrays = input_arrays(graph, item)
        refs.append(np.asarray(run_float(arrays)[name], np.float64))
        outs.append(np.asarray(run_quant(arrays)[qname], np.float64))
    if not refs:
        return {"items": 0, "sqnr_db": None, "top1_agreement": None}
    ref = np.concatenate([r.reshape(-1, r.shape[-1]) for r in refs])
    out = np.concatenate([o.reshape(-1, o.shape[-1]) for o in outs])
    top1 = float(np.mean(ref.argmax(-1) == out.argmax(-1)))
    return {"items": len(refs), "sqnr_db": float(output_sqnr(ref, out)), "top1_agreement": top1}
