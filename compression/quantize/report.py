"""The quantization report: JSON and a readable table, with overlays for the graph viewer.

    report.to_dict()["layers"][0]              # the worst layer: its only-this output SQNR
    report.suggested_excludes                   # joints to keep float to meet the target
    report.overlays["layer_sqnr_db"]            # {joint name: value}, for the viewer
    print(report.table())
"""

from __future__ import annotations

import json

from msc.graph import MSCGraph
from msc.graph.files import write_atomic

__all__ = ["QuantReport", "build_report"]


class QuantReport:
    """A read-only view on the report dict (``to_dict()``), with ``table()`` and ``save()``."""

    def __init__(self, data: dict):
        self._data = data

    def to_dict(self) -> dict:
        return json.loads(json.dumps(self._data))

    @property
    def output(self) -> dict:
        return dict(self._data["output"])

    @property
    def suggested_excludes(self) -> list[str]:
        return list(self._data.get("suggested_excludes", []))

    @property
    def plan(self) -> dict:
        return json.loads(json.dumps(self._data["plan"]))

    @property
    def smoothing(self) -> dict | None:
        """SmoothQuant's alpha and groups (and the search's SQNR per alpha), when it ran."""
        return json.loads(json.dumps(self._data["smoothing"])) if "smoothing" in \
            self._data else None

    @property
    def overlays(self) -> dict:
        return json.loads(json.dumps(self._data["overlays"]))

    def save(self, path: str) -> None:
        write_atomic(path, json.dumps(self._data, indent=1))

    def table(self, rows: int = 15) -> str:
        """The report as text: output error, worst layers, worst tensors, excludes."""
        d = self._data
        out = d["output"]
        head = (f"QDQ model vs float on {d['config']['batches']} calibration batch(es): "
                f"output SQNR {out['sqnr_db']:.2f} dB, cosine {out['cosine']:.6f}, "
                f"max abs error {out['max_abs_error']:.4g}")
        lines = [head]
        if d.get("smoothing"):
            sm = d["smoothing"]
            lines.append(f"SmoothQuant alpha {sm['alpha']} on {len(sm['groups'])} linear "
                         f"input(s)" + (f"; searched (calibration SQNR dB): "
                                        f"{sm['search_sqnr_db']}" if "search_sqnr_db" in sm
                                        else ""))
        if d.get("layers"):
            lines += ["", "layers, worst first (output error with only this layer quantized):",
                      _LAYER_HEAD] + [_layer_row(i, r) for i, r in enumerate(d["layers"][:rows])]
        lines += ["", "quantized tensors, worst first (QDQ model vs float model):", _TENSOR_HEAD]
        lines += [_tensor_row(t) for t in d["tensors"][:rows]]
        if "suggested_excludes" in d:
            met = "meets" if d["target_met"] else "does NOT meet"
            lines += ["", (f"suggested excludes for output SQNR >= "
                           f"{d['config']['target_sqnr_db']} dB: {d['suggested_excludes']} -> "
                           f"{d['after_excludes']['sqnr_db']:.2f} dB ({met} the target)")]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


_LAYER_HEAD = f"{'rank':>4}  {'layer':<24} {'optype':<18} {'SQNR dB':>8} {'cosine':>9}"
_TENSOR_HEAD = (f"{'tensor':<26} {'kind':<10} {'SQNR dB':>8} {'local dB':>8} {'cosine':>9} "
                f"{'max abs err':>11}")


def _layer_row(i: int, r: dict) -> str:
    return (f"{i + 1:>4}  {r['node']:<24.24} {r['optype']:<18.18} {r['sqnr_db']:>8.2f} "
            f"{r['cosine']:>9.6f}")


def _tensor_row(t: dict) -> str:
    name = f"{t['tensor']}({t['alias']})" if t["alias"] else t["tensor"]
    return (f"{name:<26.26} {t['kind']:<10} {t['sqnr_db']:>8.2f} "
            f"{t['local_sqnr_db']:>8.2f} {t['cosine']:>9.6f} {t['max_abs_error']:>11.4g}")


def _tensor_rows(graph: MSCGraph, errors: dict, plan: dict) -> list[dict]:
    rows = []
    for name, err in errors.items():
        if err["kind"] == "weight":
            where = {"producer": "", "consumers": list(graph.weight_holders[name]),
                     "alias": graph.find_tensor(name).alias}
        else:
            where = {"producer": graph.find_producer(name).name,
                     "consumers": list(plan[name].get("consumers", [])), "alias": ""}
        rows.append({"tensor": name, **err, **where})
    return sorted(rows, key=lambda r: r["sqnr_db"])


def _overlays(layers: list[dict], tensors: list[dict]) -> dict:
    by_joint: dict[str, dict] = {"layer_sqnr_db": {r["node"]: r["sqnr_db"] for r in layers},
                                 "tensor_sqnr_db": {}, "weight_sqnr_db": {}}
    for t in tensors:
        key, joints = ("weight_sqnr_db", t["consumers"]) if t["kind"] == "weight" else \
            ("tensor_sqnr_db", [t["producer"]])
        for joint in joints:
            old = by_joint[key].get(joint)
            by_joint[key][joint] = t["sqnr_db"] if old is None else min(old, t["sqnr_db"])
    return by_joint


def build_report(graph: MSCGraph, plan: dict, config: dict, batches: int, output: dict,
                 tensor_errors: dict, layer_errors: dict | None = None,
                 search: tuple | None = None, smoothing: dict | None = None) -> QuantReport:
    """Assemble the report dict from the measurements (see analysis.py)."""
    layers = sorted(({"node": n, "optype": graph.find_node(n).optype, **e}
                     for n, e in (layer_errors or {}).items()), key=lambda r: r["sqnr_db"])
    tensors = _tensor_rows(graph, tensor_errors, plan)
    data = {"config": {"method": config["method"], "activation_dtype": config["activation_dtype"],
                       "weight_dtype": config["weight_dtype"], "executor": config["executor"],
                       "target_sqnr_db": config["target_sqnr"], "batches": batches},
            "output": output, "layers": layers, "tensors": tensors,
            "overlays": _overlays(layers, tensors), "plan": plan}
    if smoothing is not None:
        data["smoothing"] = smoothing
    if search is not None:
        excludes, after, steps = search
        data.update({"suggested_excludes": excludes, "after_excludes": after,
                     "target_met": after["sqnr_db"] >= config["target_sqnr"], "search": steps})
    return QuantReport(data)
