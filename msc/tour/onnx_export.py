"""``msc demo`` step: an MSCGraph written out as ONNX and run in onnxruntime."""

from __future__ import annotations

import os

from .shared import banner


def step_onnx_export(out: str) -> None:
    """torch -> MSCGraph -> ONNX (checked with full_check), symbolic batch as dim_param, run in
    onnxruntime against torch eager."""
    import numpy as np
    import torch

    from msc.codegen import to_onnx
    from msc.frontends import translate

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                torch.nn.Linear(8, 4), torch.nn.Softmax(-1)).eval()
    graph, weights = translate.from_torch(model, [(["bz", 3, 16, 16], "float32")])
    path = os.path.join(out, "demo_net.onnx")
    proto = to_onnx(graph, weights, path, opset=17)
    banner("codegen.to_onnx: an MSCGraph as an ONNX model (checker full_check passed)")
    dims = [d.dim_param or d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim]
    print(f"{path}: opset {proto.opset_import[0].version}, input "
          f"{proto.graph.input[0].name}{dims}, nodes {[n.op_type for n in proto.graph.node]}")
    try:
        import onnxruntime as ort
    except ImportError:
        print("(onnxruntime is not installed: not run)")
        return
    x = np.random.default_rng(0).random((3, 3, 16, 16), dtype="float32")
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: x})[0]
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    error = float(np.abs(got - want).max())
    print(f"onnxruntime at batch 3 vs torch eager: max abs error {error:.1e}")
    if error > 1e-5:
        raise SystemExit(f"the ONNX model disagrees with torch ({error})")
