"""Struct-info inference of reductions, scans, sorting and data-dependent ops (defs_reduce)."""

from msc.relax.op.defs_reduce import REDUCE
from tests.helpers.op_cases import Case, Err, family_tests, t, t_any

I32 = "int32"

CASES = [
    *(Case(f"{op}_axis", lambda R, x, op=op: getattr(R, op)(x, axis=1), [t("n", 4)],
           "(n,) float32") for op in REDUCE),
    *(Case(f"{op}_keepdims", lambda R, x, op=op: getattr(R, op)(x, [0, -1], True),
           [t("n", 4, 3)], "(1, 4, 1) float32") for op in REDUCE),
    *(Case(f"{op}_all", lambda R, x, op=op: getattr(R, op)(x), [t("n", 4)], "() float32")
      for op in REDUCE),
    Case("sum_unknown_shape", lambda R, x: R.sum(x, axis=1, keepdims=True), [t_any(2)],
         "ndim=2 float32"),
    Case("prod_unknown_shape", lambda R, x: R.prod(x, axis=1), [t_any(2)], "ndim=1 float32"),
    Case("sum_bool", lambda R, x: R.sum(x, axis=1), [t("n", 4, dtype="bool")], "(n,) bool"),
    Case("mean_int", lambda R, x: R.mean(x, axis=1), [t("n", 4, dtype=I32)], "(n,) int32"),
    Case("median_axis", lambda R, x: R.median(x, 1), [t("n", 4)],
         "[(n,) float32, (n,) int64]"),
    Case("median_all", lambda R, x: R.median(x), [t("n", 4)], "() float32"),
    Case("argmax", lambda R, x: R.argmax(x, 1), [t("n", 4)], "(n,) int64"),
    Case("argmax_all", lambda R, x: R.argmax(x), [t("n", 4)], "() int64"),
    Case("argmin_keepdims", lambda R, x: R.argmin(x, 1, True), [t("n", 4)], "(n, 1) int64"),
    # scans
    Case("cumsum_flat", lambda R, x: R.cumsum(x), [t("n", 4)], "(n * 4,) float32"),
    Case("cumsum_dtype", lambda R, x: R.cumsum(x, 1, "int32"), [t("n", 4)], "(n, 4) int32"),
    Case("cumprod_exclusive", lambda R, x: R.cumprod(x, 1, exclusive=True), [t("n", 4)],
         "(n, 4) float32"),
    # sorting / searching
    Case("sort", lambda R, x: R.sort(x, descending=True), [t("n", 4)], "(n, 4) float32"),
    Case("argsort", lambda R, x: R.argsort(x, 0), [t("n", 4)], "(n, 4) int32"),
    Case("topk_both", lambda R, x: R.topk(x, 2), [t("n", 4)],
         "[(n, 2) float32, (n, 2) int32]"),
    Case("topk_values", lambda R, x: R.topk(x, 2, ret_type="values"), [t("n", 4)],
         "(n, 2) float32"),
    Case("topk_indices", lambda R, x: R.topk(x, 2, 0, "indices", dtype="int64"), [t("n", 4)],
         "(2, 4) int64"),
    Case("topk_k_past_end", lambda R, x: R.topk(x, 6), [t("n", 4)],
         "[(n, 4) float32, (n, 4) int32]"),
    Case("topk_all", lambda R, x: R.topk(x, -1, 1), [t("n", 3)],
         "[(n, 3) float32, (n, 3) int32]"),
    Case("topk_unknown", lambda R, x: R.topk(x, 2, 0), [t_any(2)],
         "[ndim=2 float32, ndim=2 int32]"),
    # data-dependent sizes: only ranks are known
    Case("nonzero", lambda R, x: R.nonzero(x), [t("n", 4)], "ndim=2 int64"),
    Case("unique", lambda R, x: R.unique(x), [t("n", 4)], "ndim=1 float32"),
    Case("unique_extras", lambda R, x: R.unique(x, return_index=True, return_counts=True),
         [t("n", 4)], "[ndim=1 float32, ndim=1 int64, ndim=1 int64]"),
    Case("unique_axis", lambda R, x: R.unique(x, axis=1, return_inverse=True), [t("n", 4)],
         "[ndim=2 float32, ndim=1 int64]"),
]

ERRORS = [
    Err("sum_axis_range", lambda R, x: R.sum(x, axis=2), [t("n", 4)], "out of range"),
    Err("sum_axis_repeat", lambda R, x: R.sum(x, axis=[1, -1]), [t("n", 4)], "repeat"),
    Err("argmax_axis", lambda R, x: R.argmax(x, -3), [t("n", 4)], "out of range"),
    # TVM 0.27 does not check the axis of scans and sorts.
    Err("cumsum_axis", lambda R, x: R.cumsum(x, 2), [t("n", 4)], "out of range", tvm=False),
    Err("topk_ret_type", lambda R, x: R.topk(x, 2, ret_type="foo"), [t("n", 4)],
        "ret_type='foo'"),
    Err("sort_axis", lambda R, x: R.sort(x, 2), [t("n", 4)], "out of range", tvm=False),
]


test_infer, test_same_as_tvm, test_error, test_tvm_rejects_too = family_tests(CASES, ERRORS)
