"""Attention with a mask given as an input (float or boolean, with or without is_causal), its
fully-masked-row guard, past keys / values, grouped heads, softcap and window sizes, comes back as one Attention node
(codegen/onnx/passes/attention.py, codegen/onnx/passes/attention_mask.py): outputs equal to the
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
         "test_attention_3d_gqa_with_past_and_present",
         "test_attention_bidirectional_window",  # left / right window sizes (opset 25)
         "test_attention_local_window_rank1_boolean_mask",  # rank-1 mask, causal, window
         "test_attention_local_window_with_past"]  # the band counted after the past keys


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


def test_band_attrs_only_for_a_band():
    import numpy as np

    from msc.codegen.onnx.passes.attention_mask import band_attrs

    i, j = np.indices((4, 6))
    bias = lambda allowed: np.where(allowed, 0.0, -np.inf)
    assert band_attrs(bias(j <= i), 23) == {"is_causal": 1}
    assert band_attrs(bias((j <= i) & (i - j <= 2)), 25) == {"is_causal": 1,
                                                            "left_window_size": 2}
    assert band_attrs(bias((i - j <= 1) & (j - i <= 1)), 25) == {"left_window_size": 1,
                                                                "right_window_size": 1}
    assert band_attrs(bias(j - i <= 0), 25) == {"is_causal": 1}  # right window 0: causal
    assert band_attrs(bias((j <= i) & (i - j <= 2)), 24) is None  # no window attrs yet
    assert band_attrs(bias(j != 2), 25) is None  # not a band
    assert band_attrs(np.where(j <= i, 0.0, -1e9), 25) is None  # not -inf
