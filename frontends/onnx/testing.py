"""Helpers for testing the ONNX frontend: one-node models, runs through msc and onnxruntime.

    model = node_model("Relu", {"x": x})                      # inputs by name -> arrays
    assert_matches_ort(model, {"x": x})                       # msc's VM vs onnxruntime
    mod, weights = from_onnx(model, as_msc=False)

Models are written with IR version 10 (onnxruntime 1.31 rejects the 14 onnx 1.23 writes).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

__all__ = ["assert_matches_ort", "graph_model", "node_model", "random_weights", "run_msc",
           "run_ort", "run_reference"]

IR_VERSION = 10


def _value_info(name: str, array=None, dims=None, elem_type=None):
    if array is not None:
        elem_type = helper.np_dtype_to_tensor_dtype(np.asarray(array).dtype)
        dims = list(np.shape(array))
    return helper.make_tensor_value_info(name, elem_type or onnx.TensorProto.FLOAT, dims)


def graph_model(nodes: list, inputs: dict, outputs: list, opset: int = 18,
                initializers: dict | None = None, input_dims: dict | None = None):
    """A model from nodes; ``inputs`` maps names to example arrays (their dtype and shape,
    or ``input_dims[name]`` with str dims for symbolic ones), ``outputs`` names the results."""
    input_dims = input_dims or {}
    graph_inputs = [_value_info(n, a) if n not in input_dims else
                    _value_info(n, dims=input_dims[n],
                                elem_type=helper.np_dtype_to_tensor_dtype(np.asarray(a).dtype))
                    for n, a in inputs.items()]
    graph_outputs = [helper.make_value_info(n, onnx.TypeProto()) for n in outputs]
    inits = [numpy_helper.from_array(np.asarray(v), n) for n, v in (initializers or {}).items()]
    graph = helper.make_graph(nodes, "test", graph_inputs, graph_outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = IR_VERSION
    return model


def node_model(op_type: str, inputs: dict, n_out: int = 1, opset: int = 18,
               initializers: dict | None = None, **attrs):
    """A one-node model; ``inputs`` (graph inputs) then ``initializers`` feed the node in
    order; a None value leaves an optional input out."""
    feeds = {**inputs, **(initializers or {})}
    names = [n if v is not None else "" for n, v in feeds.items()]
    while names and not names[-1]:
        names.pop()
    outputs = [f"y{k}" for k in range(n_out)]
    node = helper.make_node(op_type, names, outputs, **attrs)
    inits = {n: v for n, v in (initializers or {}).items() if v is not None}
    return graph_model([node], {n: v for n, v in inputs.items() if v is not None}, outputs,
                       opset, inits)


def random_weights(model, seed: int = 0):
    """A copy of ``model`` whose weight-producing constants are random: initializers (other
    than int shape tensors) and ConstantOfShape nodes of constant shape (the onnx light zoo
    builds every weight so). 1-D weights are drawn from U(0.5, 1.5), so batch-norm variances
    stay positive; others from N(0, 1 / fan_in)."""
    rng = np.random.default_rng(seed)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    shapes = {t.name: numpy_helper.to_array(t) for t in graph.initializer
              if t.data_type == onnx.TensorProto.INT64}
    made, kept = [], []
    for node in graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in shapes:
            made.append(_random(rng, node.output[0], [int(d) for d in shapes[node.input[0]]]))
        else:
            kept.append(node)
    floats = [t for t in graph.initializer if t.data_type == onnx.TensorProto.FLOAT]
    made += [_random(rng, t.name, list(t.dims)) for t in floats]
    rest = [t for t in graph.initializer if t.data_type != onnx.TensorProto.FLOAT]
    del graph.node[:], graph.initializer[:]
    graph.node.extend(kept)
    graph.initializer.extend(rest + made)
    return out


def _random(rng, name: str, shape: list):
    if len(shape) <= 1:
        value = rng.uniform(0.5, 1.5, shape)
    else:
        value = rng.normal(0, 1 / np.sqrt(max(int(np.prod(shape[1:])), 1)), shape)
    return numpy_helper.from_array(value.astype("float32"), name)


def run_msc(model, inputs: dict, **kw) -> list:
    """msc's path: from_onnx(as_msc=False) -> relax.build -> VirtualMachine."""
    from msc import relax

    from .api import from_onnx

    mod, _ = from_onnx(model, as_msc=False, **kw)
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), relax.cpu())
    out = vm["main"](*inputs.values())
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [np.asarray(o.numpy() if hasattr(o, "numpy") else o) for o in outs]


def run_ort(model, inputs: dict) -> list:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4
    sess = ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, inputs)


def run_reference(model, inputs: dict) -> list:
    """onnx's own reference evaluator (for ops onnxruntime lacks)."""
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(model).run(None, inputs)


def assert_matches_ort(model, inputs: dict, rtol: float = 1e-5, atol: float = 1e-5,
                       reference=run_ort, **kw):
    """msc's outputs equal onnxruntime's (or ``reference``'s): shape, dtype, values."""
    got, want = run_msc(model, inputs, **kw), reference(model, inputs)
    assert len(got) == len(want), f"{len(got)} outputs, the reference gives {len(want)}"
    for k, (a, b) in enumerate(zip(got, want)):
        assert a.shape == b.shape, f"output {k}: shape {a.shape}, onnxruntime {b.shape}"
        assert a.dtype == b.dtype, f"output {k}: dtype {a.dtype}, onnxruntime {b.dtype}"
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"output {k}")
