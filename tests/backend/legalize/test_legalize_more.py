"""Legalized conv transposes, scatters, pixel_shuffle and losses against the numpy reference
and the TIR interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from msc.backend.legalize.testing import build_call, check_call, check_op

RNG = np.random.default_rng(0)


def _data(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


CONVT2D = [
    {},
    {"strides": (2, 2)},
    {"strides": (2, 2), "padding": (1, 1)},
    {"strides": (2, 1), "padding": (1, 0, 0, 1), "output_padding": (1, 0)},
    {"strides": (2, 2), "dilation": (2, 1), "padding": (1, 1)},
]


@pytest.mark.parametrize("attrs", CONVT2D, ids=str)
def test_conv2d_transpose(attrs):
    check_op("nn.conv2d_transpose", [_data(2, 4, 5, 6), _data(4, 3, 3, 3)], **attrs)


def test_conv2d_transpose_groups():
    check_op("nn.conv2d_transpose", [_data(1, 4, 5, 5), _data(4, 3, 3, 3)], strides=(2, 2),
             padding=(1, 1), groups=2)


@pytest.mark.parametrize("attrs", [{}, {"strides": 2, "padding": 1},
                                   {"strides": 3, "padding": 2, "output_padding": 1},
                                   {"strides": 2, "dilation": 2, "groups": 2}], ids=str)
def test_conv1d_transpose(attrs):
    check_op("nn.conv1d_transpose", [_data(2, 4, 7), _data(4, 2, 3)], **attrs)


def test_conv3d_transpose():
    check_op("nn.conv3d_transpose", [_data(1, 2, 3, 4, 3), _data(2, 2, 2, 3, 2)],
             strides=(2, 1, 2), padding=(1, 0, 1))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements_update(axis):
    data = _data(4, 5)
    n = data.shape[axis]
    # distinct indices along the axis: update order is then irrelevant
    idx = np.stack([RNG.permutation(n)[:3] for _ in range(5 if axis == 0 else 4)],
                   axis=1 if axis == 0 else 0)
    idx = idx if axis == 0 else idx.reshape(4, 3)
    check_op("scatter_elements", [data, idx.astype("int64"), _data(*idx.shape)], axis=axis)


@pytest.mark.parametrize("reduction", ["add", "mul", "min", "max"])
def test_scatter_elements_reduce(reduction):
    idx = RNG.integers(-3, 3, (5, 4)).astype("int32")
    check_op("scatter_elements", [_data(3, 4), idx, _data(5, 4)], axis=0, reduction=reduction)


@pytest.mark.parametrize("reduction", ["update", "add", "max"])
def test_scatter_nd(reduction):
    data = _data(4, 3, 2)
    flat = RNG.permutation(12)[:5] if reduction == "update" else RNG.integers(0, 12, 5)
    idx = np.stack([flat // 3, flat % 3], axis=-1).astype("int64")
    check_op("scatter_nd", [data, idx, _data(5, 2)], reduction=reduction)
    idx1 = (RNG.permutation(4)[:2] if reduction == "update" else RNG.integers(-4, 4, 2))
    check_op("scatter_nd", [data, idx1.reshape(2, 1).astype("int64"), _data(2, 3, 2)],
             reduction=reduction)


@pytest.mark.parametrize("shape,r", [((1, 8, 3, 4), 2), ((2, 9, 2, 3), 3), ((3, 2, 4, 5, 2), 2)])
def test_pixel_shuffle(shape, r):
    check_op("nn.pixel_shuffle", [_data(*shape)], upscale_factor=r)


@pytest.mark.parametrize("shape", [(4, 5), (7,)])
def test_cross_entropy_with_logits(shape):
    check_op("nn.cross_entropy_with_logits", [_data(*shape), _data(*shape)], scale=10)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss(reduction, weighted):
    pred = _data(6, 4)
    target = RNG.integers(0, 4, 6).astype("int64")
    target[2] = -100
    tensors = [pred, target] + ([np.abs(_data(4)) + 0.1] if weighted else [])
    check_op("nn.nll_loss", tensors, reduction=reduction, scale=10)


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_nll_loss_spatial(reduction):
    pred = _data(2, 3, 4, 5)
    target = RNG.integers(0, 3, (2, 4, 5)).astype("int32")
    target[0, 1, 2] = 1
    check_op("nn.nll_loss", [pred, target], reduction=reduction, ignore_index=1, scale=10)


@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
    ("ij,kj", [(3, 4), (5, 4)]),
    ("ii->i", [(4, 4)]),
    ("ij->ji", [(3, 5)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
])
def test_einsum(subscripts, shapes):
    check_op("einsum", [[_data(*s) for s in shapes]], subscripts=subscripts, scale=10)


@pytest.mark.parametrize("attrs", [{}, {"scale": 0.3}, {"causal_mask": "TopLeft"},
                                   {"causal_mask": "BottomRight"}], ids=str)
def test_attention(attrs):
    q, k, v = _data(2, 3, 2, 4), _data(2, 5, 2, 4), _data(2, 5, 2, 6)
    check_call(build_call("nn.attention", [q, k, v], **attrs), [q, k, v], scale=10)


def test_attention_bias():
    q, k, v = _data(1, 3, 2, 4), _data(1, 5, 2, 4), _data(1, 5, 2, 4)
    check_op("nn.attention_bias", [q, k, v, _data(1, 2, 3, 5)], scale=10)


@pytest.mark.parametrize("method", ["nearest_neighbor", "linear"])
@pytest.mark.parametrize("mode", ["half_pixel", "align_corners", "asymmetric"])
@pytest.mark.parametrize("size", [(8, 10), (3, 2), (5, 7)], ids=str)
def test_resize2d(method, mode, size):
    check_op("image.resize2d", [_data(1, 2, 4, 5)], size, method=method,
             coordinate_transformation_mode=mode)


def test_resize2d_nhwc_rounding():
    check_op("image.resize2d", [_data(2, 4, 5, 3)], (7, 9), layout="NHWC",
             method="nearest_neighbor", rounding_method="round_prefer_ceil")


@pytest.mark.parametrize("op", ["sort", "argsort"])
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort(op, axis, descending):
    check_op(op, [_data(5, 6)], axis=axis, descending=descending)
    ties = RNG.integers(0, 3, (4, 7)).astype("int32")
    check_op(op, [ties], axis=axis, descending=descending)


@pytest.mark.parametrize("ret_type", ["both", "values", "indices"])
@pytest.mark.parametrize("largest", [True, False])
def test_topk(ret_type, largest):
    check_op("topk", [_data(3, 8)], k=3, ret_type=ret_type, largest=largest)
    check_op("topk", [RNG.integers(0, 4, (6, 2)).astype("int64")], k=2, axis=0,
             ret_type=ret_type, largest=largest)
