"""``quantize``: calibrate, apply the plan, measure, report."""

from __future__ import annotations

from msc.graph import MSCGraph

from ..fold import fold_batch_norm
from .analysis import Measurer, layer_names
from .config import chosen_nodes, read_config
from .plan import calibrate
from .qdq import apply_plan
from .report import QuantReport, build_report
from .smooth import ALPHAS, channel_absmax, smooth, smooth_groups

__all__ = ["quantize"]


def quantize(graph: MSCGraph, weights: dict, calib_data, config: dict | None = None
             ) -> tuple[MSCGraph, dict, QuantReport]:
    """Post-training int8 quantization: ``(qdq_graph, weights, report)``.

    ``calib_data`` is any iterable of input dicts (by input name or alias), arrays, or lists
    of arrays, read once. ``config`` overrides ``DEFAULTS`` (method, activation_dtype,
    optypes, exclude, target_sqnr, executor, per_layer, smooth, ...). The report ranks the
    layers by their measured effect on the output and suggests the joints to keep float so
    that the output SQNR reaches ``target_sqnr`` dB. ``smooth`` (an alpha, or "search")
    applies SmoothQuant first (``smooth.py``); the returned graph is then the smoothed one and
    ``report.smoothing`` says what moved where.

    >>> qgraph, qweights, report = quantize(graph, weights, batches)   # doctest: +SKIP
    >>> print(report.table())                                          # doctest: +SKIP
    """
    config = read_config(config)
    if config["fold_bn"]:  # once here, so that the report measures the graph it returns
        graph, weights, _ = fold_batch_norm(graph, weights)
    smoothing = None
    if config["smooth"] is not None:
        calib_data = list(calib_data)  # read twice: the channel ranges, then calibration
        graph, weights, smoothing = _smoothed(graph, weights, calib_data, config)
    plan, kept = calibrate(graph, weights, calib_data, config, return_inputs=True)
    qgraph, qweights = apply_plan(graph, weights, plan, config["int8_weights"], fold_bn=False)
    chosen = set(chosen_nodes(graph, config))
    measurer = Measurer(graph, weights, kept, config["executor"], chosen)
    output = measurer.output_error(plan)
    tensors = measurer.tensor_errors(plan)
    layer_errors = search = None
    if config["per_layer"]:
        layer_errors = measurer.layer_errors(plan, layer_names(plan, graph, chosen))
        ranked = sorted(layer_errors, key=lambda n: layer_errors[n]["sqnr_db"])
        search = measurer.suggest_excludes(plan, ranked, config["target_sqnr"])
    report = build_report(graph, plan, config, len(kept), output, tensors, layer_errors, search,
                          smoothing)
    return qgraph, qweights, report


def _smoothed(graph: MSCGraph, weights: dict, data: list, config: dict):
    """SmoothQuant at ``config["smooth"]``'s alpha, or for "search" the best of no smoothing
    and each of ``ALPHAS`` by the output SQNR of a plain quantization on the calibration data
    (a few quantize passes; the ranges of the linears' inputs are measured once)."""
    if config["smooth"] != "search":
        return smooth(graph, weights, data, config["smooth"], config["executor"])
    absmax = channel_absmax(graph, weights, list(smooth_groups(graph)), data,
                            config["executor"])
    quick = {**config, "smooth": None, "per_layer": False, "fold_bn": False}
    tried = {"none": quantize(graph, weights, data, quick)[2].output["sqnr_db"]}
    best = (tried["none"], graph, weights, None)
    for alpha in ALPHAS:
        sgraph, sweights, info = smooth(graph, weights, data, alpha, absmax=absmax)
        tried[str(alpha)] = db = quantize(sgraph, sweights, data, quick)[2].output["sqnr_db"]
        if db > best[0]:
            best = (db, sgraph, sweights, info)
    _, graph, weights, info = best
    return graph, weights, {**(info or {"alpha": None, "groups": {}}), "search_sqnr_db": tried}
