"""Window kernels (pooling, depthwise conv) and the direct stride-1 conv against references.

Pooling through relax.build is compared with the op's numpy fact (the spec); convolutions with
torch. Pool results are exact sums / maxes of the same floats in another order, hence 1e-5;
convs accumulate up to 1152 products in another order (FMA), hence rtol/atol 1e-4.
"""

import numpy as np
import pytest
import torch

from msc import relax
from msc.backend.dispatch.resolve import load_facts
from msc.backend.kernels.base import Site
from msc.backend.kernels.conv import _DepthwiseNCHW
from msc.backend.kernels.direct_conv import DirectConv2d, direct_conv_fits
from msc.backend.kernels.layout import collapse_permutation
from msc.backend.kernels.pool import window_kernels
from msc.backend.runtime.program import Value
from msc.backend.runtime.threads import num_threads
from msc.errors import ShapeError
from msc.relax import op as R
from msc.relax.op.registry import OPS

F32 = "float32"
RNG = np.random.default_rng(7)
POOL_TOL = {"rtol": 1e-5, "atol": 1e-5}
CONV_TOL = {"rtol": 1e-4, "atol": 1e-4}


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _pool_fn(op: str, shape, attrs):
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo(shape, F32))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(getattr(R.nn, op)(x, **attrs))
        bb.emit_func_output(out)
    ex = relax.build(bb.get())
    return relax.VirtualMachine(ex, relax.cpu())["main"], ex


# ---------------------------------------------------------------------------------------------
# Pooling: the native kernel equals the op's numpy fact.

POOL_CASES = [  # x shape, attrs
    ((1, 3, 14, 14), {"pool_size": 3, "strides": 1, "padding": 1}),   # 3x3 unrolled, stride 1
    ((2, 5, 23, 37), {"pool_size": 3, "strides": 2, "padding": 1}),   # two vectors + a tail
    ((1, 4, 9, 40), {"pool_size": 2, "strides": 2}),                  # no copy of the plane
    ((1, 2, 11, 13), {"pool_size": 3, "strides": 2, "ceil_mode": True}),
    ((1, 2, 10, 19), {"pool_size": (2, 4), "strides": (1, 3), "padding": (1, 2, 0, 1)}),
    ((1, 2, 12, 12), {"pool_size": 3, "strides": 1, "padding": 2, "dilation": 2}),
    ((1, 3, 7, 7), {"pool_size": 5, "strides": 1, "padding": 2}),     # general window loops
    ((1, 1, 1, 1), {"pool_size": 1}),
    ((1, 2, 33, 17), {"pool_size": (3, 1), "strides": (2, 1)}),
    ((1, 3, 8, 8), {"pool_size": 3, "strides": 2, "padding": 1}),    # no bottom pad read
    # windows larger than the padded input (HF EfficientNet's head: 1280 over 7x7, ceil_mode)
    ((1, 3, 7, 7), {"pool_size": 40, "strides": 40, "ceil_mode": True}),
    ((2, 2, 6, 9), {"pool_size": (10, 12), "strides": 8, "padding": 1, "ceil_mode": True,
                    "count_include_pad": True}),
    ((1, 2, 9, 6), {"pool_size": (10, 3), "strides": (8, 1), "padding": (1, 0, 0, 1),
                    "ceil_mode": True}),
]


@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d"])
@pytest.mark.parametrize("shape, attrs", POOL_CASES)
def test_pool_matches_numpy_fact(op, shape, attrs):
    f, ex = _pool_fn(op, shape, attrs)
    assert ex.stats["kernels"]["native"] == 1
    x = _rand(*shape)
    ref = OPS[f"nn.{op}"].facts["numpy"]([x], {**attrs, "layout": "NCHW"})
    np.testing.assert_allclose(f(x).numpy(), ref, **POOL_TOL)


@pytest.mark.parametrize("include_pad", [False, True])
def test_avg_pool_count_include_pad_with_ceil_mode(include_pad):
    attrs = {"pool_size": 3, "strides": 2, "padding": 1, "ceil_mode": True,
             "count_include_pad": include_pad}
    f, _ = _pool_fn("avg_pool2d", (1, 3, 10, 12), attrs)
    x = _rand(1, 3, 10, 12)
    ref = OPS["nn.avg_pool2d"].facts["numpy"]([x], attrs)
    np.testing.assert_allclose(f(x).numpy(), ref, **POOL_TOL)


def test_max_pool_keeps_nan():
    f, _ = _pool_fn("max_pool2d", (1, 1, 6, 20), {"pool_size": 3, "strides": 2, "padding": 1})
    x = _rand(1, 1, 6, 20)
    x[0, 0, 2, 5] = np.nan
    out = f(x).numpy()
    ref = OPS["nn.max_pool2d"].facts["numpy"]([x], {"pool_size": 3, "strides": 2,
                                                     "padding": 1})
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    assert np.isnan(out).sum() == 2  # output row 1, columns 2 and 3


def test_pool_rejects_a_wrong_input_shape():
    f, _ = _pool_fn("max_pool2d", (1, 3, 8, 8), {"pool_size": 2})
    with pytest.raises(ShapeError):
        f(_rand(1, 3, 9, 8))


def test_pool_kernel_checks_its_buffers():
    load_facts()
    attrs = relax.Attrs({"pool_size": 3, "strides": 2, "padding": 1})
    site = Site("nn.max_pool2d", attrs, [Value(0, relax.TensorStructInfo((1, 2, 8, 8), F32))],
                relax.TensorStructInfo((1, 2, 4, 4), F32))
    kernel = OPS["nn.max_pool2d"].facts["kernel"].make(site)
    with pytest.raises(ShapeError, match="out"):
        kernel(_rand(1, 2, 8, 8), np.empty((1, 2, 5, 4), np.float32))
    with pytest.raises(ShapeError, match="data"):
        kernel(_rand(2, 8, 8), np.empty((1, 2, 4, 4), np.float32))


# ---------------------------------------------------------------------------------------------
# Depthwise convolution on the window kernel.

DEPTHWISE_CASES = [  # channels, multiplier, h, w, kernel, stride, padding, dilation
    (272, 1, 14, 14, 3, 1, 1, 1),
    (7, 1, 28, 30, 3, 2, 1, 1),
    (6, 2, 13, 9, 3, 2, (0, 1, 1, 0), 1),
    (5, 1, 21, 35, 3, 1, 2, 2),
    (4, 1, 12, 19, 5, 1, 2, 1),
    (3, 1, 16, 16, 3, 3, 1, 1),     # stride 3: the scalar loop
    (2, 1, 5, 70, 3, 1, 0, 1),      # wide rows, no padding: the input is read in place
    (4, 1, 56, 56, 3, 2, 1, 1),     # the last window row is the last input row
]


def _torch_conv(x, w, b, stride, padding, dilation, groups):
    top, left, bottom, right = (padding,) * 4 if isinstance(padding, int) else padding
    xt = torch.nn.functional.pad(torch.from_numpy(x), (left, right, top, bottom))
    return torch.nn.functional.conv2d(xt, torch.from_numpy(w), None if b is None else
                                      torch.from_numpy(b), stride=stride, dilation=dilation,
                                      groups=groups).numpy()


def _attrs(stride, padding, dilation):
    pad = (padding,) * 4 if isinstance(padding, int) else padding
    return {"strides": (stride, stride), "padding": pad, "dilation": (dilation, dilation),
            "data_layout": "NCHW", "out_layout": "NCHW"}


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("c, mult, h, w, k, stride, padding, dilation", DEPTHWISE_CASES)
def test_depthwise_conv_matches_torch(c, mult, h, w, k, stride, padding, dilation, relu):
    weight, bias, x = _rand(c * mult, 1, k, k), _rand(c * mult), _rand(2, c, h, w)
    kernel = _DepthwiseNCHW("nn.conv2d", weight, bias, relu, c,
                            _attrs(stride, padding, dilation))
    ref = _torch_conv(x, weight, bias, stride, padding, dilation, c)
    ref = np.maximum(ref, 0) if relu else ref
    out = kernel(x, np.full(ref.shape, np.nan, np.float32))
    np.testing.assert_allclose(out, ref, **CONV_TOL)


def test_window_entry_modes_are_compiled():
    assert set(window_kernels()) == {"max", "avg", "dwconv"}


# ---------------------------------------------------------------------------------------------
# Direct stride-1 convolution.

DIRECT_CASES = [  # n, c, h, w, o, (kh, kw), padding, dilation, groups
    (1, 128, 14, 14, 32, (3, 3), 1, 1, 1),           # DenseNet growth conv
    (1, 16, 56, 56, 8, (3, 3), 1, 1, 1),             # several position chunks
    (2, 5, 9, 11, 13, (3, 3), (0, 2, 1, 0), 1, 1),   # O not a multiple of the tile
    (1, 272, 14, 14, 272, (1, 1), 0, 1, 4),          # ShuffleNet grouped 1x1, read in place
    (1, 6, 10, 12, 9, (1, 3), 0, 1, 3),
    (1, 6, 10, 12, 9, (3, 1), 0, 1, 3),              # kw == 1 without padding: in place
    (1, 6, 10, 12, 9, (2, 2), (1, 0, 0, 1), (2, 3), 1),
    (1, 3, 1, 1, 4, (1, 1), (0, 3, 0, 0), 1, 1),     # left padding only
    (1, 4, 7, 7, 20, (7, 7), 3, 1, 2),               # a 7x7 kernel
    (3, 8, 5, 49, 8, (1, 1), 0, 1, 1),               # batch, a 49-position tail
]


def _direct(n, c, h, w, o, k, padding, dilation, groups, bias=True, relu=False):
    weight = _rand(o, c // groups, *k)
    b = _rand(o) if bias else None
    dil = dilation if isinstance(dilation, tuple) else (dilation, dilation)
    pad = (padding,) * 4 if isinstance(padding, int) else padding
    attrs = {"strides": (1, 1), "padding": pad, "dilation": dil, "data_layout": "NCHW",
             "out_layout": "NCHW"}
    return DirectConv2d("nn.conv2d", weight, b, relu, groups, attrs), weight, b, pad, dil


@pytest.mark.parametrize("n, c, h, w, o, k, padding, dilation, groups", DIRECT_CASES)
def test_direct_conv_matches_torch(n, c, h, w, o, k, padding, dilation, groups):
    kernel, weight, b, pad, dil = _direct(n, c, h, w, o, k, padding, dilation, groups)
    x = _rand(n, c, h, w)
    ref = _torch_conv(x, weight, b, 1, pad, dil, groups)
    out = kernel(x, np.full(ref.shape, np.nan, np.float32))
    np.testing.assert_allclose(out, ref, **CONV_TOL)


def test_direct_conv_fused_bias_relu_equals_unfused():
    x = _rand(1, 24, 15, 15)
    fused, weight, b, pad, dil = _direct(1, 24, 15, 15, 12, (3, 3), 1, 1, 1, relu=True)
    plain = DirectConv2d("nn.conv2d", weight, None, False, 1, {
        "strides": (1, 1), "padding": pad, "dilation": dil})
    out = fused(x, np.empty((1, 12, 15, 15), np.float32))
    unfused = np.maximum(plain(x, np.empty((1, 12, 15, 15), np.float32))
                         + b.reshape(1, -1, 1, 1), 0)
    np.testing.assert_allclose(out, unfused, **CONV_TOL)
    assert (out == 0).any() and (out > 0).any()


def test_direct_conv_relu_keeps_nan():
    kernel, *_ = _direct(1, 4, 6, 6, 3, (3, 3), 1, 1, 1, relu=True)
    x = _rand(1, 4, 6, 6)
    x[0, 1, 2, 2] = np.nan
    out = kernel(x, np.empty((1, 3, 6, 6), np.float32))
    assert np.isnan(out[0, :, 1:4, 1:4]).all() and not np.isnan(out[0, :, 5, 5]).any()


def test_direct_conv_rejects_bad_arguments():
    kernel, *_ = _direct(1, 8, 6, 6, 4, (3, 3), 1, 1, 1)
    good = np.empty((1, 4, 6, 6), np.float32)
    with pytest.raises(ShapeError, match="data"):
        kernel(_rand(1, 7, 6, 6), good)                 # wrong channel count
    with pytest.raises(ShapeError, match="data"):
        kernel(_rand(8, 6, 6), good)                    # not 4-D
    with pytest.raises(ShapeError, match="out"):
        kernel(_rand(1, 8, 6, 6), np.empty((1, 4, 6, 5), np.float32))
    with pytest.raises(ShapeError, match="out"):
        kernel(_rand(1, 8, 6, 6), np.empty((1, 4, 6, 6), np.float64))
    with pytest.raises(ShapeError, match="out"):
        kernel(_rand(1, 8, 6, 6), np.empty((1, 4, 6, 12), np.float32)[..., ::2])
    with pytest.raises(ShapeError):
        kernel(_rand(1, 8, 6, 6).astype(np.float16), good)


def test_direct_conv_takes_nchw_only():
    attrs = {"strides": (2, 2), "padding": (1,) * 4, "dilation": (1, 1)}
    assert direct_conv_fits((4, 8, 3, 3), 1, attrs)
    assert not direct_conv_fits((4, 8, 3, 3), 1, {**attrs, "data_layout": "NHWC"})
    assert not direct_conv_fits((4, 8, 3, 3), 1, {**attrs, "strides": (0, 1)})
    with pytest.raises(ShapeError, match="weight"):
        DirectConv2d("nn.conv2d", _rand(4, 8, 3, 3), None, False, 1,
                     {**attrs, "out_layout": "NHWC"})


STRIDED_CASES = [  # c, h, w, o, (kh, kw), padding, strides, dilation, groups
    (3, 224, 224, 24, (3, 3), 1, (2, 2), 1, 1),       # ShuffleNet's first conv
    (3, 61, 61, 16, (7, 7), 3, (2, 2), 1, 1),         # ResNet / DenseNet stem
    (64, 28, 28, 32, (1, 1), 0, (2, 2), 1, 1),        # downsample: one phase plane used
    (6, 17, 13, 10, (3, 2), (1, 0, 2, 1), (2, 3), (1, 2), 2),
    (3, 35, 35, 8, (11, 11), 2, (4, 4), 1, 1),        # AlexNet's stem: 16 phases
    (4, 9, 10, 5, (3, 3), 1, (3, 1), 1, 1),
]


@pytest.mark.parametrize("c, h, w, o, k, padding, strides, dilation, groups", STRIDED_CASES)
def test_direct_conv_strided_matches_torch(c, h, w, o, k, padding, strides, dilation, groups):
    weight, b, x = _rand(o, c // groups, *k), _rand(o), _rand(2, c, h, w)
    pad = (padding,) * 4 if isinstance(padding, int) else padding
    dil = dilation if isinstance(dilation, tuple) else (dilation, dilation)
    kernel = DirectConv2d("nn.conv2d", weight, b, False, groups,
                          {"strides": strides, "padding": pad, "dilation": dil})
    ref = _torch_conv(x, weight, b, strides, pad, dil, groups)
    out = kernel(x, np.full(ref.shape, np.nan, np.float32))
    np.testing.assert_allclose(out, ref, **CONV_TOL)


@pytest.mark.parametrize("padding, strides", [(1, (1, 1)), (0, (1, 1)), (1, (2, 2))])
def test_direct_conv_threaded_row_bands_equal_one_thread(padding, strides):
    k = 3 if padding else 1
    kernel = DirectConv2d("nn.conv2d", _rand(20, 32, k, k), _rand(20), True, 1,
                          {"strides": strides, "padding": (padding,) * 4, "dilation": (1, 1)})
    x = _rand(2, 32, 30, 30)
    side = (30 + 2 * padding - k) // strides[0] + 1
    shape = (2, 20, side, side)
    one = kernel(x, np.empty(shape, np.float32))
    with num_threads(3):
        three = kernel(x, np.full(shape, np.nan, np.float32))
    np.testing.assert_array_equal(three, one)  # the same sums, split by output rows


@pytest.mark.parametrize("lanes", [4, 8, 16])
def test_direct_conv_vector_widths(lanes):
    """The 8- and 4-lane variants (AVX2, SSE hosts) are exercised on this host too."""
    weight, b, x = _rand(13, 6, 3, 3), _rand(13), _rand(1, 6, 11, 20)
    attrs = {"strides": (1, 1), "padding": (1, 1, 1, 1), "dilation": (1, 1)}
    kernel = DirectConv2d("nn.conv2d", weight, b, True, 1, attrs, lanes=lanes)
    ref = np.maximum(_torch_conv(x, weight, b, 1, 1, 1, 1), 0)
    np.testing.assert_allclose(kernel(x, np.empty(ref.shape, np.float32)), ref, **CONV_TOL)


def test_direct_conv_empty_input_rows_are_padding_only():
    kernel, _, b, *_ = _direct(1, 3, 0, 5, 4, (1, 1), 1, 1, 1)
    out = kernel(np.empty((1, 3, 0, 5), np.float32), np.full((1, 4, 2, 7), np.nan, np.float32))
    np.testing.assert_allclose(out, np.broadcast_to(b.reshape(1, 4, 1, 1), (1, 4, 2, 7)))


def test_direct_conv_empty_output_is_a_no_op():
    kernel, *_ = _direct(1, 2, 2, 2, 3, (3, 3), 0, 1, 1)
    out = np.empty((1, 3, 0, 0), np.float32)
    assert kernel(_rand(1, 2, 2, 2), out) is out


# ---------------------------------------------------------------------------------------------
# permute_dims: runs along a kept last axis copied natively (ShuffleNet's channel shuffle).

PERMUTE_CASES = [  # shape, axes, dtype
    ((1, 4, 68, 14, 14), (0, 2, 1, 3, 4), "float32"),   # channel shuffle
    ((2, 3, 5), (1, 0, 2), "int32"),
    ((3, 1, 4, 6), (2, 1, 0, 3), "float32"),            # a size-1 axis is dropped
    ((7,), (0,), "float32"),
    ((2, 3, 4, 5), (0, 1, 2, 3), "uint32"),             # identity: one run
]


def _permute_fn(shape, axes, dtype):
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo(shape, dtype))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(R.permute_dims(x, axes))
        bb.emit_func_output(out)
    ex = relax.build(bb.get())
    return relax.VirtualMachine(ex, relax.cpu())["main"], ex


@pytest.mark.parametrize("shape, axes, dtype", PERMUTE_CASES)
def test_permute_dims_native_matches_numpy(shape, axes, dtype):
    f, ex = _permute_fn(shape, axes, dtype)
    assert ex.stats["kernels"]["native"] == 1
    x = RNG.integers(-1000, 1000, shape).astype(dtype)
    if dtype == "float32":
        x = _rand(*shape)
        x.reshape(-1)[0] = np.nan  # moved bit for bit
    out = f(x).numpy()
    np.testing.assert_array_equal(out, np.transpose(x, axes))


def test_permute_dims_last_axis_moved_is_not_native():
    f, ex = _permute_fn((3, 4, 5), (0, 2, 1), "float32")
    assert ex.stats["kernels"]["native"] == 0
    x = _rand(3, 4, 5)
    np.testing.assert_array_equal(f(x).numpy(), np.transpose(x, (0, 2, 1)))


def test_collapse_permutation_merges_neighbours():
    assert collapse_permutation((1, 4, 68, 14, 14), (0, 2, 1, 3, 4)) == (
        [68, 4, 196], [196, 13328, 1])
    assert collapse_permutation((2, 3, 4), (0, 1, 2)) == ([24], [1])


def test_permute_kernel_checks_its_buffers():
    load_facts()
    site = Site("permute_dims", relax.Attrs({"axes": [1, 0, 2]}),
                [Value(0, relax.TensorStructInfo((2, 3, 4), F32))],
                relax.TensorStructInfo((3, 2, 4), F32))
    kernel = OPS["permute_dims"].facts["kernel"].make(site)
    with pytest.raises(ShapeError, match="out"):
        kernel(_rand(2, 3, 4), np.empty((2, 3, 4), np.float32))
    with pytest.raises(ShapeError, match="data"):
        kernel(_rand(2, 3, 4).astype(np.float64), np.empty((3, 2, 4), np.float32))
    with pytest.raises(ShapeError, match="data"):
        kernel(_rand(2, 3), np.empty((3, 2), np.float32))
    strided = _rand(2, 3, 8)[:, :, ::2]  # not contiguous: numpy copies it into out
    out = kernel(strided, np.empty((3, 2, 4), np.float32))
    np.testing.assert_array_equal(out, strided.transpose(1, 0, 2))
