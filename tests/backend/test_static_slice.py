"""strided_slice with constant axes / begins / ends / strides on a static input runs as one
bound numpy index (dispatch/resolve.static_slice) and gives exactly numpy's slice: negative
begins and strides, ends past the axis (ONNX's INT64_MAX), several axes, a contiguous result."""

import numpy as np
import pytest

from msc import relax
from msc.backend.dispatch import resolve
from msc.relax import op as R

BIG = 9223372036854775807


def _build(shape, axes, begins, ends, strides):
    x = relax.Var("x", relax.TensorStructInfo(shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(R.strided_slice(x, axes, begins, ends, strides))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return relax.build(bb.get())


@pytest.mark.parametrize("axes, begins, ends, strides", [
    ((3,), (4,), (BIG,), (1,)),            # Llama's rotary second half
    ((3,), (0,), (4,), (1,)),
    ((1, 2), (-3, 1), (BIG, 11), (1, 3)),  # negative begin, stride 3
    ((2,), (-1,), (-BIG,), (-2,)),         # reversed, stride -2
    ((0,), (0,), (1,), (1,)),              # a contiguous view
])
def test_static_slice_equals_numpy(monkeypatch, axes, begins, ends, strides):
    made = []
    original = resolve.static_slice
    monkeypatch.setattr(resolve, "static_slice",
                        lambda site: made.append(original(site)) or made[-1])
    ex = _build((2, 4, 12, 8), axes, begins, ends, strides)
    assert len(made) == 1 and callable(made[0])  # the bound index, not the numpy fact
    x = np.arange(2 * 4 * 12 * 8, dtype=np.float32).reshape(2, 4, 12, 8)
    index = [slice(None)] * 4
    for a, b, e, s in zip(axes, begins, ends, strides):
        index[a] = slice(b, e, s)
    got = relax.VirtualMachine(ex, relax.cpu())["main"](x).numpy()
    want = x[tuple(index)]
    assert got.shape == want.shape and np.array_equal(got, want)
    assert got.flags.c_contiguous
