"""Which channels to keep: the config, layer selectors, importance and the kept count.

Config keys (all optional but one of ``density`` / ``plan``)::

    {"density": 0.5,                      # kept fraction of every group's channels, or per layer:
     "density": {"default": 0.5, "conv2d_3": 0.25, "optype:nn.conv2d": 0.75, "re:^l2\\.": 0.6},
     "global_threshold": False,           # True: one importance threshold over all groups
     "stride": 8,                         # kept channels are a multiple of 8 (1: any count)
     "excludes": ["fc", "optype:msc.linear_bias", "re:^head"],   # never prune these outputs
     "importance": "l2",                  # "l1", "l2", "taylor", "fisher", "wanda" (these
                                          # three need calib_data; importance.py) or a
                                          # callable (array, axis) -> scores
     "compensate": False,                 # refit the layers reading pruned channels by least
                                          # squares on calib_data (compensate.py)
     "ridge": None,                       # its ridge term (of the mean Gram diagonal); None:
                                          # chosen per layer by 2-fold validation
     "prune_head_dims": False,            # also prune inside attention heads
     "plan": "plan.json",                 # re-apply a saved plan (a dict or a path) instead
     "fold_bn": False,                    # fold inference batch norms into their convs first
     "latency": True}                     # measure latency before/after on the msc backend

A *selector* names layers: a node name, a weight name or alias (``"l2.c1.weight"``),
``"optype:<optype>"`` or ``"re:<regex>"`` (searched in node names and weight aliases). A group
is selected when one of its owners (the nodes whose output channels it is) is; in a per-layer
density the first selector (in dict order) that selects the group wins, and groups no selector
picks take ``"default"`` (1.0, unpruned, when absent). A selector that matches no node is an
error, so a typo never goes unnoticed.

``global_threshold`` (with a single float density) is Torch-Pruning's global pruning: each
group's channel scores are divided by the group's mean score (its "mean" normalizer, so wide
and narrow layers compare), one threshold is set over all groups so that ``1 - density`` of
all their channels fall at or below it, and each group drops its channels at or below it,
that count rounded down to a multiple of ``stride`` and never all of them.
"""

from __future__ import annotations

import re

import numpy as np

from msc.errors import ValidationError

from .analysis import Analysis, Group
from .importance import CRITERIA, Scorer

__all__ = ["DEFAULTS", "choose_channels", "read_config"]

DEFAULTS = {"density": None, "global_threshold": False, "stride": 8, "excludes": [],
            "importance": "l2", "prune_head_dims": False, "plan": None, "fold_bn": False,
            "latency": True, "latency_repeat": 20, "compensate": False, "ridge": None}


def read_config(config) -> dict:
    """The config with defaults filled in; unknown keys and bad values raise."""
    if config is None:
        config = {}
    if isinstance(config, (int, float)) and not isinstance(config, bool):
        config = {"density": config}
    if not isinstance(config, dict):
        raise ValidationError(f"config must be a dict, got {type(config).__name__}",
                              key="config", hint='e.g. {"density": 0.5}')
    unknown = sorted(set(config) - set(DEFAULTS))
    if unknown:
        raise ValidationError(f"unknown prune config keys {unknown}", key="config",
                              hint=f"use {', '.join(DEFAULTS)}")
    cfg = {**DEFAULTS, **config}
    if cfg["density"] is None and cfg["plan"] is None:
        raise ValidationError("give a density or a plan", key="density",
                              hint='e.g. {"density": 0.5} keeps half the channels')
    _check_density(cfg["density"])
    if not isinstance(cfg["stride"], int) or isinstance(cfg["stride"], bool) or \
            cfg["stride"] < 1:
        raise ValidationError(f"stride must be an int >= 1, got {cfg['stride']!r}",
                              key="stride")
    if not (callable(cfg["importance"]) or cfg["importance"] in CRITERIA):
        raise ValidationError(f"unknown importance {cfg['importance']!r}", key="importance",
                              hint=f"use one of {', '.join(CRITERIA)} or a callable "
                                   "(array, axis) -> scores")
    if cfg["ridge"] is not None and (isinstance(cfg["ridge"], bool) or not isinstance(
            cfg["ridge"], (int, float)) or not cfg["ridge"] >= 0):
        raise ValidationError(f"ridge must be a number >= 0, got {cfg['ridge']!r}",
                              key="ridge", hint="e.g. 1e-3 (of the mean Gram diagonal)")
    if isinstance(cfg["excludes"], str) or not isinstance(cfg["excludes"], (list, tuple)):
        raise ValidationError("excludes must be a list of selectors", key="excludes")
    if cfg["global_threshold"] and isinstance(cfg["density"], dict):
        raise ValidationError("global_threshold takes one float density, not per-layer ones",
                              key="global_threshold", hint='e.g. {"density": 0.5, '
                              '"global_threshold": true}')
    return cfg


def _check_density(density) -> None:
    values = density.values() if isinstance(density, dict) else [density]
    for value in values:
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not 0 < value <= 1:
            raise ValidationError(f"density must be in (0, 1], got {value!r}", key="density",
                                  hint="the fraction of channels to keep, e.g. 0.5")


# ---- selectors ------------------------------------------------------------------------------
def _node_names(node) -> list[str]:
    return [node.name, *(w.name for w in node.weights.values()),
            *(w.alias for w in node.weights.values() if w.alias)]


def matches(selector: str, node) -> bool:
    if not isinstance(selector, str) or not selector:
        raise ValidationError(f"a selector must be a non-empty string, got {selector!r}",
                              key="selector", hint="a name, 'optype:<optype>' or 're:<regex>'")
    if selector.startswith("optype:"):
        return node.optype == selector[len("optype:"):]
    if selector.startswith("re:"):
        pattern = selector[len("re:"):]
        try:
            return any(re.search(pattern, n) for n in _node_names(node))
        except re.error as err:
            raise ValidationError(f"bad regex {pattern!r}: {err}", key="selector") from None
    return selector in _node_names(node)


def check_selectors(graph, selectors, key: str) -> None:
    """Every selector names at least one node (a typo must not silently prune everything)."""
    nodes = list(graph.get_nodes())
    for selector in selectors:
        if not any(matches(selector, node) for node in nodes):
            raise ValidationError(f"selector {selector!r} matches no node", key=key,
                                  hint="use a node name, a weight alias, 'optype:<optype>' "
                                       "or 're:<regex>'")


def _selected(graph, group: Group, selector: str) -> bool:
    return any(matches(selector, graph.find_node(owner)) for owner in group.owners)


def density_of(graph, group: Group, density) -> float:
    if not isinstance(density, dict):
        return float(density)
    for selector, value in density.items():
        if selector != "default" and _selected(graph, group, selector):
            return float(value)
    return float(density.get("default", 1.0))


def kept_count(size: int, density: float, stride: int) -> int:
    """``int(size * density)`` rounded down to a multiple of ``stride`` (at least one
    stride); a group narrower than the stride is kept whole."""
    keep = int(size * density)
    if stride > 1:
        if size < stride:
            return size
        keep = max(stride, keep - keep % stride)
    return min(max(keep, 1), size)


def _global_counts(groups: list, scores: dict, density: float, stride: int) -> dict:
    """``{sid: kept count}`` under one threshold over the mean-normalized scores."""
    normed = {g.sid: scores[g.sid] / max(scores[g.sid].mean(), 1e-30) for g in groups}
    pool = np.concatenate([normed[g.sid] for g in groups]) if groups else np.zeros(0)
    n_prune = pool.size - int(pool.size * density)
    if n_prune <= 0:
        return {g.sid: g.size for g in groups}
    threshold = np.partition(pool, n_prune - 1)[n_prune - 1]
    counts = {}
    for g in groups:
        pruned = int((normed[g.sid] <= threshold).sum())
        if stride > 1:
            pruned -= pruned % stride
        counts[g.sid] = max(g.size - pruned, min(stride, g.size))
    return counts


def choose_channels(analysis: Analysis, weights: dict, cfg: dict,
                    calibration=None) -> dict[int, np.ndarray]:
    """``{space id: kept channel indices (sorted)}`` for every group that shrinks
    (``calibration``: a ``Calibration``, for the data criteria)."""
    graph = analysis.graph
    check_selectors(graph, cfg["excludes"], "excludes")
    if isinstance(cfg["density"], dict):
        check_selectors(graph, [s for s in cfg["density"] if s != "default"], "density")
    groups = [g for g in analysis.groups
              if not any(_selected(graph, g, s) for s in cfg["excludes"])]
    scorer = Scorer(analysis, weights, cfg["importance"], calibration)
    scores = {g.sid: scorer(g) for g in groups}
    counts = _global_counts(groups, scores, float(cfg["density"]), cfg["stride"]) \
        if cfg["global_threshold"] else \
        {g.sid: kept_count(g.size, density_of(graph, g, cfg["density"]), cfg["stride"])
         for g in groups}
    keep = {}
    for group in groups:
        count = counts[group.sid]
        if count >= group.size:
            continue
        order = np.argsort(-scores[group.sid], kind="stable")
        keep[group.sid] = np.sort(order[:count])
    return keep
