"""``msc demo`` step: a graph quantized by compression.quantize, written as ONNX, run by
onnxruntime's int8 kernels."""

from __future__ import annotations

import os

from .shared import banner


def _optimized_ops(path: str) -> list[str]:
    import onnx
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = path.replace(".onnx", "_ort.onnx")
    ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]


def step_int8_onnx(out: str) -> None:
    """torch -> MSCGraph -> quantize (int8 weights kept as int8) -> ONNX QDQ -> onnxruntime's
    QLinearConv / QGemm, within one quantization step of msc's own backend."""
    import numpy as np
    import torch

    from msc import relax
    from msc.codegen import to_onnx, to_relax
    from msc.compression.quantize import quantize
    from msc.frontends import translate

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.Linear(64 * 8 * 8, 10)).eval()
    graph, weights = translate.from_torch(model, [([1, 3, 8, 8], "float32")])
    rng = np.random.default_rng(0)
    batches = [{"inp_0": rng.random((1, 3, 8, 8), dtype="float32")} for _ in range(4)]
    qgraph, qweights, report = quantize(graph, weights, batches,
                                        {"per_layer": False, "quantize_outputs": True})
    paths = [os.path.join(out, f"demo_{k}.onnx") for k in ("float", "int8")]
    to_onnx(graph, weights, paths[0])
    to_onnx(qgraph, qweights, paths[1])
    sizes = [os.path.getsize(p) for p in paths]
    banner("compression.quantize -> codegen.to_onnx: int8 initializers + QDQ")
    print(f"{paths[1]}: {sizes[1]:,} bytes (float: {sizes[0]:,}, x{sizes[0] / sizes[1]:.1f})")
    try:
        import onnxruntime as ort
    except ImportError:
        print("(onnxruntime is not installed: not run)")
        return
    ops = _optimized_ops(paths[1])
    print(f"onnxruntime's optimized graph: {ops}")
    x = batches[0]["inp_0"]
    got = ort.InferenceSession(paths[1], providers=["CPUExecutionProvider"]).run(
        None, {"inp_0": x})[0]
    vm = relax.VirtualMachine(relax.build(to_relax(qgraph, qweights)), relax.cpu())
    error = float(np.abs(got - vm["main"](x).numpy()).max())
    step = max(float(np.max(e["scale"])) for e in report.plan.values() if e["axis"] == -1)
    print(f"onnxruntime int8 vs msc VM on the QDQ graph: max abs error {error:.1e} "
          f"(one step: {step:.1e})")
    if ops.count("QLinearConv") != 2 or error > step or sizes[0] < 3 * sizes[1]:
        raise SystemExit("the int8 ONNX model is not fused, not smaller or disagrees with msc")
