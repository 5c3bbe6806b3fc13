"""Weight-only quantization for LLM decode: int8 per channel, int4 per group (32/64/128,
symmetric or asymmetric), round-to-nearest or an AWQ-style activation-aware scale search.

    from msc.compression.weight_only import quantize_weights
    qgraph, qweights, report = quantize_weights(graph, weights, calib, {"bits": 4,
                                                "group_size": 128, "method": "awq"},
                                                eval_data=held_out)
    print(report.table())        # logits SQNR, top-1 agreement, per-layer RTN vs AWQ
    save_weight_plan(report.plan, "int4.plan.json")          # re-apply without calibration
    qgraph, qweights = apply_weight_plan(graph, weights, "int4.plan.json")

Each chosen linear joint becomes a ``matmul_nbits`` on its packed weight (int4 two per byte,
MatMulNBits' layout), which the backend runs on a kernel reading the packed bytes, to_onnx
writes as com.microsoft MatMulNBits and to_torch dequantizes.
"""

from .api import collect_inputs, quantize_weights
from .awq import search_scales
from .config import DEFAULTS, LINEAR_WEIGHTS, read_config
from .packing import PackedWeight, quantize_rtn
from .plan import apply_weight_plan, load_weight_plan, save_weight_plan
from .report import WeightOnlyReport, compare_outputs
from .rewrite import LayerQuant, rewrite_graph

__all__ = ["DEFAULTS", "LINEAR_WEIGHTS", "LayerQuant", "PackedWeight", "WeightOnlyReport",
           "apply_weight_plan", "collect_inputs", "compare_outputs", "load_weight_plan",
           "quantize_rtn", "quantize_weights", "read_config", "rewrite_graph",
           "save_weight_plan", "search_scales"]
