"""``msc demo``: the end-to-end tour, one step per capability, in the order a newcomer meets them.

The steps live beside the code they show (``demo.py`` for the core, ``demo_<topic>.py`` for the
rest); this module only orders them, so a step module may use ``demo.py``'s helpers freely.
"""

from __future__ import annotations

import os

from . import (
    demo,
    demo_cli,
    demo_cnn,
    demo_hostile,
    demo_int8,
    demo_int8_attention,
    demo_int8_onnx,
    demo_int8_rows,
    demo_int8_threads,
    demo_limits,
    demo_native_pool,
    demo_onnx,
    demo_onnx_outputs,
    demo_onnx_roundtrip,
    demo_onnx_runtime,
    demo_onnx_sequence,
    demo_onnx_vision,
    demo_pixel_conv,
    demo_profile,
    demo_prune,
    demo_quant_anchor,
    demo_quantize,
    demo_threads,
    demo_tir,
    demo_transformer,
    demo_translate_speed,
    demo_tvmtext,
    demo_view,
)

STEPS = [demo.step_graph_from_json, demo.step_relax_builder, demo.step_op_table,
         demo.step_tvmscript, demo_tvmtext.step_tvm_text, demo_tir.step_tir,
         demo.step_onnx_to_vm, demo_translate_speed.step_translate_speed,
         demo_onnx_runtime.step_onnx_runtime_values,
         demo_onnx_sequence.step_onnx_sequence,
         demo_onnx_vision.step_onnx_vision, demo_cnn.step_cnn,
         demo_pixel_conv.step_pixel_conv,
         demo.step_torch_codegen, demo_transformer.step_transformer,
         demo_onnx.step_onnx_export, demo_onnx_roundtrip.step_onnx_roundtrip,
         demo_onnx_outputs.step_onnx_outputs, demo_prune.step_prune, demo_quantize.step_quantize,
         demo_quant_anchor.step_quant_anchor,
         demo_int8_onnx.step_int8_onnx, demo_int8.step_int8,
         demo_int8_attention.step_int8_attention, demo_int8_rows.step_int8_rows,
         demo_int8_threads.step_int8_threads, demo_view.step_view, demo_threads.step_threads,
         demo_native_pool.step_native_pool, demo_profile.step_profile,
         demo_cli.step_cli,
         demo.step_hostile_input, demo_hostile.step_hostile,
         demo_limits.step_limits]


def run_demo(out: str) -> int:
    os.makedirs(out, exist_ok=True)
    for step in STEPS:
        step(out)
    demo._banner("done")
    return 0
