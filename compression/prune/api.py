"""``prune(graph, weights, config) -> (graph, weights, report)``: structured pruning that
gives a physically smaller MSCGraph and weights.

    from msc.compression.prune import prune, save_plan
    small, small_w, report = prune(graph, weights, {"density": 0.5, "stride": 4})
    save_plan(report["plan"], "out/plan.json")           # edit it, then re-apply:
    again, again_w, _ = prune(graph, weights, {"plan": "out/plan.json"})

The steps: the channel-dependency analysis (``analysis.py``) groups tied channels; the strategy
(``strategy.py``) keeps the most important ``density`` of each group (or the plan says which);
``apply.py`` cuts tensors, weights and attrs; ``compensate.py`` refits the layers that read
pruned channels (with ``compensate``); ``report.py`` measures before/after. The data-driven
criteria and compensation run the graph on ``calib_data``::

    small, small_w, report = prune(graph, weights, {"density": 0.5, "importance": "fisher",
                                                    "compensate": True}, calib_data=items)
"""

from __future__ import annotations

from msc.errors import ValidationError

from ..fold import fold_batch_norm
from .analysis import Analysis
from .apply import apply_keep
from .calibrate import Calibration
from .compensate import compensate
from .importance import DATA_CRITERIA
from .plan import keep_from_plan, load_plan, make_plan
from .report import latency_pair, summarize
from .strategy import choose_channels, read_config

__all__ = ["prune"]


def prune(graph, weights: dict, config=None, calib_data=None):
    """Prune ``graph`` (an MSCGraph) and ``weights`` (``{weight name: array}``).

    ``config``: a density (``0.5``) or a dict (see ``strategy.py``: density global or per
    layer, global_threshold, stride, excludes, importance, compensate, ridge,
    prune_head_dims, plan, fold_bn, latency). ``calib_data``: sample inputs (a list of items,
    each a dict by input name, an array or a list of arrays) for the ``taylor`` / ``fisher``
    / ``wanda`` importance and ``compensate``. Returns the pruned graph, its weights and the
    report (``report["plan"]`` is the plan that was applied; ``report["compensated"]`` names
    the refit weights).
    """
    cfg = read_config(config)
    missing = sorted({w.name for w in graph.get_weights()} - set(weights or {}))
    if missing:
        raise ValidationError(f"weights missing for {missing[:5]}", key="weights",
                              hint="pass the weights that came with the graph")
    if cfg["fold_bn"]:  # the report then compares against the folded graph
        graph, weights, _ = fold_batch_norm(graph, weights)
    analysis = Analysis(graph, prune_head_dims=cfg["prune_head_dims"])
    needs_data = cfg["compensate"] or (cfg["plan"] is None and cfg["importance"] in DATA_CRITERIA)
    if needs_data and calib_data is None:
        raise ValidationError(f"importance {cfg['importance']!r} / compensate need calibration "
                              "data", key="calib_data", hint="pass calib_data=[inputs, ...] "
                              "(msc prune: --calib data.npz), or use importance 'l1' / 'l2'")
    calibration = Calibration(analysis, weights, calib_data) if needs_data else None
    if cfg["plan"] is not None:
        keep = keep_from_plan(analysis, load_plan(cfg["plan"]))
    else:
        keep = choose_channels(analysis, weights, cfg, calibration)
    pruned, pruned_weights = apply_keep(analysis, weights, keep)
    refit = []
    if cfg["compensate"]:
        pruned_weights, refit = compensate(analysis, weights, pruned, pruned_weights, keep,
                                           calibration, cfg["ridge"])
    latency = latency_pair(graph, weights, pruned, pruned_weights, cfg["latency_repeat"]) \
        if cfg["latency"] else None
    report = summarize(graph, pruned, analysis, keep, latency)
    report["plan"] = make_plan(analysis, keep)
    report["compensated"] = refit
    return pruned, pruned_weights, report
