"""``msc demo`` step: an ONNX model whose parameters are graph inputs, built once and run with
different values (axes of a reduction, a reshape target computed at run time)."""

from __future__ import annotations

import numpy as np

from .shared import banner


def _model():
    """y = ReduceSum(x, axes) with axes a graph input; z = Reshape(x, shape) likewise."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0),
             helper.make_node("Reshape", ["x", "shape"], ["z"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
              helper.make_tensor_value_info("axes", TensorProto.INT64, [1]),
              helper.make_tensor_value_info("shape", TensorProto.INT64, [2])]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in "yz"]
    graph = helper.make_graph(nodes, "runtime_values", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 10
    return model


def step_onnx_runtime_values(out: str) -> None:
    """Axes and a reshape target given at run time: one build, two runs, checked vs numpy."""
    from msc import relax
    from msc.frontends.onnx.api import from_onnx

    mod, _ = from_onnx(_model(), as_msc=False)
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), relax.cpu())
    banner("ONNX parameters known only at run time: one build, any values")
    x = np.arange(24, dtype="float32").reshape(2, 3, 4)
    for axis, shape in ((0, [4, 6]), (-1, [-1, 2])):
        y, z = (r.numpy() for r in vm["main"](x, np.array([axis], "int64"),
                                               np.array(shape, "int64")))
        if not (np.array_equal(y, x.sum(axis)) and np.array_equal(z, x.reshape(shape))):
            raise SystemExit(f"run-time values: wrong result for axes=[{axis}], "
                             f"shape={shape}")
        print(f"axes=[{axis:2d}] -> sum {y.shape}; shape={shape} -> reshape {z.shape}")
