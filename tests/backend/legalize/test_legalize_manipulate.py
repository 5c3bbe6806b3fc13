"""Legalized data-movement ops (reshape family, permute_dims, concat / stack / split,
strided_slice, take, broadcast_to, tile, repeat, flip, pad): exact against numpy and the TIR
interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from msc.backend.legalize.testing import check_op

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 4)).astype("float32")


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (24,), (2, 1, 12), (1, 2, 3, 4), (3, 8)])
def test_reshape(shape):
    check_op("reshape", [X], shape)


@pytest.mark.parametrize("op, args", [("flatten", ()), ("expand_dims", ([0, 2],)),
                                      ("expand_dims", (-1,)), ("nn.batch_flatten", ())],
                         ids=str)
def test_reshape_family(op, args):
    check_op(op, [X], *args)


@pytest.mark.parametrize("axis", [[1], None, [0, 2]], ids=str)
def test_squeeze(axis):
    check_op("squeeze", [RNG.standard_normal((1, 3, 1)).astype("float32")], axis)


@pytest.mark.parametrize("axes", [[2, 0, 1], None, [0, 2, 1]], ids=str)
def test_permute_dims(axes):
    check_op("permute_dims", [X], axes)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat_and_stack(axis):
    other = RNG.standard_normal((2, 3, 4)).astype("float32")
    check_op("concat", [[X, other, X]], axis)
    check_op("stack", [[X, other]], axis)


@pytest.mark.parametrize("sections", [3, [1, 3]], ids=str)
def test_split(sections):
    check_op("split", [RNG.standard_normal((2, 5, 4)).astype("float32")], sections, 1)


SLICES = [([1, 2], [1, -3], [3, 4], [1, 2]), ([2], [-1], [-5], [-1]), ([0], [0], [100], None),
          ([1], [-2], [3], [1])]


@pytest.mark.parametrize("axes, begin, end, strides", SLICES, ids=str)
def test_strided_slice(axes, begin, end, strides):
    args = (axes, begin, end) + ((strides,) if strides else ())
    check_op("strided_slice", [X], *args)


@pytest.mark.parametrize("mode, indices", [
    ("fast", np.array([[0, 2], [1, -1]], "int64")),
    ("clip", np.array([5, 0, 2], "int32")),
    ("wrap", np.array([5, -1, 2], "int64")),
], ids=lambda v: str(v) if isinstance(v, str) else "")
@pytest.mark.parametrize("axis", [1, 2])
def test_take(mode, indices, axis):
    if mode == "fast" and axis == 2:
        indices = indices % 4 - 1
    check_op("take", [X, indices], axis=axis, mode=mode)


@pytest.mark.parametrize("src, shape", [((2, 1, 4), (2, 3, 4)), ((3, 4), (5, 3, 4)),
                                        ((1,), (2, 2))], ids=str)
def test_broadcast_to(src, shape):
    check_op("broadcast_to", [RNG.standard_normal(src).astype("float32")], shape)


@pytest.mark.parametrize("reps", [[2, 1, 2], [2, 1, 1, 2], [3]], ids=str)
def test_tile(reps):
    check_op("tile", [X], reps)


@pytest.mark.parametrize("axis", [1, None, -1])
def test_repeat(axis):
    check_op("repeat", [X], 2, axis)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_flip(axis):
    check_op("flip", [X], axis)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "circular"])
def test_pad(mode):
    check_op("nn.pad", [X], [0, 0, 1, 2, 2, 1], pad_value=1.5, pad_mode=mode)


@pytest.mark.parametrize("dtype", ["int8", "bool", "float16", "int64"])
def test_data_movement_keeps_dtypes(dtype):
    x = (RNG.standard_normal((2, 3, 4)) * 10).astype(dtype)
    check_op("permute_dims", [x], [1, 0, 2])
    check_op("reshape", [x], (4, 6))
    check_op("concat", [[x, x]], 1)
