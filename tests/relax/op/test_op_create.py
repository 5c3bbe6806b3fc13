"""Struct-info inference of the creation ops (defs_create)."""

from tests.helpers.op_cases import Case, Err, MscFrontend, family_tests, t, t_any

I64 = "int64"

CASES = [
    Case("full", lambda R, x: R.full([2, R.n], R.const(1.0)), [t("n", 4)], "(2, n) float32"),
    Case("full_dtype", lambda R, x: R.full([2, R.n], R.const(1.0), "int32"), [t("n", 4)],
         "(2, n) int32"),
    Case("full_like", lambda R, x: R.full_like(x, R.const(1, "int32")), [t("n", 4)],
         "(n, 4) float32"),
    Case("full_like_dtype", lambda R, x: R.full_like(x, R.const(1.0), "float16"), [t_any(3)],
         "ndim=3 float16"),
    Case("ones", lambda R, x: R.ones([2, R.n], "float32"), [t("n", 4)], "(2, n) float32"),
    Case("zeros", lambda R, x: R.zeros([3], "int8"), [t("n", 4)], "(3,) int8"),
    Case("ones_like", lambda R, x: R.ones_like(x), [t("n", 4)], "(n, 4) float32"),
    Case("zeros_like_dtype", lambda R, x: R.zeros_like(x, "int64"), [t("n", 4)],
         "(n, 4) int64"),
    Case("tril", lambda R, x: R.tril(x), [t("n", 4)], "(n, 4) float32"),
    Case("triu_k", lambda R, x: R.triu(x, 1), [t(2, "n", 4)], "(2, n, 4) float32"),
    Case("arange_end", lambda R, x: R.arange(R.n), [t("n", 4)], "(n,) int64"),
    Case("arange_step", lambda R, x: R.arange(0, 10, 2), [t("n", 4)], "(5,) int64"),
    Case("arange_symbolic", lambda R, x: R.arange(1, R.n, 2), [t("n", 4)], "(n // 2,) int64"),
    Case("arange_symbolic_step", lambda R, x: R.arange(1, R.n, R.m), [t("n", 4)],
         "((n + m - 2) // m,) int64"),
    Case("arange_float", lambda R, x: R.arange(1.0, 3.0, 0.5), [t("n", 4)], "(4,) float32"),
    Case("arange_dtype", lambda R, x: R.arange(0, 5, dtype="float32"), [t("n", 4)],
         "(5,) float32"),
    # TVM 0.27 infers 6 and -4 for these two; the ranges hold 4 and 0 elements.
    Case("arange_backward", lambda R, x: R.arange(5, 1, -1), [t("n", 4)], "(4,) int64",
         tvm=False),
    Case("arange_empty", lambda R, x: R.arange(5, 1, 1), [t("n", 4)], "(0,) int64", tvm=False),
    Case("eye", lambda R, x: R.eye(3, 4), [t("n", 4)], "(3, 4) float32"),
    Case("eye_square", lambda R, x: R.eye(R.n, dtype="int32"), [t("n", 4)], "(n, n) int32"),
    Case("eye_like", lambda R, x: R.eye_like(x, 1), [t("n", 4)], "(n, 4) float32"),
    Case("hamming_window", lambda R, x: R.hamming_window(8, 1, 0.54, 0.46, "float32"),
         [t("n", 4)], "(8,) float32"),
]

ERRORS = [
    Err("full_fill_rank", lambda R, x: R.full([2], x), [t(2)], "scalar"),
    Err("tril_rank", lambda R, x: R.tril(x), [t(4)], "rank >= 2"),
    Err("eye_like_rank", lambda R, x: R.eye_like(x), [t(4, 4, 4)], "2-D"),
    Err("arange_step_zero", lambda R, x: R.arange(0, 4, 0), [t(4)], "step"),
]


test_infer, test_same_as_tvm, test_error, test_tvm_rejects_too = family_tests(CASES, ERRORS)


def test_arange_defaults_like_tvm():
    op = MscFrontend().op
    assert op.arange(3).attrs.dtype == "int64"
    assert op.arange(3.0).attrs.dtype == "float32"
    assert [a.value for a in op.arange(4).args] == [0, 4, 1]
    assert [a.value for a in op.eye(3).args] == [3, 3, 0]
