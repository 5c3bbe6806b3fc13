"""``msc demo`` step: ONNX sequences as Relax tuples and a Loop unrolled at import."""

from __future__ import annotations

import numpy as np

from .shared import banner


def _model():
    """y = ConcatFromSequence(SequenceMap(Relu, s)); z = Loop 3 times: z += x."""
    from onnx import TensorProto, helper

    relu = helper.make_graph([helper.make_node("Relu", ["e"], ["r"])], "relu",
                             [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)],
                             [helper.make_tensor_value_info("r", TensorProto.FLOAT, None)])
    step = helper.make_graph(
        [helper.make_node("Add", ["acc", "x"], ["acc_out"]),
         helper.make_node("Identity", ["c"], ["c_out"])], "step",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, None)])
    trip = helper.make_tensor("trip", TensorProto.INT64, [], [3])
    nodes = [helper.make_node("SequenceMap", ["s"], ["m"], body=relu),
             helper.make_node("ConcatFromSequence", ["m"], ["y"], axis=0),
             helper.make_node("Constant", [], ["n"], value=trip),
             helper.make_node("SequenceAt", ["s", "zero"], ["x"]),
             helper.make_node("Loop", ["n", "", "x"], ["z"], body=step)]
    zero = helper.make_tensor("zero", TensorProto.INT64, [], [0])
    graph = helper.make_graph(
        nodes, "sequences",
        [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in "yz"], [zero])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model


def step_onnx_sequence(out: str) -> None:
    """A sequence input of two tensors: mapped, concatenated; a constant Loop unrolled."""
    from msc import relax
    from msc.frontends.onnx.api import from_onnx

    mod, _ = from_onnx(_model(), input_info={"s": [[2, 3], [1, 3]]}, as_msc=False)
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), relax.cpu())
    banner("ONNX sequences as Relax tuples; Loop with a constant trip count unrolled")
    a = np.linspace(-1, 1, 6, dtype="float32").reshape(2, 3)
    b = np.full((1, 3), 2, "float32")
    y, z = (r.numpy() for r in vm["main"]((a, b)))
    if not (np.array_equal(y, np.maximum(np.concatenate([a, b]), 0))
            and np.allclose(z, 4 * a)):
        raise SystemExit("sequences: wrong result")
    print(f"sequence of {a.shape} and {b.shape} -> Relu each, concat {y.shape}")
    print(f"Loop x3 (acc += s[0]) unrolled at import -> {z.shape}, equal to 4 * s[0]")
