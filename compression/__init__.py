"""msc compression: structured pruning and int8 quantization on the MSCGraph.

    from msc.compression import prune, quantize
    small, small_w, report = prune(graph, weights, {"density": 0.5})
    qdq, qdq_w, qreport = quantize(graph, weights, calib_batches, {"method": "percentile"})
"""

from .prune import load_prune_plan, prune, save_prune_plan
from .quantize import quantize

__all__ = ["load_prune_plan", "prune", "quantize", "save_prune_plan"]
