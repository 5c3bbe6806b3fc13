"""Attention with a mask given as an input (float or boolean, with or without is_causal), its
fully-masked-row guard, past keys / values, grouped heads and softcap, comes back as one Attention node
(codegen/onnx_refuse_attention.py, onnx_refuse_attention_mask.py): outputs equal to the
case's (onnxruntime's on the original), no more nodes than it."""

import pytest

from tests.helpers.onnx_export import export, model_opset, node_cases, round_trip_case

pytest.importorskip("onnxruntime")

NAMES = ["test_attention_4d_attn_mask_3d_causal",  # float mask plus is_causal
         "test_attention_4d_attn_mask_bool",  # boolean mask
         "test_attention_3d_attn_mask",  # heads split and merged around it
         "test_attention_causal_boolmask_nan_robustness",
         "test_attention_3d_with_past_and_present",  # past keys / values, present outputs
         "test_attention_4d_gqa_softcap",  # grouped heads, softcap
         "test_attention_3d_gqa_with_past_and_present"]


@pytest.fixture(scope="module")
def cases():
    return node_cases({"attention": NAMES})


@pytest.mark.parametrize("name", NAMES)
def test_masked_attention_comes_back_as_one(cases, name):
    result = round_trip_case(cases[name])
    assert result["status"] == "pass", result["message"]
    assert result["nodes_out"] <= result["nodes_in"], result
    model = cases[name].model
    nodes = export(model, model_opset(model)).graph.node
    assert [n.op_type for n in nodes] == ["Attention"]
    assert len(nodes[0].input) == len(model.graph.node[0].input)
    assert len(nodes[0].output) == len(model.graph.node[0].output)
