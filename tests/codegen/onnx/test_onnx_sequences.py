"""Sequence and optional graph outputs: ONNX -> MSCGraph (output kinds) -> ONNX gives back
SequenceConstruct / SequenceEmpty / Optional outputs, and onnxruntime returns the original's
lists and optionals; the VM, to_relax and to_torch still run such graphs (flat outputs)."""

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

from msc.codegen import to_relax, to_torch
from msc.frontends.onnx.api import from_onnx
from tests.helpers.codegen import assert_outputs, relax_build_and_run, torch_run
from tests.helpers.onnx_conformance import run_msc, run_onnxruntime
from tests.helpers.onnx_export import export, node_cases, round_trip_case

pytest.importorskip("onnxruntime")


def _model():
    """Outputs: a sequence of Split's parts, an optional tensor, a tensor, an empty int64
    sequence and an optional sequence."""
    tensor = helper.make_tensor_type_proto
    seq = helper.make_sequence_type_proto(tensor(T.FLOAT, None))
    nodes = [helper.make_node("Split", ["x"], ["a", "b"], axis=0, num_outputs=2),
             helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
             helper.make_node("Optional", ["x"], ["o"]),
             helper.make_node("Relu", ["x"], ["y"]),
             helper.make_node("SequenceEmpty", [], ["e"], dtype=T.INT64),
             helper.make_node("SequenceConstruct", ["b"], ["s1"]),
             helper.make_node("Optional", ["s1"], ["os"])]
    outs = [helper.make_value_info("s", seq),
            helper.make_value_info("o", helper.make_optional_type_proto(tensor(T.FLOAT, [4, 3]))),
            helper.make_tensor_value_info("y", T.FLOAT, [4, 3]),
            helper.make_value_info("e", helper.make_sequence_type_proto(tensor(T.INT64, None))),
            helper.make_value_info("os", helper.make_optional_type_proto(seq))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [4, 3])],
                              outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def _flat(values: list) -> list:
    return [a for v in values for a in (v if isinstance(v, list) else [v])]


def test_sequences_and_optionals_come_back_as_such():
    model, x = _model(), np.random.default_rng(0).random((4, 3), dtype="float32") - 0.5
    graph, weights = from_onnx(model)
    assert [(k.kind, k.count) for k in graph.output_kinds] == [
        ("sequence", 2), ("optional", 1), ("tensor", 1), ("sequence", 0),
        ("optional_sequence", 1)]
    written = export(model)
    assert [o.type.WhichOneof("value") for o in written.graph.output] == [
        "sequence_type", "optional_type", "tensor_type", "sequence_type", "optional_type"]
    want, got = run_onnxruntime(model, [x]), run_onnxruntime(written, [x])
    assert [type(v) for v in got] == [type(v) for v in want]
    assert got[3] == [] and len(got[0]) == 2
    assert_outputs(_flat(got), _flat(want), rtol=0, atol=0)
    # the VM (Relax path) and the other codegens run the same graph with flat outputs
    assert_outputs(_flat(run_msc(model, [x])), _flat(want))
    assert_outputs(relax_build_and_run(to_relax(graph, weights), [x]), _flat(want))
    assert_outputs(torch_run(to_torch(graph, weights), [x]), _flat(want))


CASES = {"splittosequence": ["test_split_to_sequence_2", "test_split_to_sequence_nokeepdims"],
         "if_": ["test_if_seq"]}


@pytest.mark.parametrize("name", [n for names in CASES.values() for n in names])
def test_conformance_sequence_outputs(name):
    result = round_trip_case(node_cases(CASES)[name])
    assert result["status"] == "pass", result["message"]
