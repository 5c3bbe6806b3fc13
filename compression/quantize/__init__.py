"""Post-training int8 quantization of an MSCGraph with a per-layer error report.

    from msc.compression.quantize import quantize
    qgraph, qweights, report = quantize(graph, weights, calib_batches, {"method": "entropy"})
    print(report.table())                  # ranked per-layer SQNR, suggested excludes

``calibrate`` gives the plan alone (JSON, ``save_plan`` / ``load_plan``), ``apply_plan``
re-applies a saved or edited plan.
"""

from .api import quantize
from .config import DEFAULT_OPTYPES, DEFAULTS
from .plan import calibrate, load_plan, save_plan
from .qdq import apply_plan
from .qparams import fake_quant, qparams_from_range
from .report import QuantReport

__all__ = ["DEFAULTS", "DEFAULT_OPTYPES", "QuantReport", "apply_plan", "calibrate",
           "fake_quant", "load_plan", "qparams_from_range", "quantize", "save_plan"]
