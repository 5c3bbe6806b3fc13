"""``msc demo`` step: ONNX detection / resize ops whose sizes depend on run-time values:
NonMaxSuppression (the number of kept boxes) and an antialiased Resize whose scale is a graph
input, one build each, checked against onnx's reference evaluator."""

from __future__ import annotations

import numpy as np

from .shared import banner


def _model(op: str, inputs: list, opset: int, **attrs):
    from onnx import helper

    node = helper.make_node(op, [n for n, _, _ in inputs], ["y"], **attrs)
    graph = helper.make_graph(
        [node], op, [helper.make_tensor_value_info(n, t, d) for n, t, d in inputs],
        [helper.make_tensor_value_info("y", 0, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def _check(model, feeds_list, show) -> None:
    from onnx.reference import ReferenceEvaluator

    from msc import relax
    from msc.frontends.onnx.api import from_onnx

    vm = relax.VirtualMachine(relax.build(from_onnx(model, as_msc=False)[0]), relax.cpu())
    reference = ReferenceEvaluator(model)
    for feeds in feeds_list:
        got = vm["main"](*feeds.values()).numpy()
        want = reference.run(None, feeds)[0]
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-5):
            raise SystemExit(f"{model.graph.name}: msc gives {got.shape}, the ONNX reference "
                             f"{want.shape} (or other values)")
        print(show(feeds, got))


def step_onnx_vision(out: str) -> None:
    """NonMaxSuppression and Resize with values known at run time, vs the ONNX reference."""
    from onnx import TensorProto as T

    banner("ONNX NonMaxSuppression / Resize: outputs sized by run-time values")
    rng = np.random.default_rng(0)
    nms = _model("NonMaxSuppression", [("boxes", T.FLOAT, [1, 8, 4]),
                                       ("scores", T.FLOAT, [1, 2, 8]),
                                       ("max_out", T.INT64, [1]), ("iou", T.FLOAT, [1])], 11)
    lo = rng.uniform(0, 3, (1, 8, 2)).astype("float32")
    boxes = np.concatenate([lo, lo + 2], -1)
    scores = rng.random((1, 2, 8), dtype="float32")
    _check(nms, [{"boxes": boxes, "scores": scores, "max_out": np.array([k], "int64"),
                  "iou": np.array([t], "float32")} for k, t in ((2, 0.3), (8, 0.6))],
           lambda f, y: f"NMS max {int(f['max_out'][0])}, iou {float(f['iou'][0]):.1f}: "
                        f"{len(y)} boxes kept")
    resize = _model("Resize", [("x", T.FLOAT, [1, 1, 8, 8]), ("roi", T.FLOAT, [0]),
                               ("scales", T.FLOAT, [4])], 19, mode="cubic", antialias=1)
    x = rng.random((1, 1, 8, 8), dtype="float32")
    _check(resize, [{"x": x, "roi": np.zeros(0, "float32"),
                     "scales": np.array([1, 1, s, s], "float32")} for s in (0.6, 0.35)],
           lambda f, y: f"Resize cubic antialias, scale {float(f['scales'][2]):.2f}: {y.shape}")
