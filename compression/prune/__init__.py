"""Structured pruning on the MSCGraph: tied channels found from layouts and the op table,
physically smaller graphs and weights, a JSON plan and a before/after report.

    from msc.compression.prune import prune
    small, small_weights, report = prune(graph, weights, {"density": 0.5})
"""

from .analysis import Analysis
from .api import prune
from .plan import load_plan, make_plan, save_plan
from .report import format_report

# The names ``compression`` exports (its quantizer has plans too).
load_prune_plan, save_prune_plan = load_plan, save_plan

__all__ = ["Analysis", "format_report", "load_plan", "load_prune_plan", "make_plan", "prune",
           "save_plan", "save_prune_plan"]
