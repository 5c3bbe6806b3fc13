"""``quantize_weights``: choose the linear joints, calibrate (AWQ), pack, rewrite, report."""

from __future__ import annotations

import numpy as np

from msc.errors import ValidationError
from msc.graph import MSCGraph
from msc.progress import progress

from ..quantize.runner import input_arrays, make_runner, with_outputs
from .awq import ScaleChoice, output_sqnr, search_scales
from .config import chosen_layers, read_config
from .packing import quantize_rtn
from .plan import apply_weight_plan, layer_weight, plan_entry
from .report import WeightOnlyReport, compare_outputs

__all__ = ["collect_inputs", "quantize_weights"]


def quantize_weights(graph: MSCGraph, weights: dict, calib_data=None, config: dict | None = None,
                     eval_data=None) -> tuple[MSCGraph, dict, WeightOnlyReport]:
    """Weight-only quantization: ``(graph, weights, report)`` where every chosen linear joint
    is a ``matmul_nbits`` on its packed weight (int4 two per byte, or int8); ``report.plan``
    re-applies without calibration (``apply_weight_plan``).

    ``calib_data``: input items (dicts by input name, arrays, or lists of arrays), needed by
    ``method="awq"`` and optional for RTN (then the report gives each layer's output SQNR on
    them). ``eval_data``: held-out items on which the report compares the logits with the
    float model's (SQNR, top-1 agreement).

    >>> qgraph, qweights, report = quantize_weights(graph, weights, calib, {"bits": 4})  # doctest: +SKIP
    >>> print(report.table())                                                          # doctest: +SKIP
    """
    config = read_config(config)
    layers = chosen_layers(graph, config)
    if not layers:
        raise ValidationError("the graph has no linear joint with a constant [out, in] weight",
                              key="optypes", hint="weight-only quantization packs msc.linear, "
                              "msc.linear_bias and nn.dense weights")
    if config["method"] == "awq" and calib_data is None:
        raise ValidationError("method='awq' needs calibration inputs", key="method",
                              hint="pass calib_data, or use method='rtn'")
    rows = collect_inputs(graph, weights, layers, calib_data, config) \
        if calib_data is not None else {}
    plan, records = {}, []
    for name, node in progress(list(layers.items()), desc="weight-only", unit="layer"):
        w = layer_weight(node, weights)
        choice = _choose(w, rows.get(name), config)
        plan[name] = plan_entry(config, choice.alpha, choice.input_scale)
        records.append(_record(node, w, choice, name in rows, choice.packed.nbytes))
    qgraph, qweights = apply_weight_plan(graph, weights, plan)
    output = compare_outputs(graph, weights, qgraph, qweights, eval_data, config["executor"]) \
        if eval_data is not None else None
    floats = sum(r["shape"][0] * r["shape"][1] * 4 for r in records)
    packed = sum(r["bytes"] for r in records)
    records.sort(key=lambda r: r["weight_sqnr_db"])
    data = {"config": {k: v for k, v in config.items() if k != "exclude"}, "layers": records,
            "bytes": {"float": floats, "packed": packed}, "output": output, "plan": plan}
    return qgraph, qweights, WeightOnlyReport(data)


def _choose(w: np.ndarray, x: np.ndarray | None, config: dict) -> ScaleChoice:
    bits, group, sym = config["bits"], config["group_size"], config["symmetric"]
    if x is not None and config["method"] == "awq":
        return search_scales(x, w, bits, group, sym, config["awq_grid"])
    packed = quantize_rtn(w, bits, group, sym)
    db = None
    if x is not None:
        x64 = np.asarray(x, np.float64)
        db = output_sqnr(x64 @ w.T.astype(np.float64), x64 @ packed.dequantize().T)
    return ScaleChoice(packed, None, 0.0, db, db)


def _record(node, w: np.ndarray, choice: ScaleChoice, calibrated: bool, nbytes: int) -> dict:
    w_hat = choice.packed.dequantize()
    if choice.input_scale is not None:
        w_hat = w_hat / choice.input_scale
    return {"name": node.name, "optype": node.optype, "shape": list(w.shape),
            "weight_sqnr_db": output_sqnr(w, w_hat), "alpha": choice.alpha,
            "rtn_sqnr_db": choice.rtn_sqnr_db if calibrated else None,
            "sqnr_db": choice.sqnr_db if calibrated else None, "bytes": nbytes}


def collect_inputs(graph: MSCGraph, weights: dict, layers: dict, calib_data, config: dict
                   ) -> dict[str, np.ndarray]:
    """Each layer's input rows ``[T, K]`` on the calibration items (float graph), at most
    ``awq_rows`` per layer (evenly spaced when there are more)."""
    tensors = {name: node.input_at(0).name for name, node in layers.items()}
    run = make_runner(with_outputs(graph, sorted(set(tensors.values()))), weights,
                      config["executor"])
    seen: dict[str, list] = {t: [] for t in tensors.values()}
    limit = config["max_batches"]
    for i, item in enumerate(progress(calib_data, desc="calibrate", unit="batch")):
        if limit is not None and i >= limit:
            break
        out = run(input_arrays(graph, item))
        for tensor, parts in seen.items():
            value = np.asarray(out[tensor], np.float32)
            parts.append(value.reshape(-1, value.shape[-1]))
    if not any(seen.values()):
        raise ValidationError("the calibration data gave no batch", key="calib_data",
                              hint="pass at least one input item")
    rows = {}
    for tensor, parts in seen.items():
        x = np.concatenate(parts)
        if len(x) > config["awq_rows"]:
            x = x[np.linspace(0, len(x) - 1, config["awq_rows"]).astype(np.int64)]
        rows[tensor] = x
    return {name: rows[tensor] for name, tensor in tensors.items()}
