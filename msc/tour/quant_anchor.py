"""Demo step: msc's int8 QDQ against onnxruntime's quantize_static, method by method, and the
exported QDQ model fused by onnxruntime into its int8 kernels."""

from __future__ import annotations

import os

from msc.compression.quantize.testing import tiny_conv_onnx

from .qdq import ort_qdq, sqnr
from .shared import banner

METHODS = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile"}


def _ort_outputs(model, calib: list, held_out: list, method: str) -> list:
    """onnxruntime's own int8 run: ``model`` quantized (uint8 activations, int8 weights,
    calibrated by ``method``), run on ``held_out``."""
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationMethod, QuantType

    qdq = ort_qdq(model, calib, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                  calibrate_method=getattr(CalibrationMethod, method))
    sess = ort.InferenceSession(qdq.SerializeToString(), providers=["CPUExecutionProvider"])
    return [sess.run(None, {"x": x})[0] for x in held_out]


def _fused_ops(qgraph, qweights, out: str) -> list[str]:
    import onnx
    import onnxruntime as ort

    from msc.codegen import to_onnx

    path = os.path.join(out, "tiny_int8.onnx")
    to_onnx(qgraph, qweights, path)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = os.path.join(out, "tiny_int8_ort.onnx")
    ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]


def step_quant_anchor(out: str) -> None:
    """msc vs onnxruntime quantize_static output SQNR per method; ORT fuses msc's export."""
    import contextlib
    import io

    import numpy as np
    import onnxruntime as ort

    from msc.compression.quantize import quantize
    from msc.compression.quantize.runner import make_runner
    from msc.frontends.translate import from_onnx

    os.makedirs(out, exist_ok=True)
    model = tiny_conv_onnx()
    rng = np.random.default_rng(3)
    calib = [rng.random((1, 3, 12, 12), dtype=np.float32) for _ in range(6)]
    held_out = [rng.random((1, 3, 12, 12), dtype=np.float32) for _ in range(3)]
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = [sess.run(None, {"x": x})[0] for x in held_out]
    graph, weights = from_onnx(model)
    banner("int8 QDQ output SQNR vs float: msc / onnxruntime quantize_static (same data)")
    worse = []
    for method, ort_name in METHODS.items():
        with contextlib.redirect_stdout(io.StringIO()):  # onnxruntime's calibrators print
            ort_db = sqnr(ref, _ort_outputs(model, calib, held_out, ort_name))
        qgraph, qweights, _ = quantize(graph, weights, calib,
                                       {"method": method, "per_layer": False})
        run = make_runner(qgraph, qweights)
        msc_db = sqnr(ref, [run([x])[qgraph.output_names[0]] for x in held_out])
        print(f"{method:<11} msc {msc_db:6.2f} dB   onnxruntime {ort_db:6.2f} dB")
        if msc_db < ort_db:
            worse.append(method)
    ops = _fused_ops(qgraph, qweights, out)
    banner("msc's QDQ export after onnxruntime's graph optimizer")
    print(ops)
    if worse or "QLinearConv" not in ops or "DequantizeLinear" in ops:
        raise SystemExit(f"demo: msc below onnxruntime for {worse} or not fused: {ops}")
