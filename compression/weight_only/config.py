"""Weight-only settings: defaults, checking, and which joints get packed weights.

    config = read_config({"bits": 4, "group_size": 64, "method": "awq"})
    chosen = chosen_layers(graph, config)      # {node name: joint} with a constant [out, in] weight
"""

from __future__ import annotations

from collections.abc import Mapping

from msc.errors import ValidationError
from msc.graph import MSCGraph, MSCJoint

from ..quantize.config import is_excluded, merged_settings, parse_exclude
from .packing import check_format

__all__ = ["DEFAULTS", "LINEAR_WEIGHTS", "METHODS", "chosen_layers", "read_config"]

# Graph optypes whose "weight" is a constant [out, in] matrix that a matmul_nbits replaces:
# optype -> the weight's layout (msc-conventions 3: linear weights are stored OI).
LINEAR_WEIGHTS = {"msc.linear": "OI", "msc.linear_bias": "OI", "nn.dense": "OI"}
METHODS = ("rtn", "awq")

DEFAULTS = {
    "bits": 4,                 # 4 (per group) or 8
    "group_size": 128,         # a power of two >= 16, or None: one group per output channel
    "symmetric": True,         # zero point 2**(bits-1) (True) or per-group min/max (False)
    "method": "rtn",           # rtn: round to nearest | awq: activation-aware scale search
    "awq_grid": 20,            # alpha in 0, 1/grid, ..., 1 (alpha 0 is RTN)
    "awq_rows": 512,           # calibration rows (tokens) kept per layer for the search
    "exclude": {},             # {"names": [...], "optypes": [...], "regex": "..."}
    "executor": "torch",       # torch | relax: what runs the graphs for calibration and report
    "max_batches": None,       # stop calibrating after this many batches
}


def read_config(config: Mapping | None) -> dict:
    """``DEFAULTS`` updated with ``config``; unknown keys and bad values raise
    ValidationError naming the key."""
    merged = merged_settings(config, DEFAULTS, "weight-only")
    check_format(merged["bits"], merged["group_size"])
    for key, allowed in (("method", METHODS), ("executor", ("torch", "relax"))):
        if merged[key] not in allowed:
            raise ValidationError(f"{key}={merged[key]!r} is not supported", key=key,
                                  hint=f"use one of {', '.join(allowed)}")
    for key in ("awq_grid", "awq_rows"):
        if not isinstance(merged[key], int) or merged[key] < 1:
            raise ValidationError(f"{key}={merged[key]!r} must be a positive int", key=key)
    if not isinstance(merged["symmetric"], bool):
        raise ValidationError(f"symmetric={merged['symmetric']!r} must be True or False",
                              key="symmetric")
    merged["exclude"] = parse_exclude(merged["exclude"])
    return merged


def chosen_layers(graph: MSCGraph, config: dict) -> dict[str, MSCJoint]:
    """The joints of LINEAR_WEIGHTS whose weight is a 2-D constant, minus the excluded.

    Embeddings stay float: a gather reads a few rows per token, not the whole table, so its
    bytes do not bound decode. A tied lm_head (the same tensor as the embedding) is a linear
    joint and gets its own packed copy; the embedding keeps the float one."""
    names = set(config["exclude"]["names"])
    missing = sorted(names - set(graph.node_names))
    if missing:
        raise ValidationError(f"exclude names {missing} are not nodes of the graph",
                              key="exclude", hint="use node names as in print(graph)")
    return {n.name: n for n in graph.get_nodes()
            if n.optype in LINEAR_WEIGHTS and "weight" in n.weights
            and len(n.weights["weight"].shape) == 2 and not is_excluded(n, config["exclude"])}
