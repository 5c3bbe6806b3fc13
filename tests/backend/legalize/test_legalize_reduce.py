"""Legalized reductions, softmax / log_softmax and normalizations against the numpy reference
and the TIR interpreter (float32 rtol 1e-5 atol 1e-6 scaled by the reduction length where
stated; float16 / bfloat16 accumulate in float32, so only their storage rounding shows)."""

from __future__ import annotations

import numpy as np
import pytest

from msc.backend.legalize.testing import check_op
from msc.tir.interp import np_dtype

RNG = np.random.default_rng(0)


def _data(shape, dtype="float32"):
    x = RNG.standard_normal(shape)
    if np_dtype(dtype).kind in "iu":
        x = np.round(x * 20)
    return x.astype(np_dtype(dtype))


AXES = [(None, False), (1, False), ([0, 2], True), (-1, False), ([1, 2], False)]


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "prod", "variance", "std"])
@pytest.mark.parametrize("axis, keepdims", AXES, ids=str)
def test_reductions(op, axis, keepdims):
    check_op(op, [_data((2, 3, 4))], axis, keepdims, scale=10)


OTHER_DTYPES = [(op, dt) for op in ("sum", "mean", "max", "variance")
                for dt in ("float16", "bfloat16", "float64")] + [("sum", "int32"),
                                                                  ("max", "int8"),
                                                                  ("prod", "int64")]


@pytest.mark.parametrize("op, dtype", OTHER_DTYPES)
def test_reductions_other_dtypes(op, dtype):
    check_op(op, [_data((3, 50), dtype) if op != "prod" else _data((3, 5), dtype) % 5], 1,
             False, scale=4)


@pytest.mark.parametrize("shape, axis", [((1, 64, 56, 56), [2, 3]), ((8, 1000), [1]),
                                         ((4, 300, 7), [1])], ids=str)
def test_reductions_large(shape, axis):
    check_op("sum", [_data(shape)], axis, True, interp=False, scale=20)
    check_op("max", [_data(shape)], axis, True, interp=False)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("axis, keepdims", [(None, False), (1, False), (2, True), (0, False)])
def test_arg_reductions(op, axis, keepdims):
    x = _data((3, 4, 5))
    x[1, 2] = x[1, 1]  # ties keep the first index
    check_op(op, [x], axis, keepdims)


def test_argmax_of_all_minus_infinity_is_the_first_index():
    x = np.full((2, 3), -np.inf, "float32")
    got, _ = check_op("argmax", [x], 1)
    assert list(got) == [0, 0]


@pytest.mark.parametrize("op", ["nn.softmax", "nn.log_softmax"])
@pytest.mark.parametrize("shape, axis", [((2, 5), -1), ((2, 3, 4), 1), ((3, 4), 0),
                                         ((1, 1000), -1)], ids=str)
def test_softmax(op, shape, axis):
    check_op(op, [_data(shape) * 3], axis=axis)


@pytest.mark.parametrize("op", ["nn.softmax", "nn.log_softmax"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_softmax_other_dtypes(op, dtype):
    check_op(op, [_data((3, 40), dtype)], axis=-1)


def test_softmax_of_huge_values_does_not_overflow():
    got, _ = check_op("nn.softmax", [np.array([[1e30, 1e30, -1e30]], "float32")])
    np.testing.assert_allclose(got, [[0.5, 0.5, 0.0]])


@pytest.mark.parametrize("shape, axes", [((2, 3, 4), [-1]), ((2, 3, 4), [1, 2]),
                                         ((4, 768), [-1])], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_layer_norm(shape, axes, dtype):
    params = tuple(shape[a] for a in axes)
    check_op("nn.layer_norm", [_data(shape, dtype), _data(params, dtype), _data(params, dtype)],
             axes, scale=5)


def test_layer_norm_without_scale_and_center():
    # positional: axes, epsilon, center, scale (check_op's own ``scale`` is the tolerance)
    check_op("nn.layer_norm", [_data((2, 6)), _data((6,)), _data((6,))], [-1], 1e-3, False,
             False, scale=5)


@pytest.mark.parametrize("shape, axes", [((2, 3, 4), [-1]), ((2, 3, 4), [0, 2])], ids=str)
def test_rms_norm(shape, axes):
    check_op("nn.rms_norm", [_data(shape), _data(tuple(shape[a] for a in axes))], axes,
             scale=5)


@pytest.mark.parametrize("groups", [1, 2, 6])
def test_group_norm(groups):
    x, c = _data((2, 6, 3, 5)), 6
    check_op("nn.group_norm", [x, _data((c,)), _data((c,))], groups, 1, [2, 3], scale=5)


def test_instance_norm():
    check_op("nn.instance_norm", [_data((2, 4, 3, 3)), _data((4,)), _data((4,))], 1, [2, 3],
             scale=5)


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("axis, shape", [(1, (2, 4, 3, 3)), (-1, (5, 4))])
def test_batch_norm(training, axis, shape):
    c = shape[axis]
    var = np.abs(_data((c,))) + 0.5
    check_op("nn.batch_norm", [_data(shape), _data((c,)), _data((c,)), _data((c,)), var], axis,
             training=training, scale=5)
