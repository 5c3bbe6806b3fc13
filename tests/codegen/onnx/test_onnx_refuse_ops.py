"""Single ONNX ops the importer spells out come back as the one op (codegen/onnx/passes/ops.py,
codegen/onnx/passes/acts.py, codegen/onnx/passes/attention.py):
each case passes in onnxruntime with the expected outputs and has no more nodes than the
original."""

import pytest

from tests.helpers.onnx_export import export, model_opset, node_cases, round_trip_case

pytest.importorskip("onnxruntime")

# module -> (case, the op the written model holds)
CASES = {
    "clip": ("test_clip", "Clip"),
    "argmax": ("test_argmax_default_axis_example_select_last_index", "ArgMax"),
    "argmin": ("test_argmin_default_axis_example_select_last_index", "ArgMin"),
    "cumsum": ("test_cumsum_1d_reverse_exclusive", "CumSum"),
    "reducel1": ("test_reduce_l1_default_axes_keepdims_example", "ReduceL1"),
    "reducel2": ("test_reduce_l2_default_axes_keepdims_example", "ReduceL2"),
    "reducesumsquare": ("test_reduce_sum_square_default_axes_keepdims_example",
                        "ReduceSumSquare"),
    "reduce_log_sum": ("test_reduce_log_sum_default", "ReduceLogSum"),
    "hardmax": ("test_hardmax_axis_0", "Hardmax"),
    "elu": ("test_elu", "Elu"),
    "celu": ("test_celu", "Celu"),
    "lppool": ("test_lppool_2d_default", "LpPool"),
    "pow": ("test_pow_types_float32_int32", "Pow"),
    "compress": ("test_compress_0", "Compress"),
    "castlike": ("test_castlike_FLOAT16_to_FLOAT8E4M3FN", "Cast"),
    "trilu": ("test_triu_neg", "Trilu"),
    "attention": ("test_attention_3d", "Attention"),  # heads split and merged back
}
MORE = [("attention", "test_attention_4d_causal", "Attention"),
        # codegen/onnx/passes/acts.py
        ("selu", "test_selu", "Selu"), ("thresholdedrelu", "test_thresholdedrelu",
                                         "ThresholdedRelu"),
        ("hardsigmoid", "test_hardsigmoid", "HardSigmoid"),
        ("hardswish", "test_hardswish", "HardSwish"), ("isinf", "test_isinf_negative", "IsInf"),
        ("lpnormalization", "test_l1normalization_axis_0", "LpNormalization"),
        ("topk", "test_top_k_negative_axis", "TopK"),
        ("constantofshape", "test_constantofshape_int_zeros", "ConstantOfShape"),
        ("spacetodepth", "test_spacetodepth", "SpaceToDepth"),
        # codegen/onnx/passes/axes.py: axes given at run time
        ("reducemax", "test_reduce_max_do_not_keepdims_random", "ReduceMax"),
        ("reducel2", "test_reduce_l2_keep_dims_random", "ReduceL2"),
        ("reduce_log_sum", "test_reduce_log_sum_negative_axes", "ReduceLogSum"),
        ("unsqueeze", "test_unsqueeze_two_axes", "Unsqueeze"),
        ("squeeze", "test_squeeze_negative_axes", "Squeeze")]


ALL = [(m, name, op) for m, (name, op) in CASES.items()] + MORE


@pytest.fixture(scope="module")
def cases():
    wanted: dict = {}
    for module, name, _ in ALL:
        wanted.setdefault(module, []).append(name)
    return node_cases(wanted)


@pytest.mark.parametrize("module, name, op", ALL, ids=[name for _, name, _ in ALL])
def test_spelled_op_comes_back_as_one(cases, module, name, op):
    result = round_trip_case(cases[name])
    assert result["status"] == "pass", result["message"]
    assert result["nodes_out"] <= result["nodes_in"], result
    model = cases[name].model
    assert op in [n.op_type for n in export(model, model_opset(model)).graph.node]


def test_reduce_axes_become_an_attr_before_opset_18():
    case = node_cases({"logsoftmax": ["test_logsoftmax_axis_0_expanded"]})[
        "test_logsoftmax_axis_0_expanded"]
    result = round_trip_case(case, opset=13)
    assert result["status"] == "pass", result["message"]
    nodes = export(case.model, 13).graph.node
    log_sum = [n for n in nodes if n.op_type == "ReduceLogSum"]
    assert log_sum and len(log_sum[0].input) == 1 and \
        [a.name for a in log_sum[0].attribute if a.name == "axes"]


def _axes_graph(shape_nodes):
    """x [2, 3] reshaped to dims computed from the int64 input ``axes`` [1], then reduced
    over the odd axes (how the importer spells ReduceMax(x, axes, keepdims=1))."""
    rows = shape_nodes + [("Reshape", ["x", "shape"], "view", {}),
                          ("ReduceMax", ["view", "odd"], "y", {"keepdims": 0})]
    from msc.codegen.onnx.node import OnnxNode

    return [OnnxNode(op, ins, [out], name=out, attrs=attrs) for op, ins, out, attrs in rows]


def test_run_time_axes_fold_only_when_the_shapes_check_out():
    import numpy as np

    from msc.codegen.onnx.passes.axes import fold_runtime_axes
    from msc.codegen.onnx.passes.walk import Walk

    consts = {"i0": np.asarray([0]), "zero": np.asarray([0]), "two": np.asarray([2]),
              "zeros": np.zeros(4, np.int64), "first": np.asarray([1, 2, 3, 1]),
              "second": np.asarray([2, 1, 1, 3]), "odd": np.asarray([1, 3])}
    shapes, dtypes = {"x": [2, 3], "axes": [1]}, {"x": "float32", "axes": "int64"}
    # right for every axes value: [-2, 2) wrapped, 0 -> first, 1 -> second
    right = _axes_graph([
        ("Gather", ["axes", "i0"], "g", {"axis": 0}), ("Less", ["g", "zero"], "neg", {}),
        ("Add", ["g", "two"], "up", {}), ("Where", ["neg", "up", "g"], "a", {}),
        ("Equal", ["a", "zero"], "is0", {}), ("Where", ["is0", "first", "second"], "shape", {})])
    walk = Walk.of(right, consts, {"y"}, shapes, dtypes, 18)
    fold_runtime_axes(walk)
    folded = walk.graph.nodes[-1]
    assert (folded.op_type, folded.inputs, folded.attrs) == (
        "ReduceMax", ["x", "axes"], {"keepdims": 1})
    assert "view" not in walk.made  # the Reshape is gone
    # right for axes [1] only: stays spelled out
    wrong = _axes_graph([("Gather", ["axes", "i0"], "g", {"axis": 0}),
                         ("Mul", ["g", "zeros"], "m", {}), ("Add", ["m", "second"], "shape", {})])
    walk = Walk.of(wrong, consts, {"y"}, shapes, dtypes, 18)
    fold_runtime_axes(walk)
    assert [n.op_type for n in walk.graph.nodes] == [n.op_type for n in wrong]
    assert walk.graph.nodes[-1].inputs == ["view", "odd"]
