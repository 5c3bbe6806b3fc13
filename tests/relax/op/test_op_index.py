"""Struct-info inference of the indexing ops (defs_index): slices, take/gather/scatter, one_hot."""

from tests.helpers.op_cases import Case, Err, family_tests, t, t_any

I64, I32 = "int64", "int32"
BIG = 2**63 - 1  # torch / ONNX "to the end"

CASES = [
    # strided_slice: static slices follow Python's slice semantics exactly.
    Case("ss_basic", lambda R, x: R.strided_slice(x, [1], [0], [2]), [t("n", 4)],
         "(n, 2) float32"),
    Case("ss_static_clamped", lambda R, x: R.strided_slice(x, [1], [-3], [100]), [t("n", 4)],
         "(n, 3) float32"),
    Case("ss_strides", lambda R, x: R.strided_slice(x, [0, 1], [1, 0], [R.n, 4], [2, 3]),
         [t("n", 4)], "((T.max(n - 1, 0) + 1) // 2, 2) float32"),
    Case("ss_backward", lambda R, x: R.strided_slice(x, [1], [3], [0], [-1]), [t("n", 4)],
         "(n, 3) float32"),
    Case("ss_reverse_all", lambda R, x: R.strided_slice(x, [1], [-1], [-BIG], [-1]),
         [t("n", 4)], "(n, 4) float32"),
    # TVM infers -3 for this empty slice (x[:, 0:BIG:-1]); Python's answer is 0.
    Case("ss_backward_empty", lambda R, x: R.strided_slice(x, [1], [0], [BIG], [-1]),
         [t("n", 4)], "(n, 0) float32", tvm=False),
    Case("ss_symbolic_end", lambda R, x: R.strided_slice(x, [0], [1], [R.n]), [t("n", 4)],
         "(T.max(n - 1, 0), 4) float32"),
    Case("ss_to_end", lambda R, x: R.strided_slice(x, [0], [1], [BIG]), [t("n", 4)],
         "(T.max(n - 1, 0), 4) float32"),
    Case("ss_from_end", lambda R, x: R.strided_slice(x, [0], [-2], [BIG]), [t("n", 4)],
         "(T.max(n - T.max(n - 2, 0), 0), 4) float32"),
    Case("ss_reverse_symbolic", lambda R, x: R.strided_slice(x, [0], [-1], [-BIG], [-1]),
         [t("n", 4)], "(T.max(T.max(n - 1, -1) + 1, 0), 4) float32"),
    Case("ss_symbolic_begin", lambda R, x: R.strided_slice(x, [0], [R.m], [R.n]), [t("n", 4)],
         "(T.max(n - T.min(T.max(T.Select(m < 0, m + n, m), 0), n), 0), 4) float32"),
    Case("ss_inbound", lambda R, x: R.strided_slice(x, [0], [R.m], [R.m + 2],
                                                    assume_inbound=True), [t("n", 4)],
         "(2, 4) float32"),
    # A symbolic stride: msc gives up on the dims; TVM builds a select over the stride's sign.
    Case("ss_symbolic_stride", lambda R, x: R.strided_slice(x, [1], [0], [2], [R.m]),
         [t("n", 4)], "ndim=2 float32", tvm=False),
    Case("ss_unknown", lambda R, x: R.strided_slice(x, [1], [1], [2]), [t_any(2)],
         "ndim=2 float32"),
    Case("dynamic_strided_slice", lambda R, x, b, e, s: R.dynamic_strided_slice(x, b, e, s),
         [t("n", 4), t(2, dtype=I64), t(2, dtype=I64), t(2, dtype=I64)], "ndim=2 float32"),
    # take / gather / scatter
    Case("take_axis", lambda R, x, i: R.take(x, i, axis=1), [t("n", 4), t(3, 2, dtype=I64)],
         "(n, 3, 2) float32"),
    Case("take_rows", lambda R, x, i: R.take(x, i, axis=0, mode="clip"),
         [t("n", 4), t(3, dtype=I32)], "(3, 4) float32"),
    Case("take_scalar", lambda R, x, i: R.take(x, i, axis=0), [t("n", 4), t(dtype=I32)],
         "(4,) float32"),
    Case("take_1d", lambda R, x, i: R.take(x, i), [t("n"), t(3, 2, dtype=I64)],
         "(3, 2) float32"),
    Case("gather_elements", lambda R, x, i: R.gather_elements(x, i, 1),
         [t("n", 4), t("n", 2, dtype=I64)], "(n, 2) float32"),
    Case("gather_nd", lambda R, x, i: R.gather_nd(x, i), [t("n", 4, 5), t(3, 2, dtype=I64)],
         "(3, 5) float32"),
    Case("gather_nd_batch", lambda R, x, i: R.gather_nd(x, i, 1),
         [t("n", 4, 5), t("n", 3, 1, dtype=I64)], "(n, 3, 5) float32"),
    Case("scatter_elements", lambda R, x, i, u: R.scatter_elements(x, i, u, 1),
         [t("n", 4), t("n", 2, dtype=I64), t("n", 2)], "(n, 4) float32"),
    Case("scatter_nd", lambda R, x, i, u: R.scatter_nd(x, i, u, "add"),
         [t("n", 4), t(3, 1, dtype=I64), t(3, 4)], "(n, 4) float32"),
    # one_hot: the dtype is the on/off values'.
    Case("one_hot", lambda R, i: R.one_hot(i, R.prim(1.0, "float32"), R.prim(0.0, "float32"), 5),
         [t("n", 3, dtype=I32)], "(n, 3, 5) float32"),
    Case("one_hot_axis0", lambda R, i: R.one_hot(i, R.prim(1), R.prim(0), 5, 0),
         [t("n", 3, dtype=I32)], "(5, n, 3) int64"),
    # advanced indexing and scatter-like ops
    Case("index_tensor", lambda R, x, i, j: R.index_tensor(x, [i, j]),
         [t("n", 4, 5), t(3, 1, dtype=I64), t(2, dtype=I64)], "(3, 2, 5) float32"),
    Case("index_put", lambda R, x, i, j, v: R.index_put(x, [i, j], v, accumulate=True),
         [t("n", 4), t(2, dtype=I64), t(2, dtype=I64), t(2)], "(n, 4) float32"),
    Case("slice_scatter", lambda R, x, s: R.slice_scatter(x, s, 0, 2, 1, axis=1),
         [t("n", 4), t("n", 2)], "(n, 4) float32"),
    Case("reverse_sequence", lambda R, x, s: R.reverse_sequence(x, s, 1, 0),
         [t(4, "n"), t(4, dtype=I64)], "(4, n) float32"),
    Case("bucketize", lambda R, x, b: R.bucketize(x, b), [t("n", 4), t(5)], "(n, 4) int64"),
    Case("bucketize_int32", lambda R, x, b: R.bucketize(x, b, out_int32=True),
         [t("n", 4), t(5)], "(n, 4) int32"),
]

ERRORS = [
    Err("ss_axis_range", lambda R, x: R.strided_slice(x, [2], [0], [2]), [t("n", 4)],
        "out of range"),
    Err("ss_axis_repeat", lambda R, x: R.strided_slice(x, [1, 1], [0, 0], [2, 2]),
        [t("n", 4)], "repeat"),
    Err("ss_stride_zero", lambda R, x: R.strided_slice(x, [1], [0], [2], [0]), [t("n", 4)],
        "must not be 0"),
    Err("ss_lengths", lambda R, x: R.strided_slice(x, [1], [0, 1], [2]), [t("n", 4)],
        "begin has 2 values"),
    Err("take_float_indices", lambda R, x, i: R.take(x, i, axis=0), [t("n", 4), t(3)],
        "integer"),
    Err("take_no_axis", lambda R, x, i: R.take(x, i), [t("n", 4), t(3, dtype=I64)], "1-D"),
    Err("take_axis", lambda R, x, i: R.take(x, i, axis=2), [t("n", 4), t(3, dtype=I64)],
        "out of range"),
    Err("gather_elements_rank", lambda R, x, i: R.gather_elements(x, i),
        [t("n", 4), t(2, dtype=I64)], "rank 1, expected rank 2"),
    Err("gather_nd_depth", lambda R, x, i: R.gather_nd(x, i), [t(2, 3), t(4, 3, dtype=I64)],
        "exceed"),
    Err("index_put_count", lambda R, x, i, v: R.index_put(x, [i], v),
        [t("n", 4), t(2, dtype=I64), t(2, 4)], "one index tensor per dim"),
    Err("one_hot_axis", lambda R, i: R.one_hot(i, R.prim(1), R.prim(0), 5, 3),
        [t("n", 3, dtype=I32)], "out of range"),
]


test_infer, test_same_as_tvm, test_error, test_tvm_rejects_too = family_tests(CASES, ERRORS)
