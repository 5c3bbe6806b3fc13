"""Legalized pooling, convolution and matmul-family ops against the numpy reference and the
TIR interpreter (float32 rtol 1e-5 atol 1e-6, scaled by the reduction length where stated)."""

from __future__ import annotations

import numpy as np
import pytest

from msc.backend.legalize.testing import check_op

RNG = np.random.default_rng(0)


def _data(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


POOL2D = [
    {"pool_size": (2, 2), "strides": (2, 2)},
    {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1)},
    {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1), "ceil_mode": True},
    {"pool_size": (3, 2), "strides": (1, 2), "padding": (1, 0, 2, 1), "dilation": (2, 1)},
    {"pool_size": (3, 3), "padding": (1, 1), "count_include_pad": True},
    {"pool_size": (7, 6)},
]


@pytest.mark.parametrize("op", ["nn.max_pool2d", "nn.avg_pool2d"])
@pytest.mark.parametrize("attrs", POOL2D, ids=str)
def test_pool2d(op, attrs):
    check_op(op, [_data(2, 3, 7, 6)], **attrs)


@pytest.mark.parametrize("op", ["nn.max_pool2d", "nn.avg_pool2d"])
def test_pool2d_nhwc(op):
    check_op(op, [_data(1, 7, 6, 3)], pool_size=(3, 3), strides=(2, 2), padding=(1, 1),
             layout="NHWC")


@pytest.mark.parametrize("op", ["nn.max_pool1d", "nn.avg_pool1d", "nn.max_pool3d",
                                "nn.avg_pool3d"])
def test_pool_1d_3d(op):
    x = _data(2, 3, 9) if "1d" in op else _data(1, 2, 5, 4, 6)
    nd = x.ndim - 2
    check_op(op, [x], pool_size=(3,) * nd, strides=(2,) * nd, padding=(1,) * nd)


@pytest.mark.parametrize("op", ["nn.max_pool2d", "nn.avg_pool2d"])
def test_pool2d_resnet_stem_shape(op):
    check_op(op, [_data(1, 64, 112, 112)], pool_size=(3, 3), strides=(2, 2), padding=(1, 1),
             interp=False)


@pytest.mark.parametrize("size", [(1, 1), (2, 3), (3, 2), (7, 6), None, (4, 4)], ids=str)
def test_adaptive_avg_pool2d(size):
    check_op("nn.adaptive_avg_pool2d", [_data(2, 3, 7, 6)], size)


def test_adaptive_avg_pool_1d_3d_and_global():
    check_op("nn.adaptive_avg_pool1d", [_data(2, 3, 9)], 4)
    check_op("nn.adaptive_avg_pool3d", [_data(1, 2, 4, 4, 6)], (2, 2, 3))
    check_op("nn.adaptive_avg_pool2d", [_data(1, 512, 7, 7)], (1, 1), interp=False, scale=3)


CONV2D = [{}, {"strides": 2, "padding": 1}, {"strides": (1, 2), "padding": (1, 0, 2, 1), "dilation": (2, 1)}]


@pytest.mark.parametrize("attrs", CONV2D, ids=str)
def test_conv2d(attrs):
    check_op("nn.conv2d", [_data(1, 4, 7, 6), _data(6, 4, 3, 3)], scale=10, **attrs)


@pytest.mark.parametrize("groups, weight", [(2, (6, 2, 3, 3)), (4, (4, 1, 3, 3))])
def test_grouped_and_depthwise_conv2d(groups, weight):
    check_op("nn.conv2d", [_data(1, 4, 7, 6), _data(*weight)], padding=1, groups=groups,
             scale=10)


def test_conv2d_nhwc_hwio_and_conv1d_conv3d():
    check_op("nn.conv2d", [_data(1, 7, 6, 4), _data(3, 3, 4, 6)], padding=1,
             data_layout="NHWC", kernel_layout="HWIO", scale=10)
    check_op("nn.conv1d", [_data(2, 3, 9), _data(4, 3, 3)], padding=1, strides=2, scale=10)
    check_op("nn.conv3d", [_data(1, 2, 4, 5, 5), _data(3, 2, 3, 3, 3)], padding=1, scale=10)


def test_conv2d_float16_accumulates_in_float32():
    check_op("nn.conv2d", [_data(1, 8, 6, 6, dtype="float16"), _data(4, 8, 3, 3,
                                                                     dtype="float16")],
             padding=1, scale=4)


MATMUL = [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (3, 4, 5)), ((4,), (4, 5)),
          ((3, 4), (4,)), ((4,), (4,))]


@pytest.mark.parametrize("shapes", MATMUL, ids=str)
def test_matmul(shapes):
    check_op("matmul", [_data(*shapes[0]), _data(*shapes[1])], scale=10)


@pytest.mark.parametrize("dtype", ["float16", "float64", "int32"])
def test_matmul_dtypes(dtype):
    a, b = _data(3, 8), _data(8, 5)
    if dtype == "int32":
        a, b = np.round(a * 5), np.round(b * 5)
    check_op("matmul", [a.astype(dtype), b.astype(dtype)], scale=4)


@pytest.mark.parametrize("ta, tb", [(False, True), (True, False), (False, False)])
def test_batch_matmul(ta, tb):
    a = _data(2, 4, 3) if ta else _data(2, 3, 4)
    b = _data(2, 5, 4) if tb else _data(2, 4, 5)
    check_op("nn.batch_matmul", [a, b], transpose_a=ta, transpose_b=tb, scale=10)


def test_dense_and_outer():
    check_op("nn.dense", [_data(3, 4), _data(6, 4)], scale=10)
    check_op("outer", [_data(3), _data(4)])
