"""The tour's steps in the order a newcomer meets them; ``run_demo`` runs them all.

Each step is ``step_<name>(out)`` in the module of its topic (``core.py`` for the graph, the IR
and the first runs); this module only orders them.
"""

from __future__ import annotations

import os

from . import (
    cnn,
    command_line,
    core,
    hostile,
    int8,
    int8_attention,
    int8_onnx,
    int8_rows,
    int8_threads,
    limits,
    native_pool,
    onnx_export,
    onnx_outputs,
    onnx_roundtrip,
    onnx_runtime,
    onnx_sequence,
    onnx_vision,
    pixel_conv,
    profiler,
    prune,
    quant_anchor,
    quantize,
    threads,
    tir,
    transformer,
    translate_speed,
    tvmtext,
    view,
)
from .shared import banner

STEPS = [core.step_graph_from_json, core.step_relax_builder, core.step_op_table,
         core.step_tvmscript, tvmtext.step_tvm_text, tir.step_tir,
         core.step_onnx_to_vm, translate_speed.step_translate_speed,
         onnx_runtime.step_onnx_runtime_values,
         onnx_sequence.step_onnx_sequence,
         onnx_vision.step_onnx_vision, cnn.step_cnn,
         pixel_conv.step_pixel_conv,
         core.step_torch_codegen, transformer.step_transformer,
         onnx_export.step_onnx_export, onnx_roundtrip.step_onnx_roundtrip,
         onnx_outputs.step_onnx_outputs, prune.step_prune, quantize.step_quantize,
         quant_anchor.step_quant_anchor,
         int8_onnx.step_int8_onnx, int8.step_int8,
         int8_attention.step_int8_attention, int8_rows.step_int8_rows,
         int8_threads.step_int8_threads, view.step_view, threads.step_threads,
         native_pool.step_native_pool, profiler.step_profile,
         command_line.step_cli,
         core.step_hostile_input, hostile.step_hostile,
         limits.step_limits]


def run_demo(out: str) -> int:
    """Every step in order, writing its files under ``out``; 0 (a failing step raises
    SystemExit naming what it found)."""
    os.makedirs(out, exist_ok=True)
    for step in STEPS:
        step(out)
    banner("done")
    return 0
