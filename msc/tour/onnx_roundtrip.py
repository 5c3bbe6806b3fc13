"""``msc demo`` step: ONNX -> MSCGraph -> ONNX for a model whose parameters are tensors read at
run time, and the custom-domain form of a graph."""

from __future__ import annotations

import os

from .shared import banner


def _slice_model():
    """y = Slice(x, starts, ends, axes, steps): every parameter is a graph input."""
    from onnx import TensorProto, helper

    ints = [helper.make_tensor_value_info(n, TensorProto.INT64, [2])
            for n in ("starts", "ends", "axes", "steps")]
    graph = helper.make_graph(
        [helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])], "slice",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 5]), *ints],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def step_onnx_roundtrip(out: str) -> None:
    """A Slice with run-time bounds comes back as Gather / Where arithmetic on its inputs and
    runs in onnxruntime like the original; gelu at opset 13 with custom_domain=True is one
    node of domain ai.msc backed by a model-local function."""
    import numpy as np

    from msc.codegen import to_onnx
    from msc.frontends.onnx.api import from_onnx

    try:
        import onnxruntime as ort
    except ImportError:
        print("(onnxruntime is not installed: not run)")
        return
    original = _slice_model()
    path = os.path.join(out, "demo_slice.onnx")
    written = to_onnx(*from_onnx(original), path, opset=18)
    banner("to_onnx: parameters read at run time (Slice bounds given as inputs)")
    x = np.arange(30, dtype=np.float32).reshape(6, 5)
    worst = 0.0
    for bounds in ([1, 0], [5, 4], [0, 1], [2, 1]), ([-1, 4], [-7, 0], [0, 1], [-1, -2]):
        feeds = [x, *(np.asarray(b, np.int64) for b in bounds)]
        want = ort.InferenceSession(original.SerializeToString()).run(None, dict(
            zip(["x", "starts", "ends", "axes", "steps"], feeds)))[0]
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        got = session.run(None, dict(zip([i.name for i in session.get_inputs()], feeds)))[0]
        if got.shape != want.shape:
            raise SystemExit(f"shape {got.shape} != {want.shape} for bounds {bounds}")
        worst = max(worst, float(np.abs(got - want).max(initial=0.0)))
        print(f"bounds {bounds}: output {got.shape}, as the original")
    kinds = sorted({n.op_type for n in written.graph.node})
    print(f"written: {len(written.graph.node)} nodes ({kinds})")
    if worst > 0:
        raise SystemExit(f"the written model disagrees with the original ({worst})")
    _custom_domain(out)


def _custom_domain(out: str) -> None:
    import numpy as np
    import onnxruntime as ort
    import torch

    from msc.codegen import to_onnx
    from msc.frontends import translate

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.GELU()).eval()
    graph, weights = translate.from_torch(model, [(["bz", 4], "float32")])
    path = os.path.join(out, "demo_custom.onnx")
    proto = to_onnx(graph, weights, path, opset=13, custom_domain=True)
    banner("to_onnx(custom_domain=True): one node per joint, its subgraph a function")
    print(f"nodes {[(n.domain or 'ai.onnx') + ':' + n.op_type for n in proto.graph.node]}, "
          f"functions {[f.name for f in proto.functions]}")
    x = np.random.default_rng(0).standard_normal((3, 4)).astype("float32")
    got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {
        proto.graph.input[0].name: x})[0]
    with torch.no_grad():
        error = float(np.abs(got - model(torch.from_numpy(x)).numpy()).max())
    print(f"onnxruntime (function inlined) vs torch eager: max abs error {error:.1e}")
    if error > 1e-5:
        raise SystemExit(f"the custom-domain model disagrees with torch ({error})")
