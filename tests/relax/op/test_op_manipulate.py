"""Struct-info inference of the manipulation ops (defs_manipulate), static and symbolic."""

from msc import relax
from msc.relax.expr import ShapeExpr
from msc.relax.op.defs_manipulate import IndexMap
from tests.helpers.op_cases import Case, Err, family_tests, t, t_any

I64 = "int64"
CASES = [
    Case("astype", lambda R, x: R.astype(x, "int32"), [t("n", 4)], "(n, 4) int32"),
    Case("astype_unknown", lambda R, x: R.astype(x, "float16"), [t_any(3)], "ndim=3 float16"),
    Case("broadcast_to", lambda R, x: R.broadcast_to(x, [2, R.n, 4]), [t("n", 1)],
         "(2, n, 4) float32"),
    Case("broadcast_to_rank", lambda R, x: R.broadcast_to(x, [3, 2, 4]), [t(4)],
         "(3, 2, 4) float32"),
    Case("clip", lambda R, x: R.clip(x, 0, 6), [t("n", 4)], "(n, 4) float32"),
    Case("where", lambda R, c, x, y: R.where(c, x, y), [t("n", 1, dtype="bool"), t(1, 4), t(4)],
         "(n, 4) float32"),
    # reshape
    Case("reshape_flat", lambda R, x: R.reshape(x, [-1]), [t("n", 4)], "(n * 4,) float32"),
    Case("reshape_hole_mid", lambda R, x: R.reshape(x, [2, -1, 2]), [t("n", 4)],
         "(2, n, 2) float32"),
    Case("reshape_cancel", lambda R, x: R.reshape(x, [R.n, -1]), [t("n", 4)], "(n, 4) float32"),
    Case("reshape_symbolic_div", lambda R, x: R.reshape(x, [R.m, -1]), [t("n", 4)],
         "(m, n * 4 // m) float32"),
    Case("reshape_static", lambda R, x: R.reshape(x, [4, 6]), [t(2, 3, 4)], "(4, 6) float32"),
    Case("reshape_static_hole", lambda R, x: R.reshape(x, [-1, 3]), [t(2, 3, 4)],
         "(8, 3) float32"),
    Case("reshape_unknown_input", lambda R, x: R.reshape(x, [2, 3]), [t_any(2)],
         "(2, 3) float32"),
    Case("flatten", lambda R, x: R.flatten(x), [t("n", 4, 2)], "(n * 8,) float32"),
    Case("flatten_scalar", lambda R, x: R.flatten(x), [t()], "(1,) float32"),
    Case("expand_dims", lambda R, x: R.expand_dims(x, [0, -1]), [t("n", 4)],
         "(1, n, 4, 1) float32"),
    Case("expand_dims_int", lambda R, x: R.expand_dims(x, 1), [t("n", 4)], "(n, 1, 4) float32"),
    Case("squeeze_all", lambda R, x: R.squeeze(x), [t(2, 1, 3, 1)], "(2, 3) float32"),
    # A symbolic dim may be 1, so squeezing every axis leaves the rank unknown (as TVM).
    Case("squeeze_all_symbolic", lambda R, x: R.squeeze(x), [t("n", 1)], "ndim=-1 float32"),
    Case("squeeze_axis", lambda R, x: R.squeeze(x, 1), [t("n", 1)], "(n,) float32"),
    # Like torch.squeeze(x, dim), a given axis whose static dim is not 1 is kept.
    Case("squeeze_keeps_non_one", lambda R, x: R.squeeze(x, 0), [t(2, 1)], "(2, 1) float32"),
    Case("collapse_sum_like", lambda R, x, y: R.collapse_sum_like(x, y), [t("n", 4), t(4)],
         "(4,) float32"),
    Case("collapse_sum_to", lambda R, x: R.collapse_sum_to(x, [1, 4]), [t("n", 4)],
         "(1, 4) float32"),
    # permutations, flips, repeats
    Case("permute_default", lambda R, x: R.permute_dims(x), [t("n", 4, 2)],
         "(2, 4, n) float32"),
    Case("permute_axes", lambda R, x: R.permute_dims(x, [0, 2, 1]), [t("n", 4, 2)],
         "(n, 2, 4) float32"),
    Case("permute_negative", lambda R, x: R.permute_dims(x, [-1, 0, 1]), [t("n", 4, 2)],
         "(2, n, 4) float32"),
    Case("permute_unknown", lambda R, x: R.permute_dims(x, [1, 0]), [t_any(2)],
         "ndim=2 float32"),
    Case("flip", lambda R, x: R.flip(x, 1), [t("n", 4)], "(n, 4) float32"),
    Case("repeat_flat", lambda R, x: R.repeat(x, 2), [t("n", 4)], "(n * 8,) float32"),
    Case("repeat_axis", lambda R, x: R.repeat(x, 3, -1), [t("n", 4)], "(n, 12) float32"),
    Case("tile", lambda R, x: R.tile(x, 2), [t("n", 4)], "(n, 8) float32"),
    Case("tile_more_reps", lambda R, x: R.tile(x, [2, 1, 3]), [t("n", 4)],
         "(2, n, 12) float32"),
    Case("tile_fewer_reps", lambda R, x: R.tile(x, [2]), [t("n", 4, 3)], "(n, 4, 6) float32"),
    # joins and splits
    Case("concat", lambda R, x, y: R.concat([x, y], axis=1), [t("n", 4), t("n", 2)],
         "(n, 6) float32"),
    Case("concat_symbolic_axis", lambda R, x, y: R.concat([x, y]), [t("n", 4), t("m", 4)],
         "(n + m, 4) float32"),
    # n and m may differ in the kept dims: unknown dims, known rank (as TVM).
    Case("concat_undecidable", lambda R, x, y: R.concat([x, y], axis=1), [t("n", 4), t("m", 4)],
         "ndim=2 float32"),
    Case("concat_no_axis", lambda R, x, y: R.concat([x, y], axis=None), [t("n"), t(3)],
         "(n + 3,) float32"),
    Case("concat_unknown", lambda R, x, y: R.concat([x, y], axis=1), [t("n", 4), t_any(2)],
         "ndim=2 float32"),
    Case("stack", lambda R, x, y: R.stack([x, y], axis=1), [t("n", 4), t("n", 4)],
         "(n, 2, 4) float32"),
    Case("stack_last", lambda R, x, y: R.stack([x, y], -1), [t("n", 4), t("n", 4)],
         "(n, 4, 2) float32"),
    Case("split_sections", lambda R, x: R.split(x, 2, axis=1), [t("n", 4)],
         "[(n, 2) float32, (n, 2) float32]"),
    Case("split_uneven", lambda R, x: R.split(x, 3, axis=1), [t("n", 4)],
         "[(n, 2) float32, (n, 2) float32, (n, 0) float32]"),
    Case("split_symbolic", lambda R, x: R.split(x, 3), [t("n", 4)],
         "[((n + 2) // 3, 4) float32, ((n + 2) // 3, 4) float32, "
         "(n - (n + 2) // 3 * 2, 4) float32]"),
    Case("split_indices", lambda R, x: R.split(x, [1, 3], axis=1), [t("n", 4)],
         "[(n, 1) float32, (n, 2) float32, (n, 1) float32]"),
    Case("split_indices_clamped", lambda R, x: R.split(x, [1, 6], axis=1), [t("n", 4)],
         "[(n, 1) float32, (n, 3) float32, (n, 0) float32]"),
    Case("split_indices_backwards", lambda R, x: R.split(x, [3, 1], axis=1), [t("n", 4)],
         "[(n, 3) float32, (n, 0) float32, (n, 3) float32]"),
    # One section: TVM returns the input's struct info, not a 1-tuple.
    Case("split_one", lambda R, x: R.split(x, 1, axis=1), [t("n", 5)], "(n, 5) float32"),
    Case("split_unknown", lambda R, x: R.split(x, 2, axis=1), [t_any(2)],
         "[ndim=2 float32, ndim=2 float32]"),
    # TVM gives sizes (2, 2, 2, -1) here; msc numpy's clamped pieces (2, 2, 1, 0).
    Case("split_ceil_overflow", lambda R, x: R.split(x, 4, axis=1), [t("n", 5)],
         "[(n, 2) float32, (n, 2) float32, (n, 1) float32, (n, 0) float32]", tvm=False),
    Case("meshgrid", lambda R, x, y: R.meshgrid([x, y]), [t(3), t(4)],
         "[(3, 4) float32, (3, 4) float32]"),
    # numpy.meshgrid's "xy" swaps the first two dims; TVM 0.27 infers (3, 4) here.
    Case("meshgrid_xy", lambda R, x, y: R.meshgrid([x, y], indexing="xy"), [t(3), t(4)],
         "[(4, 3) float32, (4, 3) float32]", tvm=False),
    # layout_transform
    Case("layout_nchw_nhwc", lambda R, x: R.layout_transform(x, lambda a, b, c, d: (a, c, d, b)),
         [t("n", 3, 8, 8)], "(n, 8, 8, 3) float32"),
    Case("layout_packed", lambda R, x: R.layout_transform(
        x, lambda a, b, c, d: (a, b // 4, c, d, b % 4)), [t(1, 8, 8, 8)],
        "(1, 2, 8, 8, 4) float32"),
    Case("layout_padded", lambda R, x: R.layout_transform(
        x, lambda a, b, c, d: (a, b // 4, c, d, b % 4), pad_value=0.0), [t(1, 6, 8, 8)],
        "(1, 2, 8, 8, 4) float32"),
    # shapes as values
    Case("shape_of", lambda R, x: R.shape_of(x), [t("n", 4)], "shape(n, 4)"),
    Case("shape_of_unknown", lambda R, x: R.shape_of(x), [t_any(3)], "shape(ndim=3)"),
    Case("shape_to_tensor", lambda R, x: R.shape_to_tensor(R.shape_of(x)), [t("n", 4)],
         "(2,) int64"),
    Case("tensor_to_shape", lambda R, x: R.tensor_to_shape(x), [t(2, dtype=I64)],
         "shape(ndim=2)"),
    Case("size", lambda R, x: R.size(x), [t("n", 4)], "() int64"),
]

ERRORS = [
    Err("reshape_count", lambda R, x: R.reshape(x, [3, 5]), [t(2, 4)], "8 elements.*15"),
    Err("reshape_not_multiple", lambda R, x: R.reshape(x, [-1, 3]), [t(2, 4)],
        "not a multiple"),
    Err("reshape_two_holes", lambda R, x: R.reshape(x, [-1, -1]), [t("n", 4)], "one -1"),
    Err("broadcast_to_mismatch", lambda R, x: R.broadcast_to(x, [2, 3]), [t(4, 1)],
        "does not broadcast"),
    Err("broadcast_to_rank", lambda R, x: R.broadcast_to(x, [3]), [t(2, 3)], "more dims"),
    Err("where_cond_dtype", lambda R, c, x, y: R.where(c, x, y), [t(4), t(4), t(4)],
        "condition must be bool"),
    Err("where_dtypes", lambda R, c, x, y: R.where(c, x, y),
        [t(4, dtype="bool"), t(4), t(4, dtype="int32")], "different dtypes"),
    Err("expand_dims_axis", lambda R, x: R.expand_dims(x, 3), [t("n", 4)], "out of range"),
    Err("squeeze_axis", lambda R, x: R.squeeze(x, 2), [t("n", 1)], "out of range"),
    Err("permute_repeat", lambda R, x: R.permute_dims(x, [0, 0]), [t("n", 4)], "repeat"),
    Err("permute_count", lambda R, x: R.permute_dims(x, [0]), [t("n", 4)], "each of the 2"),
    Err("flip_axis", lambda R, x: R.flip(x, 2), [t("n", 4)], "out of range"),
    Err("repeat_axis", lambda R, x: R.repeat(x, 2, 2), [t("n", 4)], "out of range"),
    Err("concat_rank", lambda R, x, y: R.concat([x, y], axis=1), [t("n", 4), t("n", 4, 1)],
        "different ranks"),
    Err("concat_dim", lambda R, x, y: R.concat([x, y], axis=1), [t(3, 4), t(2, 4)],
        "dim 0 differs"),
    Err("concat_dtype", lambda R, x, y: R.concat([x, y]), [t(3), t(3, dtype="float16")],
        "different dtypes"),
    Err("concat_no_axis_rank", lambda R, x, y: R.concat([x, y], axis=None), [t(2, 4), t(3, 4)],
        "1-D"),
    Err("stack_dim", lambda R, x, y: R.stack([x, y]), [t(3, 4), t(3, 5)], "dim 1 differs"),
    Err("split_axis", lambda R, x: R.split(x, 2, axis=2), [t("n", 4)], "out of range"),
    Err("collapse_sum_to", lambda R, x: R.collapse_sum_to(x, [3]), [t("n", 4)],
        "does not broadcast"),
    Err("layout_rank", lambda R, x: R.layout_transform(x, lambda a, b: (b, a)), [t(2, 3, 4)],
        "takes 2 indices"),
    Err("tensor_to_shape_rank", lambda R, x: R.tensor_to_shape(x), [t(2, 2, dtype=I64)],
        "1-D integer"),
]


test_infer, test_same_as_tvm, test_error, test_tvm_rejects_too = family_tests(CASES, ERRORS)


def test_reshape_builder_resolves_the_hole_like_tvm():
    n = relax.op.reshape(relax.Var("x", relax.TensorStructInfo((2, 3, 4))), [-1, 4])
    assert n.args[1] == ShapeExpr([6, 4])


def test_index_map_text_and_equality():
    index_map = IndexMap.from_func(lambda n, c, h, w: (n, c // 4, h, w, c % 4))
    assert str(index_map) == "T.index_map(lambda n, c, h, w: (n, c // 4, h, w, c % 4))"
    assert index_map == IndexMap.from_func(lambda n, c, h, w: (n, c // 4, h, w, c % 4))
    assert index_map != IndexMap.from_func(lambda n, c, h, w: (n, h, w, c))
