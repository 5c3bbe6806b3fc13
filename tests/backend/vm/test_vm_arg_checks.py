"""The VM checks every argument against the function's signature before native code runs:
a wrong type, dtype, rank or dim is a ShapeError naming the parameter; strided and subclassed
arrays are accepted (copied or viewed) and give the same result as a plain array."""

from __future__ import annotations

import numpy as np
import pytest

from msc import relax
from msc.errors import ShapeError
from msc.relax.op.registry import make_call
from msc.tir import expr as tir
from tests.helpers.relax_modules import one_function_module

X = np.arange(12, dtype="float32").reshape(3, 4)
I = np.array([2, 0])
N = tir.Var("n", "int64")


@pytest.fixture(scope="module")
def take():
    """take(x: (3, 4) float32, i: (2,) int64, axis=0) on its compiled kernel."""
    x = relax.Var("x", relax.TensorStructInfo((3, 4), "float32"))
    i = relax.Var("i", relax.TensorStructInfo((2,), "int64"))
    mod = one_function_module([x, i], lambda bb, x, i: make_call("take", x, i, axis=0))
    return relax.VirtualMachine(relax.build(mod), relax.cpu())["main"]


BAD = {
    "list": ([[1.0] * 4] * 3, I, "x", "numpy array"),
    "none": (None, I, "x", "numpy array"),
    "string": ("abc", I, "x", "numpy array"),
    "object dtype": (X.astype(object), I, "x", "dtype float32"),
    "float64": (X.astype("float64"), I, "x", "dtype float32"),
    "bool": (X.astype(bool), I, "x", "dtype float32"),
    "structured": (np.zeros((3, 4), [("a", "f4")]), I, "x", "dtype float32"),
    "python float": (1.0, I, "x", "dtype float32"),
    "0-d": (np.float32(1), I, "x", "rank 2"),
    "rank 3": (X[..., None], I, "x", "rank 2"),
    "wrong dim": (np.zeros((3, 5), "float32"), I, "x", r"\(3, 4\)"),
    "empty": (np.zeros((0, 4), "float32"), I, "x", r"\(3, 4\)"),
    "int32 indices": (X, I.astype("int32"), "i", "dtype int64"),
    "float indices": (X, I.astype("float32"), "i", "dtype int64"),
    "too many indices": (X, np.array([0, 1, 2]), "i", r"\(2\)"),
    # refused from its shape before a 3.6 TiB contiguous copy is attempted
    "huge broadcast view": (np.broadcast_to(np.float32(1), (10**6, 10**6)), I, "x", "got"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_argument_is_a_shape_error_naming_it(take, case):
    x, i, param, match = BAD[case]
    with pytest.raises(ShapeError, match=match) as err:
        take(x, i)
    assert err.value.context["param"] == param


def test_wrong_argument_count(take):
    with pytest.raises(ShapeError, match="takes 2 arguments"):
        take(X)
    with pytest.raises(ShapeError, match="takes 2 arguments"):
        take(X, I, I)


GOOD = {  # made on use: np.asmatrix warns (PendingDeprecationWarning)
    "fortran order": lambda: np.asfortranarray(X),
    "negative strides": lambda: X[::-1].copy()[::-1],
    "column slice": lambda: np.repeat(X, 2, axis=1)[:, ::2],
    "read-only": lambda: np.frombuffer(X.tobytes(), "float32").reshape(3, 4),
    "matrix subclass": lambda: np.asmatrix(X),
}


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
@pytest.mark.parametrize("case", sorted(GOOD))
def test_strided_and_subclassed_inputs_give_the_plain_result(take, case):
    got = take(GOOD[case](), I).numpy()
    np.testing.assert_array_equal(got, X[I])


def test_symbolic_dim_bound_twice_must_agree():
    x = relax.Var("x", relax.TensorStructInfo((N, 4), "float32"))
    y = relax.Var("y", relax.TensorStructInfo((N, 4), "float32"))
    mod = one_function_module([x, y], lambda bb, x, y: make_call("add", x, y))
    f = relax.VirtualMachine(relax.build(mod), relax.cpu())["main"]
    np.testing.assert_array_equal(f(X, X).numpy(), X + X)
    with pytest.raises(ShapeError, match="dim n is 2") as err:
        f(X, X[:2].copy())
    assert err.value.context["param"] == "y"
