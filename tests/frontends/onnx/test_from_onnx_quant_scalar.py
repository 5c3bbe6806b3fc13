"""QuantizeLinear / DequantizeLinear of rank-0 tensors (onnxruntime's quantize_static makes
them for scalar constants, e.g. attention's 1/sqrt(d)) import and match onnxruntime."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper

from msc import relax
from msc.codegen import to_relax
from msc.frontends.translate import from_onnx


def test_scalar_qdq_imports_and_matches_onnxruntime():
    inits = [numpy_helper.from_array(np.array(37, np.uint8), "cq"),
             numpy_helper.from_array(np.array(0.01, np.float32), "s"),
             numpy_helper.from_array(np.array(3, np.uint8), "z"),
             numpy_helper.from_array(np.array(0.2, np.float32), "t")]
    nodes = [helper.make_node("DequantizeLinear", ["cq", "s", "z"], ["c"]),
             helper.make_node("QuantizeLinear", ["t", "s", "z"], ["tq"]),
             helper.make_node("DequantizeLinear", ["tq", "s", "z"], ["td"]),
             helper.make_node("Mul", ["x", "c"], ["m"]),
             helper.make_node("Add", ["m", "td"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    vm = relax.VirtualMachine(relax.build(to_relax(*from_onnx(model))), relax.cpu())
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(vm["main"](x).numpy(), session.run(None, {"x": x})[0],
                               rtol=1e-6, atol=1e-7)
