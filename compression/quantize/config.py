"""Quantization settings: defaults, checking, and which joints get quantized.

    config = read_config({"method": "entropy", "exclude": {"names": ["head"]}})
    chosen = chosen_nodes(graph, config)       # {node name: joint} whose inputs get QDQ
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from msc.errors import ValidationError
from msc.graph import MSCGraph, MSCJoint
from msc.relax.op.registry import ops_having, ops_in

from .observers import METHODS
from .qparams import DTYPE_RANGES

__all__ = ["ABSORBED_ACTIVATIONS", "DEFAULTS", "DEFAULT_OPTYPES", "MASK_RANGE", "ORT_INT8", "absorbs",
           "chosen_nodes", "is_excluded", "merged_settings", "read_config"]

# Ops onnxruntime's QDQ kernels run in int8 that msc's backend runs in float between the
# dequantize and the quantize: op -> onnxruntime's kernel.
ORT_INT8 = {"nn.conv1d": "QLinearConv", "msc.conv1d_bias": "QLinearConv",
            "nn.batch_matmul": "QLinearMatMul",
            "nn.adaptive_avg_pool2d": "QLinearGlobalAveragePool"}
# Optypes whose float inputs (and "weight"s) are quantized by default: the ops an int8 kernel
# exists for (conv, linear, matmul, pools, add), as graph optypes (fused msc.* included): the
# backend's op fact "int8", but its reductions (its int8 mean is the global pool alone; a
# graph's mean is more often a norm's statistic), and ORT_INT8.
DEFAULT_OPTYPES = tuple(sorted(ops_having("int8") - ops_in("reduce") | ORT_INT8.keys()))

# Activations whose output carries the quantization of the chosen joint before them, as
# onnxruntime's QDQ quantizer removes them (QDQRemovableActivation): conv -> relu -> Q/DQ, so
# the uint8 range is the relu's [0, max] and no second rounding sits before the relu.
# A clip from 0 (relu6, and hard-swish's inner clip) is absorbed too: onnxruntime removes Clip as
# it removes Relu, and keeping the Q/DQ before it rounds twice (the conv's whole range, then
# again at the next conv's input): MobileNetV2 lost 2.6 dB to onnxruntime that way.
ABSORBED_ACTIVATIONS = ("nn.relu", "clip")


def absorbs(node: MSCJoint) -> bool:
    """Does ``node`` carry the output Q/DQ of the joint before it: a relu, or a clip whose
    lower bound is >= 0 (its output range is the uint8 one, clipped further)?"""
    if node.optype == "clip":
        try:
            return float(node.get_attr("min", "-1")) >= 0
        except (TypeError, ValueError):
            return False
    return node.optype in ABSORBED_ACTIVATIONS

# An activation that reaches this magnitude (or +-inf) holds an additive attention mask (-inf
# written as float32's minimum, -3.4e38, as transformers' causal masks are; GPT-Neo adds it to
# scores already masked so, which gives -inf): no 8-bit grid holds both the
# mask and the scores (every score rounds to the zero point: Qwen3 8.5 dB, onnxruntime 9.8),
# and a grid without the mask would unmask. Such a tensor gets no Q/DQ; the add reads the
# quantized scores and the softmax the float sum (msc's int8 softmax kernel takes the mask).
MASK_RANGE = 1e30

DEFAULTS = {
    "method": "minmax",            # activations: minmax | percentile | entropy
    "percentile": 99.999,          # onnxruntime's CalibPercentile default
    "bins": 2048,                  # histogram bins of |x| per sign (percentile, entropy)
    "entropy_bins": 128,           # entropy's signed bins (onnxruntime's 128: MinMax; 2048: KL)
    "activation_dtype": "uint8",   # uint8 (asymmetric) or int8 (symmetric), per tensor
    "weight_dtype": "int8",        # per channel, symmetric
    "weight_roles": ("weight",),   # which weights of a chosen joint are quantized
    "int8_weights": True,          # weights kept as int8 + scale (QuantizedWeight), else float
    "optypes": DEFAULT_OPTYPES,
    "quantize_outputs": True,      # also QDQ the chosen joints' outputs (onnxruntime's way,
                                   # which its int8 kernels fuse), after a following relu
    "fold_bn": True,               # fold inference batch norms into their convs first
    "exclude": {},                 # {"names": [...], "optypes": [...], "regex": "..."}
    "target_sqnr": 30.0,           # dB, for the suggested exclude list
    "executor": "torch",           # torch | relax: what runs the float and QDQ graphs
    "report_batches": 8,           # calibration batches kept (inputs only) for the report
    "per_layer": True,             # rank layers and search the excludes (a pass per layer)
    "max_batches": None,           # stop calibrating after this many batches
    "smooth": None,                # SmoothQuant first: None (off), alpha in [0, 1], "search"
}
_EXCLUDE_KEYS = ("names", "optypes", "regex")


def merged_settings(config: Mapping | None, defaults: dict, what: str) -> dict:
    """``defaults`` updated with ``config``; a key ``defaults`` lacks raises, naming it."""
    config = dict(config or {})
    unknown = sorted(set(config) - set(defaults))
    if unknown:
        raise ValidationError(f"unknown {what} setting(s) {unknown}", key=unknown[0],
                              hint=f"settings: {', '.join(defaults)}")
    return {**defaults, **config}


def read_config(config: Mapping | None) -> dict:
    """``DEFAULTS`` updated with ``config``; unknown keys and bad values raise."""
    merged = merged_settings(config, DEFAULTS, "quantization")
    _check_choice(merged, "method", METHODS)
    _check_choice(merged, "activation_dtype", DTYPE_RANGES)
    if merged["weight_dtype"] != "int8":
        raise ValidationError("weights are quantized per channel to int8 only",
                              key="weight_dtype", hint="use 'int8'")
    _check_choice(merged, "executor", ("torch", "relax"))
    bins = merged["entropy_bins"]
    if not isinstance(bins, int) or bins < 2 or bins % 2 or (2 * merged["bins"]) % bins:
        raise ValidationError(f"entropy_bins={bins!r} must be an even int dividing "
                              f"2 * bins = {2 * merged['bins']}", key="entropy_bins",
                              hint="use 128 (onnxruntime's default) or 2048")
    merged["exclude"] = parse_exclude(merged["exclude"])
    _check_smooth(merged["smooth"])
    return merged


def _check_smooth(value) -> None:
    if value is None or value == "search":
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValidationError(f"smooth={value!r} must be None, an alpha in [0, 1] or 'search'",
                              key="smooth", hint="0.5 is SmoothQuant's default alpha")


def _check_choice(config: dict, key: str, allowed) -> None:
    if config[key] not in allowed:
        raise ValidationError(f"{key}={config[key]!r} is not supported", key=key,
                              hint=f"use one of {', '.join(allowed)}")


def parse_exclude(value) -> dict:
    if isinstance(value, (list, tuple)):  # a plain list means node names
        value = {"names": list(value)}
    if not isinstance(value, Mapping) or set(value) - set(_EXCLUDE_KEYS):
        raise ValidationError(f"exclude must be a dict with keys {list(_EXCLUDE_KEYS)}, got "
                              f"{value!r:.80}", key="exclude")
    regex = value.get("regex") or None
    try:
        pattern = re.compile(regex) if regex else None
    except re.error as err:
        raise ValidationError(f"exclude regex {regex!r} does not compile: {err}",
                              key="exclude") from None
    return {"names": set(value.get("names", ())), "optypes": set(value.get("optypes", ())),
            "regex": pattern}


def is_excluded(node: MSCJoint, exclude: dict) -> bool:
    regex = exclude["regex"]
    return (node.name in exclude["names"] or node.optype in exclude["optypes"]
            or bool(regex and regex.search(node.name)))


def chosen_nodes(graph: MSCGraph, config: dict, extra_excludes=()) -> dict[str, MSCJoint]:
    """The joints of ``config["optypes"]`` not excluded by name, optype or regex."""
    names = set(config["exclude"]["names"])
    missing = sorted(names - set(graph.node_names))
    if missing:
        raise ValidationError(f"exclude names {missing} are not nodes of the graph",
                              key="exclude", hint="use node names as in print(graph)")
    exclude = {**config["exclude"], "names": names | set(extra_excludes)}
    return {n.name: n for n in graph.get_nodes()
            if n.optype in config["optypes"] and not is_excluded(n, exclude)}
