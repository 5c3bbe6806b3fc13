"""ONNX -> MSCGraph -> ONNX: node conformance cases of every op family and light-zoo models
come back out as models the checker accepts (full_check), onnxruntime runs them with the
expected outputs (onnx's own tolerances for the cases; rtol 1e-5, atol 1e-6 against the
original model for the zoo), and they have no more nodes than the originals.
The whole node suite and zoo are in benchmarks/onnx_export.py."""

from pathlib import Path

import numpy as np
import onnx
import pytest

from tests.helpers.onnx_conformance import run_onnxruntime
from tests.helpers.onnx_export import export, node_cases, round_trip_case

pytest.importorskip("onnxruntime")

# A fixed subset: every op family the codegen writes at least once (module -> cases).
SUBSET = {
    "abs": ["test_abs"], "exp": ["test_exp"], "sigmoid": ["test_sigmoid"],
    "erf": ["test_erf"], "sign": ["test_sign"], "round": ["test_round"],
    "isnan": ["test_isnan"], "reciprocal": ["test_reciprocal"],
    "add": ["test_add_bcast"], "div": ["test_div"], "pow": ["test_pow"],
    "mod": ["test_mod_mixed_sign_float32", "test_mod_float_edge_cases_fmod_0_float32"], "equal": ["test_equal"],
    "less_or_equal": ["test_less_equal"], "and_": ["test_and2d"],
    "xor": ["test_xor_bcast3v1d"], "bitwiseand": ["test_bitwise_and_i32_2d"],
    "where": ["test_where_example"], "cast": ["test_cast_FLOAT_to_DOUBLE"],
    "clip": ["test_clip_default_min"], "sum": ["test_sum_one_input"],
    "conv": ["test_conv_with_strides_padding"], "convtranspose": ["test_convtranspose_pads"],
    "maxpool": ["test_maxpool_2d_pads"], "averagepool": ["test_averagepool_2d_pads"],
    "globalaveragepool": ["test_globalaveragepool"],
    "batch_normalization": ["test_batchnorm_epsilon"],
    "instance_normalization": ["test_instancenorm_epsilon"],
    "layernormalization": ["test_layer_normalization_2d_axis1_expanded",
                           "test_layer_normalization_4d_axis2"],  # re-fused, 3 outputs
    "gemm": ["test_gemm_all_attributes"],  # transposes, alpha, beta re-fused
    "rmsnormalization": ["test_rms_normalization_3d_axis1_epsilon"],  # re-fused
    "softmax_cross_entropy_loss": ["test_sce_mean_weight", "test_sce_mean_log_prob"],
    "relu": ["test_relu"], "leakyrelu": ["test_leakyrelu"], "gelu": ["test_gelu_default_1"],
    "softmax": ["test_softmax_axis_1"], "logsoftmax": ["test_logsoftmax_axis_1"],
    "prelu": ["test_prelu_broadcast_expanded"], "softplus": ["test_softplus_example_expanded_ver18"],
    "transpose": ["test_transpose_all_permutations_3"], "concat": ["test_concat_3d_axis_1"],
    "split": ["test_split_equal_parts_2d"], "flatten": ["test_flatten_axis1"],
    "depthtospace": ["test_depthtospace_crd_mode_example"],
    "gather": ["test_gather_0"], "gathernd": ["test_gathernd_example_int32"],
    "scatternd": ["test_scatternd_add"], "nonzero": ["test_nonzero_example"],
    "reducemean": ["test_reduce_mean_default_axes_keepdims_example"],
    "argmax": ["test_argmax_keepdims_example"], "cumsum": ["test_cumsum_1d_exclusive"],
    "matmul": ["test_matmul_3d"], "einsum": ["test_einsum_batch_matmul"],
    "eyelike": ["test_eyelike_with_dtype"], "trilu": ["test_tril", "test_triu"],
    "size": ["test_size"], "shape": ["test_shape"],
    "nonmaxsuppression": ["test_nonmaxsuppression_two_batches"], "col2im": ["test_col2im_pads"],
    "gridsample": ["test_gridsample_volumetric_bilinear_align_corners_0", "test_gridsample_bicubic"],
    "deformconv": ["test_deform_conv_with_mask_bias", "test_basic_deform_conv_without_padding"],
    "det": ["test_det_nd"],
    "convinteger": ["test_convinteger_without_padding"], "matmulinteger": ["test_matmulinteger"],
}
# Parameters given as tensors read at run time (slice bounds, k, reduce axes, a Range's length,
# a Reshape's shape): the MSCGraph links them through element prims, written as Gather /
# Concat / Where arithmetic on int64 values, so these come back larger than they went in.
RUN_TIME = {
    "slice": ["test_slice"], "trilu": ["test_tril_neg"],
    "rangeop": ["test_range_float_type_positive_delta"],
    "reduce_log_sum": ["test_reduce_log_sum_asc_axes"],
    "reducesum": ["test_reduce_sum_empty_set"],  # opset 13: run-time zero dims, no allowzero
    "reshape": ["test_reshape_allowzero_reordered"], "expand": ["test_expand_dim_changed"],
    "constantofshape": ["test_constantofshape_int_zeros"],
    "blackmanwindow": ["test_blackmanwindow"],
}
CASES = node_cases(SUBSET)
RUN_TIME_CASES = node_cases(RUN_TIME)
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case_comes_back(name):
    result = round_trip_case(CASES[name])
    assert result["status"] == "pass", result["message"]
    assert result["nodes_out"] <= result["nodes_in"]


@pytest.mark.parametrize("name", sorted(RUN_TIME_CASES))
def test_run_time_parameters_come_back(name):
    result = round_trip_case(RUN_TIME_CASES[name])
    assert result["status"] == "pass", result["message"]


@pytest.mark.parametrize("name", ["squeezenet", "shufflenet"])
def test_light_zoo_model_comes_back(name):
    model = onnx.load(LIGHT / f"light_{name}.onnx")
    written = export(model)
    onnx.checker.check_model(written, full_check=True)
    assert len(written.graph.node) <= len(model.graph.node)
    x = np.random.default_rng(0).random((1, 3, 224, 224), dtype="float32")
    want, got = run_onnxruntime(model, [x]), run_onnxruntime(written, [x])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
