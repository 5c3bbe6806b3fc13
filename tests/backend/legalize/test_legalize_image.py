"""Legalized image.resize3d / grid_sample / affine_grid, msc.attention and nn.attention_var_len
against the numpy fact and the TIR interpreter (check_op), and through relax.build."""

from __future__ import annotations

import numpy as np
import pytest

from msc import relax
from msc.backend.legalize import legalize_call
from msc.backend.legalize.image import resize
from msc.backend.legalize.testing import (
    assert_close,
    assert_round_trip,
    build_call,
    check_call,
    check_op,
    kernel_jit,
    reference,
)
from msc.backend.lowering.compile import compile_prim_func
from msc.tir.interp import run_prim_func

RNG = np.random.default_rng(0)
FLOATS = ["float32", "float16", "float64"]


def _data(*shape, dtype="float32", lo=None, hi=None):
    x = RNG.standard_normal(shape) if lo is None else RNG.uniform(lo, hi, shape)
    return x.astype(dtype)


# ------------------------------------------------------------------------------ resize3d

MODES = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
         "tf_half_pixel_for_nn"]
SIZES = [(4, 3, 7), (1, 5, 2)]  # odd up / down sizes, a single output plane


@pytest.mark.parametrize("size", SIZES, ids=str)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("method", ["nearest_neighbor", "linear", "cubic"])
def test_resize3d(method, mode, size):
    check_op("image.resize3d", [_data(1, 2, 3, 4, 5)], size, method=method,
             coordinate_transformation_mode=mode)


@pytest.mark.parametrize("rounding", ["round", "round_prefer_floor", "round_prefer_ceil",
                                      "floor", "ceil"])
@pytest.mark.parametrize("mode", ["half_pixel", "align_corners", "asymmetric"])
def test_resize3d_nearest_rounding(rounding, mode):
    # 3 -> 6, 4 -> 8: asymmetric coordinates fall on .5 ties, half_pixel ones start negative
    check_op("image.resize3d", [_data(1, 2, 3, 4, 5)], (6, 8, 7), method="nearest_neighbor",
             coordinate_transformation_mode=mode, rounding_method=rounding)


@pytest.mark.parametrize("exclude", [0, 1])
@pytest.mark.parametrize("alpha", [-0.75, -0.5])
def test_resize3d_cubic(alpha, exclude):
    check_op("image.resize3d", [_data(2, 1, 4, 3, 5)], (7, 5, 3), method="cubic",
             cubic_alpha=alpha, cubic_exclude=exclude)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("method", ["nearest_neighbor", "linear", "cubic"])
def test_resize3d_dtypes_channels_last(method, dtype):
    check_op("image.resize3d", [_data(1, 3, 4, 5, 3, dtype=dtype)], (5, 7, 2), method=method,
             layout="NDHWC", coordinate_transformation_mode="align_corners")


def test_resize3d_integer_nearest_and_out_dtype():
    x = RNG.integers(-100, 100, (1, 2, 3, 4, 5)).astype("int8")
    got, _ = check_op("image.resize3d", [x], (5, 6, 7), method="nearest_neighbor")
    assert got.dtype == np.int8
    got, _ = check_op("image.resize3d", [_data(1, 2, 3, 4, 5)], (5, 6, 7),
                      out_dtype="float16", interp=False)
    assert got.dtype == np.float16


def test_resize3d_linear_of_integers_is_left_to_numpy():
    x = np.zeros((1, 1, 2, 2, 2), "int32")
    assert legalize_call(build_call("image.resize3d", [x], (3, 3, 3))) is None


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("mode", ["pytorch_half_pixel", "tf_half_pixel_for_nn", "half_pixel"])
@pytest.mark.parametrize("method", ["nearest_neighbor", "cubic"])
def test_resize_rule_covers_2d(method, mode, layout):
    """image.resize(call, 2), the generalization offered to image.resize2d (whose rule in
    extra.py has no cubic and three modes)."""
    x = _data(1, 4, 5, 3) if layout == "NHWC" else _data(1, 3, 4, 5)
    call = build_call("image.resize2d", [x], (7, 2), method=method, layout=layout,
                      coordinate_transformation_mode=mode)
    func = resize(call, 2)
    assert_round_trip(func)
    got = compile_prim_func(func, jit=kernel_jit())(x)
    assert_close(got, reference(call, [x]), "float32", "resize2d vs numpy")
    assert_close(got, run_prim_func(func, x), "float32", "resize2d vs TIR interpreter")


# --------------------------------------------------------------------------- grid_sample

@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("align", [True, False])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("method", ["bilinear", "nearest"])
def test_grid_sample(method, padding, align, dtype):
    x, grid = _data(2, 3, 5, 7, dtype=dtype), _data(2, 2, 3, 4, dtype=dtype, lo=-1.3, hi=1.3)
    check_op("image.grid_sample", [x, grid], method=method, padding_mode=padding,
             align_corners=align)


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("method", ["bilinear", "nearest"])
def test_grid_sample_3d(method, padding):
    x, grid = _data(1, 2, 3, 4, 5), _data(1, 3, 2, 3, 4, lo=-1.2, hi=1.2)
    check_op("image.grid_sample", [x, grid], method=method, padding_mode=padding,
             layout="NCDHW", align_corners=padding == "border")


def test_grid_sample_channels_last_float64():
    x, grid = _data(1, 5, 6, 3, dtype="float64"), _data(1, 2, 4, 3, dtype="float64", lo=-1,
                                                         hi=1)
    check_op("image.grid_sample", [x, grid], layout="NHWC", padding_mode="reflection")


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("method", ["bilinear", "nearest"])
def test_grid_sample_wild_coordinates(method, padding):
    """Far outside, huge, infinite and NaN grid values: indices stay in the input (the
    kernel and the interpreter would read out of bounds otherwise) and match the fact
    (NaN where it gives NaN)."""
    grid = _data(1, 2, 4, 6, lo=-4, hi=4)
    grid.flat[:10] = [np.nan, np.inf, -np.inf, 1e30, -1e30, 3e9, -2.5, 1.0, -1.0, 0.0]
    got, want = check_op("image.grid_sample", [_data(1, 2, 3, 4), grid], method=method,
                         padding_mode=padding, align_corners=False)
    assert np.array_equal(np.isnan(got), np.isnan(want))


def test_grid_sample_single_pixel_reflection():
    # align_corners reflection over a size-1 axis: an empty span reflects to 0
    x, grid = _data(1, 2, 1, 4), _data(1, 2, 3, 3, lo=-2, hi=2)
    check_op("image.grid_sample", [x, grid], padding_mode="reflection", align_corners=True)


def test_grid_sample_bicubic_is_left_to_numpy():
    call = build_call("image.grid_sample", [_data(1, 1, 4, 4), _data(1, 2, 2, 2)],
                      method="bicubic")
    assert legalize_call(call) is None


# --------------------------------------------------------------------------- affine_grid

@pytest.mark.parametrize("size", [(4, 5), (1, 7), (6, 1), (9, 3)], ids=str)
@pytest.mark.parametrize("align", [True, False])
@pytest.mark.parametrize("dtype", FLOATS)
def test_affine_grid(dtype, align, size):
    check_op("image.affine_grid", [_data(3, 2, 3, dtype=dtype)], size, align_corners=align)


# ----------------------------------------------------------------------------- attention

ATTRS = [{}, {"scale": 0.3}, {"causal_mask": "TopLeft"}, {"causal_mask": "BottomRight"},
         {"scale": 0.2, "causal_mask": "TopLeft"}]


def _check(op, tensors, attrs, **kw):
    return check_call(build_call(op, tensors, **attrs), tensors, scale=10, **kw)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("attrs", ATTRS, ids=str)
def test_msc_attention(attrs, dtype):
    q, k, v = (_data(2, 3, s, d, dtype=dtype) for s, d in ((5, 4), (7, 4), (7, 6)))
    _check("msc.attention", [q, k, v], attrs)


def test_msc_attention_masked_rows_are_nan_like_the_fact():
    # BottomRight with more queries than keys leaves the first rows without any key
    q, k, v = _data(1, 2, 6, 4), _data(1, 2, 3, 4), _data(1, 2, 3, 5)
    got, want = _check("msc.attention", [q, k, v], {"causal_mask": "BottomRight"})
    assert np.isnan(want).any() and np.array_equal(np.isnan(got), np.isnan(want))


@pytest.mark.parametrize("bias_shape", [(2, 3, 5, 7), (1, 3, 1, 7), (2, 1, 5, 7)], ids=str)
def test_msc_attention_bias(bias_shape):
    q, k, v = _data(2, 3, 5, 4), _data(2, 3, 7, 4), _data(2, 3, 7, 4)
    _check("msc.attention", [q, k, v, _data(*bias_shape)], {"causal_mask": "TopLeft"})


def test_msc_attention_one_kv_head():
    q, k, v = _data(2, 4, 5, 8), _data(2, 1, 6, 8), _data(2, 1, 6, 3)
    _check("msc.attention", [q, k, v], {})


def test_msc_attention_grouped_query_heads():
    """4 query heads over 2 kv heads: heads 0, 1 read kv head 0 (torch's enable_gqa); the fact
    on kv heads repeated must agree."""
    q, k, v = _data(1, 4, 5, 8), _data(1, 2, 6, 8), _data(1, 2, 6, 3)
    call = build_call("msc.attention", [q, k, v])
    got = compile_prim_func(legalize_call(call), jit=kernel_jit())(q, k, v)
    repeated = [q, np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1)]
    want = reference(build_call("msc.attention", repeated), repeated)
    assert_close(got, want, "float32", "grouped-query attention", scale=10)


def test_attention_window_size_is_left_to_numpy():
    q = _data(1, 2, 4, 4)
    assert legalize_call(build_call("msc.attention", [q, q, q], window_size=2)) is None


def _var_len(lens_q, lens_k, heads=2, dim=4, dim_v=3, dtype="float32"):
    starts_q, starts_k = (np.concatenate([[0], np.cumsum(n)]).astype("int32")
                          for n in (lens_q, lens_k))
    return [_data(1, starts_q[-1], heads, dim, dtype=dtype),
            _data(1, starts_k[-1], heads, dim, dtype=dtype),
            _data(1, starts_k[-1], heads, dim_v, dtype=dtype), starts_q, starts_k,
            np.array(max(lens_q), "int32"), np.array(max(lens_k), "int32")]


@pytest.mark.parametrize("attrs", ATTRS, ids=str)
@pytest.mark.parametrize("lens", [((2, 3), (2, 3)), ((3, 1, 4), (2, 5, 4)), ((5,), (7,)),
                                  ((2, 0, 3), (2, 4, 3))], ids=str)
def test_attention_var_len(lens, attrs):
    _check("nn.attention_var_len", _var_len(*lens), attrs)


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_attention_var_len_dtypes(dtype):
    _check("nn.attention_var_len", _var_len((3, 4), (3, 4), dtype=dtype),
           {"causal_mask": "BottomRight"})


def test_attention_var_len_clipped_bounds():
    # bounds past the end: numpy's slices clip them, the kernel's masks do the same
    args = _var_len((2, 3), (2, 3))
    args[3] = args[4] = np.array([0, 3, 100], "int32")
    _check("nn.attention_var_len", args, {})


@pytest.mark.parametrize("starts", [[7, -3, 2**31 - 1], [5, 0, -9], [-(2**31), 40, 2]],
                         ids=str)
def test_attention_var_len_garbage_bounds_stay_in_bounds(starts):
    """Nonsense sequence bounds index nothing out of range: the kernel and the interpreter
    (which would raise on an out-of-range index) agree."""
    args = _var_len((2, 3), (2, 3))
    args[3] = args[4] = np.array(starts, "int32")
    func = legalize_call(build_call("nn.attention_var_len", args, causal_mask="BottomRight"))
    got = compile_prim_func(func, jit=kernel_jit())(*args)
    assert got.shape == args[0].shape[:3] + (3,)
    assert_close(got, run_prim_func(func, *args), "float32", "kernel vs interpreter")


# ------------------------------------------------------------------------ relax.build / VM

def _module(args, body):
    params = [relax.Var(f"a{i}", relax.TensorStructInfo(a.shape, str(a.dtype)))
              for i, a in enumerate(args)]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(body(*params))
        bb.emit_func_output(out)
    return bb.get()


VM_CASES = [
    ("image.resize3d", [_data(1, 2, 3, 4, 5)], ((4, 3, 7),), {"method": "cubic"}),
    ("image.grid_sample", [_data(1, 3, 6, 7), _data(1, 2, 4, 5, lo=-1.2, hi=1.2)], (),
     {"padding_mode": "reflection"}),
    ("image.affine_grid", [_data(2, 2, 3)], ((5, 6),), {"align_corners": False}),
    ("msc.attention", [_data(1, 2, 5, 4), _data(1, 2, 6, 4), _data(1, 2, 6, 4)], (),
     {"causal_mask": "BottomRight"}),
    ("nn.attention_var_len", _var_len((2, 3), (4, 1)), (), {"causal_mask": "TopLeft"}),
]


@pytest.mark.parametrize("op,tensors,extra,attrs", VM_CASES, ids=[c[0] for c in VM_CASES])
def test_build_runs_compiled_tir(op, tensors, extra, attrs):
    mod = _module(tensors, lambda *p: relax.op.make_call(op, *p, *extra, **attrs))
    ex = relax.build(mod, legalize="prefer")
    assert ex.stats["ops"][op] == {"tir": 1}
    got = relax.VirtualMachine(ex)["main"](*tensors).numpy()
    want = reference(build_call(op, tensors, *extra, **attrs), tensors)
    assert_close(got, want, "float32", op, scale=10)


def test_nearest_round_breaks_ties_to_even_as_tvm():
    # 8 -> 4 with half_pixel coordinates lands on 0.5, 2.5, 4.5, 6.5; TVM 0.27 (te.round)
    # picks 0, 2, 4, 6 where half-away-from-zero would pick 1, 3, 5, 7.
    x = np.arange(8, dtype="float32").reshape(1, 1, 1, 8)
    attrs = {"method": "nearest_neighbor", "coordinate_transformation_mode": "half_pixel",
                 "rounding_method": "round"}
    want = x[..., [0, 2, 4, 6]]
    got, ref = check_op("image.resize2d", [x], (1, 4), **attrs)   # kernel, numpy, interpreter
    np.testing.assert_array_equal(ref, want)
    np.testing.assert_array_equal(got, want)
