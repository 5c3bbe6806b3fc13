"""The order of the ONNX passes, in one place, and the one graph they share.

``run_passes`` builds one ``OnnxGraph`` of the writer's nodes (and one ``Walk`` with the facts
beside it) and hands it to every pass of ``PASSES`` in order; each pass rewrites the graph
through its methods, so the producer / reader lists stay right from one pass to the next and
no pass indexes the nodes again. The order matters: the clean-ups first (so that the
re-fusions see the simple spellings), the re-fusions that read whole chains after the
single-op ones they build on, Attention last (it reads what the others fused), dead nodes
dropped between the passes that count readers.
"""

from __future__ import annotations

from collections.abc import Callable

from ..node import OnnxNode
from ..qdq import quantize_biases
from .acts import fold_activations
from .attention import fold_attention
from .axes import fold_runtime_axes
from .cumulative import fold_runtime_cumulative
from .forms import fold_cross_entropy, fold_gemm_forms, fold_layer_norm, fold_rms_norm
from .graph import OnnxGraph
from .lse import fold_log_sum_exp
from .ops import fold_single_ops
from .reshape import fold_runtime_reshape
from .split import fold_runtime_split
from .tidy import drop_dead, fold_gemm, fold_transposes, unwrap_indices
from .walk import Walk

__all__ = ["PASSES", "run_passes"]

PASSES: tuple[Callable[[Walk], None], ...] = (
    unwrap_indices, fold_transposes, fold_gemm_forms, fold_gemm, fold_cross_entropy,
    fold_layer_norm, fold_rms_norm, fold_single_ops, fold_activations,
    drop_dead, fold_log_sum_exp, fold_runtime_reshape, fold_runtime_cumulative,
    fold_runtime_split,
    drop_dead, fold_runtime_axes,
    drop_dead, fold_single_ops, fold_attention,
    drop_dead,
)


def run_passes(nodes: list[OnnxNode], consts: dict, keep: set[str], shapes: dict,
               dtypes: dict, opset: int, name: Callable[[str], str] | None = None) -> OnnxGraph:
    """The graph of ``nodes`` after every pass (``keep``: the graph outputs; ``shapes`` /
    ``dtypes``: value -> static shape / dtype, where known; ``name``: makes unique value
    names, for the int32 QDQ biases written last)."""
    walk = Walk(OnnxGraph(nodes, keep), consts, shapes, dtypes, opset)
    for step in PASSES:
        step(walk)
    if name is not None:
        quantize_biases(walk.graph, consts, name)
    return walk.graph
