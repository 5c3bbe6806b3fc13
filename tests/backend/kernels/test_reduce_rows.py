"""mean over trailing axes on the native row kernel (kernels/reduce_rows.py) against numpy:
a CNN's global average pool, keepdims or not, odd row lengths, one axis or two; other axes
keep the compiled TIR path. Rows shorter than a vector take the strided-gather path."""

import numpy as np
import pytest

from msc import relax
from msc.relax import op as R
from tests.helpers.isa_child import ROOT, capped_report

CASES = [  # shape, axis, keepdims
    ((1, 1000, 13, 13), [2, 3], True),    # SqueezeNet's global average pool
    ((2, 7, 5, 3), [-2, -1], False),
    ((3, 37), [1], True),                 # a row shorter than 3 vectors, with a tail
    ((4, 2, 17), -1, False),
    ((16, 1280, 1, 1), [2, 3], True),     # MobileNetV2 at 32x32: rows of one float
    ((3, 37, 2, 2), [2, 3], False),       # rows shorter than a vector, a tail of rows
    ((5, 3, 3), [1, 2], True),            # 5 rows of 9: one gather block, masked
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


_CHILD = """
import json, sys
import numpy as np
sys.path.insert(0, {root!r})
from msc.backend.kernels.reduce_rows import MeanKernel
from msc.backend.llvm.jit import vector_lanes
errors = []
for shape, n in [((3, 37, 1, 1), 1), ((2, 11, 2, 2), 4), ((2, 5, 3, 3), 9), ((2, 3, 5, 5), 25)]:
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    out = np.full(x.size // n, np.nan, np.float32)
    MeanKernel(shape, n, out.shape)(x, out)
    errors.append(float(np.abs(out - x.reshape(-1, n).astype(np.float64).mean(1)).max()))
print(json.dumps({{"lanes": vector_lanes(), "errors": errors}}))
"""


def test_forced_avx2_short_and_long_rows_match_numpy(tmp_path):
    """$MSC_CPU_ISA=avx2 in a child process (the host target is read once a process): 8-lane
    gathers for rows shorter than 8 floats, the row path from 8 on."""
    report = capped_report(_CHILD.format(root=ROOT), "avx2", tmp_path)
    assert report["lanes"] == 8 and max(report["errors"]) < 1e-6, report
