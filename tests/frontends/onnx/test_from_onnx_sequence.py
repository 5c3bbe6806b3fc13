"""Sequences (Relax tuples known at import), optionals (present / absent at import) and Loop
with a constant trip count (unrolled), against onnxruntime."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from msc import relax
from msc.errors import UnsupportedOpError
from msc.frontends.onnx.api import from_onnx
from msc.frontends.onnx.testing import IR_VERSION, assert_matches_ort, graph_model, run_ort

RNG = np.random.default_rng(15)
A = RNG.standard_normal((2, 3)).astype("float32")
B = RNG.standard_normal((2, 3)).astype("float32")


def run_vm(model, args: list, input_info=None):
    mod, _ = from_onnx(model, input_info=input_info, as_msc=False)
    return relax.VirtualMachine(relax.build(mod, target="llvm"), relax.cpu())["main"](*args)


def test_sequence_ops_inside_a_graph_match_onnxruntime():
    pos = helper.make_tensor("pos", TensorProto.INT64, [], [0])
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
             helper.make_node("Constant", [], ["p"], value=pos),
             helper.make_node("SequenceInsert", ["s", "b", "p"], ["s2"]),
             helper.make_node("SplitToSequence", ["a"], ["parts"], axis=1, keepdims=0),
             helper.make_node("SequenceAt", ["parts", "p"], ["first"]),
             helper.make_node("SequenceLength", ["s2"], ["n"]),
             helper.make_node("ConcatFromSequence", ["s2"], ["y"], axis=0),
             helper.make_node("ConcatFromSequence", ["s2"], ["z"], axis=1, new_axis=1)]
    model = graph_model(nodes, {"a": A, "b": B}, ["y", "z", "first", "n"], opset=17)
    assert_matches_ort(model, {"a": A, "b": B})


def test_sequence_input_and_output_go_through_the_vm_as_tuples():
    seq = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)
    body = helper.make_graph(
        [helper.make_node("Add", ["x", "u"], ["o"])], "body",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("u", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)])
    graph = helper.make_graph(
        [helper.make_node("SequenceMap", ["s", "t"], ["r"], body=body)], "g",
        [seq, helper.make_tensor_value_info("t", TensorProto.FLOAT, [3])],
        [helper.make_tensor_sequence_value_info("r", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              ir_version=IR_VERSION)
    items, t = [A, B[:1]], np.ones(3, "float32")
    out = run_vm(model, [tuple(items), t], input_info={"s": [[2, 3], [1, 3]]})
    expected = run_ort(model, {"s": items, "t": t})[0]
    assert len(out) == len(expected) == 2
    for got, ref in zip(out, expected):
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-6)


def test_sequence_input_without_element_shapes_is_unsupported():
    seq = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("SequenceLength", ["s"], ["y"])], "g", [seq],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    with pytest.raises(UnsupportedOpError, match="input_info"):
        from_onnx(helper.make_model(graph), as_msc=False)


@pytest.mark.parametrize("present", [True, False])
def test_optional_input_present_or_absent_at_import(present):
    opt = helper.make_value_info("o", helper.make_optional_type_proto(
        helper.make_tensor_type_proto(TensorProto.FLOAT, [2, 3])))
    graph = helper.make_graph([helper.make_node("OptionalHasElement", ["o"], ["y"])], "g",
                              [opt], [helper.make_tensor_value_info("y", TensorProto.BOOL, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)],
                              ir_version=IR_VERSION)
    out = run_vm(model, [A] if present else [], input_info=None if present else {"o": None})
    assert bool(out.numpy()) is present


def loop_model(trip) -> onnx.ModelProto:
    """s = s + i each step, the running s collected as a scan output."""
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
         helper.make_node("Add", ["s_in", "fi"], ["s_out"]),
         helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Identity", ["s_out"], ["scan"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info(n, t, None) for n, t in
         (("c_out", TensorProto.BOOL), ("s_out", TensorProto.FLOAT),
          ("scan", TensorProto.FLOAT))])
    node = helper.make_node("Loop", ["m", "", "a"], ["s", "all"], body=body)
    inits = {"m": np.array(trip, "int64")} if trip is not None else {}
    feeds = {"a": A} if trip is not None else {"a": A, "m": np.array(3, "int64")}
    return graph_model([node], feeds, ["s", "all"], opset=17, initializers=inits)


def test_loop_with_a_constant_trip_count_is_unrolled():
    assert_matches_ort(loop_model(4), {"a": A})


def test_loop_with_a_runtime_trip_count_is_unsupported():
    with pytest.raises(UnsupportedOpError, match="run time"):
        from_onnx(loop_model(None), as_msc=False)


def seq_branch(name: str, values: list):
    const = helper.make_tensor(f"{name}_c", TensorProto.FLOAT, [3], values)
    return helper.make_graph(
        [helper.make_node("Constant", [], [f"{name}_x"], value=const),
         helper.make_node("SequenceConstruct", [f"{name}_x"], [f"{name}_out"])], name, [],
        [helper.make_tensor_sequence_value_info(f"{name}_out", TensorProto.FLOAT, None)])


@pytest.mark.parametrize("cond", [True, False])
def test_if_on_a_runtime_condition_selects_between_sequences(cond):
    node = helper.make_node("If", ["c"], ["r"], then_branch=seq_branch("t", [1, 2, 3]),
                            else_branch=seq_branch("e", [3, 2, 1]))
    model = graph_model([node], {"c": np.array(cond)}, ["r"], opset=17)
    out = run_vm(model, [np.array(cond)])
    np.testing.assert_array_equal(out[0].numpy(), run_ort(model, {"c": np.array(cond)})[0][0])


def test_loop_with_a_runtime_trip_count_adding_a_step_runs_in_closed_form():
    """s += d each step (ONNX's expanded Range): one build, two trip counts, vs onnxruntime."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Add", ["s_in", "d"], ["s_out"]),
         helper.make_node("Identity", ["s_in"], ["scan"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info(n, t, None) for n, t in
         (("c_out", TensorProto.BOOL), ("s_out", TensorProto.FLOAT),
          ("scan", TensorProto.FLOAT))])
    node = helper.make_node("Loop", ["m", "c", "a"], ["s", "all"], body=body)
    feeds = {"m": np.array(3, "int64"), "c": np.array(True), "a": A, "d": B}
    model = graph_model([node], feeds, ["s", "all"], opset=17)
    mod, _ = from_onnx(model, as_msc=False)
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), relax.cpu())
    for trip, cond in ((3, True), (5, True), (4, False)):
        feeds.update(m=np.array(trip, "int64"), c=np.array(cond))
        got = vm["main"](*feeds.values())
        for out, ref in zip(got, run_ort(model, feeds)):
            np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6, atol=1e-6)
