"""``msc demo`` step: ONNX sequence / optional outputs and bfloat16 graphs written back by
to_onnx and run in onnxruntime."""

from __future__ import annotations

import os

from .shared import banner


def _sequence_model():
    """s = SplitToSequence(x) (a list of 3 rows), o = Optional(Relu(x))."""
    from onnx import TensorProto as T
    from onnx import helper

    tensor = helper.make_tensor_type_proto(T.FLOAT, None)
    graph = helper.make_graph(
        [helper.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0),
         helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Optional", ["r"], ["o"])],
        "lists", [helper.make_tensor_value_info("x", T.FLOAT, [3, 4])],
        [helper.make_value_info("s", helper.make_sequence_type_proto(tensor)),
         helper.make_value_info("o", helper.make_optional_type_proto(tensor))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def _bf16_model():
    """y = float(Exp(Relu(b)) - b), b = bfloat16(x): onnxruntime has no bfloat16 kernel for
    Relu, Exp or Sub."""
    from onnx import TensorProto as T
    from onnx import helper

    nodes = [helper.make_node("Cast", ["x"], ["b"], to=T.BFLOAT16),
             helper.make_node("Relu", ["b"], ["r"]), helper.make_node("Exp", ["r"], ["e"]),
             helper.make_node("Sub", ["e", "b"], ["d"]),
             helper.make_node("Cast", ["d"], ["y"], to=T.FLOAT)]
    graph = helper.make_graph(nodes, "bf16", [helper.make_tensor_value_info("x", T.FLOAT, [6])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [6])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def _session(path: str):
    import onnxruntime as ort

    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def step_onnx_outputs(out: str) -> None:
    """A list and an optional output come back as a list and an optional; a bfloat16 graph
    runs in onnxruntime through float32 where it has no bfloat16 kernel."""
    import numpy as np

    from msc.codegen import to_onnx
    from msc.frontends.onnx.api import from_onnx

    try:
        import onnxruntime  # noqa: F401 - only whether it is there
    except ImportError:
        print("(onnxruntime is not installed: not run)")
        return
    graph, weights = from_onnx(_sequence_model())
    banner("to_onnx: sequence and optional graph outputs")
    print("graph output kinds:", [(k.kind, k.count) for k in graph.output_kinds])
    path = os.path.join(out, "demo_lists.onnx")
    written = to_onnx(graph, weights, path)
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 6
    seq, opt = _session(path).run(None, {"x": x})
    print(f"written outputs: {[o.type.WhichOneof('value') for o in written.graph.output]}; "
          f"onnxruntime returns a list of {len(seq)} rows and {type(opt).__name__}")
    if not (isinstance(seq, list) and len(seq) == 3 and all(
            np.array_equal(a, b) for a, b in zip(seq, x)) and np.array_equal(opt, x.clip(0))):
        raise SystemExit("the sequence / optional outputs differ from the original's")
    _bf16(out)


def _bf16(out: str) -> None:
    import ml_dtypes
    import numpy as np

    from msc.codegen import to_onnx
    from msc.frontends.onnx.api import from_onnx

    path = os.path.join(out, "demo_bf16.onnx")
    written = to_onnx(*from_onnx(_bf16_model()), path)
    x = np.linspace(-2, 2, 6).astype(np.float32)
    got = _session(path).run(None, {"x": x})[0]
    b = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    ref = np.exp(np.maximum(b, 0)) - b
    banner("to_onnx: bfloat16 through float32 where onnxruntime has no bfloat16 kernel")
    print("written:", [n.op_type for n in written.graph.node])
    print("y =", [round(v, 3) for v in got.tolist()])
    if not np.allclose(got, ref, rtol=2 ** -6, atol=2 ** -6):
        raise SystemExit(f"bfloat16 output {got} differs from {ref}")
