"""bfloat16 graphs run in onnxruntime: ops it has no bfloat16 kernel for go through float32
(codegen/onnx/bf16.py) and the outputs equal the conformance references."""

import pytest
from onnx import TensorProto, shape_inference

from msc.codegen.onnx.bf16 import ORT_BF16, ort_registry_bf16
from tests.helpers.onnx_export import export, node_cases, round_trip_case

pytest.importorskip("onnxruntime")

CASES = {"celu": ["test_celu_bfloat16"], "rangeop": ["test_range_bfloat16_type_positive_delta"],
         "cast": ["test_cast_FLOAT_to_BFLOAT16"]}


def test_table_within_onnxruntime_registry():
    # an op listed but not registered would be written in bfloat16 and fail to load
    assert ORT_BF16 <= ort_registry_bf16()


@pytest.mark.parametrize("name", [n for names in CASES.values() for n in names])
def test_bf16_cases_run_with_reference_outputs(name):
    case = node_cases(CASES)[name]
    result = round_trip_case(case)
    assert result["status"] == "pass", result["message"]
    written = shape_inference.infer_shapes(export(case.model))
    types = {v.name: v.type.tensor_type.elem_type for v in
             [*written.graph.input, *written.graph.value_info, *written.graph.output]}
    for node in written.graph.node:
        if node.op_type not in ORT_BF16:
            assert TensorProto.BFLOAT16 not in [types.get(v) for v in
                                                [*node.input, *node.output]], node
