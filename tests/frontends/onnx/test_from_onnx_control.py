"""Control flow: If on a constant condition (inlined branch) or a run-time one (both branches
and a where), Scan over a static sequence (unrolled); and the newer sequence-model ops (opsets 24-28) against
onnx's reference evaluator."""

import numpy as np
import onnx
import pytest
from onnx import helper

from msc.errors import UnsupportedOpError
from msc.frontends.onnx.api import from_onnx
from msc.frontends.onnx.testing import assert_matches_ort, graph_model, node_model, run_reference

RNG = np.random.default_rng(6)
X = RNG.standard_normal((2, 3)).astype("float32")


def branch(name: str, op: str):
    out = helper.make_tensor_value_info(f"{name}_out", onnx.TensorProto.FLOAT, [2, 3])
    return helper.make_graph([helper.make_node(op, ["x"], [f"{name}_out"])], name, [], [out])


@pytest.mark.parametrize("cond", [True, False])
def test_if_on_a_constant_condition_inlines_the_branch(cond):
    node = helper.make_node("If", ["c"], ["y"], then_branch=branch("then", "Relu"),
                            else_branch=branch("else", "Neg"))
    model = graph_model([node], {"x": X}, ["y"], initializers={"c": np.array(cond)})
    assert_matches_ort(model, {"x": X})
    assert "R.If" not in from_onnx(model, as_msc=False)[0].script()


def test_if_on_a_runtime_condition_selects_between_both_branches():
    node = helper.make_node("If", ["c"], ["y"], then_branch=branch("then", "Relu"),
                            else_branch=branch("else", "Neg"))
    for cond in (True, False):
        feeds = {"x": X, "c": np.array(cond)}
        assert_matches_ort(graph_model([node], feeds, ["y"]), feeds)


def test_if_on_a_runtime_condition_with_differently_shaped_branches_is_unsupported():
    other = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["else_out"], keepdims=0)], "else", [],
        [helper.make_tensor_value_info("else_out", onnx.TensorProto.FLOAT, [])])
    node = helper.make_node("If", ["c"], ["y"], then_branch=branch("then", "Relu"),
                            else_branch=other)
    model = graph_model([node], {"x": X, "c": np.array(True)}, ["y"])
    with pytest.raises(UnsupportedOpError, match="run time"):
        from_onnx(model, as_msc=False)


def test_scan_running_sum_both_directions():
    state_in = helper.make_tensor_value_info("s_in", onnx.TensorProto.FLOAT, [3])
    x_in = helper.make_tensor_value_info("x_t", onnx.TensorProto.FLOAT, [3])
    outs = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [3])
            for n in ("s_out", "y_t")]
    body = helper.make_graph([helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
                              helper.make_node("Identity", ["s_out"], ["y_t"])],
                             "body", [state_in, x_in], outs)
    xs = RNG.standard_normal((4, 3)).astype("float32")
    feeds = {"s": np.zeros(3, "float32"), "xs": xs}
    model = node_model("Scan", feeds, 2, body=body, num_scan_inputs=1,
                       scan_input_directions=[1], scan_output_directions=[0])
    assert_matches_ort(model, feeds)


def test_tensor_scatter_circular():
    cache = RNG.standard_normal((2, 3, 5, 4)).astype("float32")
    update = RNG.standard_normal((2, 3, 2, 4)).astype("float32")
    feeds = {"c": cache, "u": update, "w": np.array([1, 4], "int64")}
    model = node_model("TensorScatter", feeds, opset=24, mode="circular")
    assert_matches_ort(model, feeds, reference=run_reference)


@pytest.mark.parametrize("activation", ["none", "silu"])
def test_causal_conv_with_state(activation):
    feeds = {"x": RNG.standard_normal((2, 3, 6)).astype("float32"),
             "w": RNG.standard_normal((3, 1, 4)).astype("float32"),
             "b": RNG.standard_normal(3).astype("float32"),
             "s": RNG.standard_normal((2, 3, 3)).astype("float32")}
    model = node_model("CausalConvWithState", feeds, 2, opset=27, activation=activation)
    assert_matches_ort(model, feeds, reference=run_reference)


def test_swiglu():
    feeds = {"a": X, "b": X[::-1].copy()}
    assert_matches_ort(node_model("SwiGLU", feeds, opset=28, alpha=1.5), feeds,
                       reference=run_reference)


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
def test_linear_attention(rule):
    b, t, hq, hkv, dk, dv = 2, 3, 4, 2, 4, 3
    feeds = {"q": RNG.standard_normal((b, t, hq * dk)).astype("float32"),
             "k": RNG.standard_normal((b, t, hkv * dk)).astype("float32"),
             "v": RNG.standard_normal((b, t, hkv * dv)).astype("float32"),
             "s": RNG.standard_normal((b, hkv, dk, dv)).astype("float32")}
    if "gated" in rule:
        feeds["d"] = -np.abs(RNG.standard_normal((b, t, hkv))).astype("float32")
    else:
        feeds["d"] = None
    if "delta" in rule:
        feeds["beta"] = RNG.random((b, t, hkv), dtype=np.float32)
    model = node_model("LinearAttention", feeds, 2, opset=27, update_rule=rule,
                       q_num_heads=hq, kv_num_heads=hkv)
    feeds = {k: v for k, v in feeds.items() if v is not None}
    assert_matches_ort(model, feeds, reference=run_reference, rtol=1e-4, atol=1e-5)
