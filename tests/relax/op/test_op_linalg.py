"""Struct-info inference of matmul / einsum / outer (defs_linalg) and quantize (defs_quant)."""

from tests.helpers.op_cases import Case, Err, family_tests, t, t_any

CASES = [
    Case("matmul_batched", lambda R, a, b: R.matmul(a, b), [t(2, "n", 4), t(4, 5)],
         "(2, n, 5) float32"),
    Case("matmul_broadcast", lambda R, a, b: R.matmul(a, b, out_dtype="float16"),
         [t(2, "n", 4), t(3, 1, 4, 5)], "(3, 2, n, 5) float16"),
    Case("matmul_vec_vec", lambda R, a, b: R.matmul(a, b), [t(4), t(4)], "() float32"),
    Case("matmul_vec_mat", lambda R, a, b: R.matmul(a, b), [t(4), t(2, 4, 5)],
         "(2, 5) float32"),
    Case("matmul_mat_vec", lambda R, a, b: R.matmul(a, b), [t(2, 3, 4), t(4)],
         "(2, 3) float32"),
    # Symbolic inner dims (n vs m) are assumed equal at run time, as in TVM.
    Case("matmul_symbolic_inner", lambda R, a, b: R.matmul(a, b), [t(2, 3, "n"), t("m", 5)],
         "(2, 3, 5) float32"),
    Case("matmul_out_dtype_mixed", lambda R, a, b: R.matmul(a, b, "float32"),
         [t(3, 4, dtype="float16"), t(4, 5)], "(3, 5) float32"),
    Case("matmul_int8", lambda R, a, b: R.matmul(a, b), [t(3, 4, dtype="int8"),
                                                         t(4, 5, dtype="int8")], "(3, 5) int8"),
    Case("matmul_unknown", lambda R, a, b: R.matmul(a, b), [t(3, 4), t_any(2)],
         "ndim=2 float32"),
    Case("matmul_unknown_vec", lambda R, a, b: R.matmul(a, b), [t(4), t_any(2)],
         "ndim=1 float32"),
    Case("outer", lambda R, a, b: R.outer(a, b), [t("n"), t(4)], "(n, 4) float32"),
    Case("einsum_matmul", lambda R, a, b: R.einsum([a, b], "ij,jk->ik"), [t("n", 4), t(4, 5)],
         "(n, 5) float32"),
    Case("einsum_batch", lambda R, a, b: R.einsum([a, b], "bij,bjk->bik"),
         [t(2, 3, 4), t(2, 4, 6)], "(2, 3, 6) float32"),
    Case("einsum_ellipsis_implicit", lambda R, a, b: R.einsum((a, b), "...ij,...jk"),
         [t(2, "n", 4), t(4, 5)], "(2, n, 5) float32"),
    Case("einsum_ellipsis_middle", lambda R, a, b: R.einsum((a, b), "i...j,j...->...i"),
         [t(2, 3, 7, 4), t(4, 7)], "(3, 7, 2) float32"),
    Case("einsum_diagonal", lambda R, a: R.einsum((a,), "ii->i"), [t(4, 4)], "(4,) float32"),
    Case("einsum_implicit_sorted", lambda R, a: R.einsum((a,), "ji"), [t(3, 4)],
         "(4, 3) float32"),
    Case("einsum_trace", lambda R, a: R.einsum((a,), "ii"), [t(4, 4)], "() float32"),
    # quantize / dequantize
    Case("quantize", lambda R, x: R.quantize(x, R.const(0.5), R.const(0, "int8"), 1),
         [t("n", 3)], "(n, 3) int8"),
    Case("quantize_per_channel", lambda R, x: R.quantize(
        x, R.const([0.5, 1.0, 2.0], "float32"), R.const([0, 0, 0], "int8"), 1, "uint8"),
        [t("n", 3)], "(n, 3) uint8"),
    Case("quantize_fp8", lambda R, x: R.quantize(x, R.const(0.5, "float16"),
                                                 R.const(0, "int32"), 0, "float8_e4m3fn"),
         [t("n", 3, dtype="float16")], "(n, 3) float8_e4m3fn"),
    Case("dequantize", lambda R, x: R.dequantize(x, R.const(0.5), R.const(0, "int8")),
         [t("n", 3, dtype="int8")], "(n, 3) float32"),
    Case("dequantize_fp16", lambda R, x: R.dequantize(x, R.const(0.5), R.const(0, "int8"), 1,
                                                      "float16"),
         [t("n", 3, dtype="int32")], "(n, 3) float16"),
]

ERRORS = [
    Err("matmul_inner", lambda R, a, b: R.matmul(a, b), [t(2, 3, 4), t(3, 5)],
        "inner dims differ"),
    Err("matmul_batch", lambda R, a, b: R.matmul(a, b), [t(2, 3, 4), t(3, 4, 5)],
        "do not broadcast"),
    Err("matmul_scalar", lambda R, a, b: R.matmul(a, b), [t(), t(4)], "scalars"),
    Err("matmul_dtypes", lambda R, a, b: R.matmul(a, b), [t(3, 4), t(4, 5, dtype="float16")],
        "different dtypes"),
    Err("outer_rank", lambda R, a, b: R.outer(a, b), [t(2, 3), t(4)], "1-D"),
    Err("einsum_label_dims", lambda R, a: R.einsum((a,), "ii->i"), [t(4, 3)], "label 'i'"),
    Err("einsum_operand_count", lambda R, a: R.einsum((a,), "ij,jk->ik"), [t(4, 3)],
        "2 operands"),
    Err("einsum_rank", lambda R, a: R.einsum((a,), "ijk"), [t(4, 3)], "rank 2"),
    # TVM 0.27 crashes (segfault) on this one, so it is not asked.
    Err("einsum_output_label", lambda R, a, b: R.einsum((a, b), "ij,jk->il"),
        [t(3, 4), t(4, 5)], "not in any input", tvm=False),
    Err("quantize_out_dtype", lambda R, x: R.quantize(x, R.const(0.5), R.const(0, "int8"), 1,
                                                      "int32"), [t("n", 3)], "out_dtype"),
    Err("quantize_data_dtype", lambda R, x: R.quantize(x, R.const(0.5), R.const(0, "int8")),
        [t("n", 3, dtype="int8")], "param 'data'.*int8"),
    Err("quantize_scale_size", lambda R, x: R.quantize(
        x, R.const([0.5, 1.0], "float32"), R.const(0, "int8"), 1), [t("n", 3)],
        "param 'scale'.*shape \\[2\\]"),
    Err("quantize_zero_point_dtype", lambda R, x: R.quantize(x, R.const(0.5), R.const(0.0), 1),
        [t("n", 3)], "zero_point"),
    Err("quantize_axis", lambda R, x: R.quantize(x, R.const(0.5), R.const(0, "int8"), 2),
        [t("n", 3)], "out of range"),
    Err("dequantize_out_dtype", lambda R, x: R.dequantize(x, R.const(0.5), R.const(0, "int8"),
                                                          out_dtype="bfloat16"),
        [t("n", 3, dtype="int8")], "out_dtype"),
]


test_infer, test_same_as_tvm, test_error, test_tvm_rejects_too = family_tests(CASES, ERRORS)
