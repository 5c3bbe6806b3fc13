"""mean over trailing axes on the native row kernel (kernels/reduce_rows.py) against numpy:
a CNN's global average pool, keepdims or not, odd row lengths, one axis or two; other axes
keep the compiled TIR path."""

import numpy as np
import pytest

from msc import relax
from msc.relax import op as R

CASES = [  # shape, axis, keepdims
    ((1, 1000, 13, 13), [2, 3], True),    # SqueezeNet's global average pool
    ((2, 7, 5, 3), [-2, -1], False),
    ((3, 37), [1], True),                 # a row shorter than 3 vectors, with a tail
    ((4, 2, 17), -1, False),
]


def _mean_fn(shape, axis, keepdims):
    x = relax.Var("x", relax.TensorStructInfo(shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(R.mean(x, axis=axis, keepdims=keepdims))
        bb.emit_func_output(gv)
    ex = relax.build(bb.get())
    return relax.VirtualMachine(ex, relax.cpu())["main"], ex


@pytest.mark.parametrize("shape, axis, keepdims", CASES)
def test_mean_over_trailing_axes_is_native_and_matches_numpy(shape, axis, keepdims):
    f, ex = _mean_fn(shape, axis, keepdims)
    assert ex.stats["ops"]["mean"] == {"native": 1}
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    want = x.astype(np.float64).mean(axis=tuple(np.atleast_1d(axis)), keepdims=keepdims)
    np.testing.assert_allclose(f(x).numpy(), want, rtol=1e-5, atol=1e-6)


def test_mean_over_a_leading_axis_stays_compiled_tir():
    f, ex = _mean_fn((4, 6), [0], False)
    assert "native" not in ex.stats["ops"]["mean"]
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_allclose(f(x).numpy(), x.mean(axis=0), rtol=1e-6)


def test_mean_keeps_nan_and_inf():
    f, _ = _mean_fn((2, 3, 4), [2], False)
    x = np.ones((2, 3, 4), np.float32)
    x[0, 1, 2], x[1, 0, 0] = np.nan, np.inf
    out = f(x).numpy()
    assert np.isnan(out[0, 1]) and out[1, 0] == np.inf and out[0, 0] == 1.0
