"""ResNet's shortcut add (+ relu) folded into a 1x1 direct conv's tile stores (the
"residual" epilogue): fused only when the shortcut is computed before the conv and the conv
writes its output rows as they are; results against torch, 2 threads bitwise equal to 1."""

import numpy as np
import pytest

from msc import relax
from msc.backend.kernels import direct_conv
from msc.backend.kernels.direct_conv import DirectConv2d
from msc.backend.runtime.threads import num_threads
from msc.errors import ShapeError
from msc.relax import op as R

torch = pytest.importorskip("torch")


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _block(k_main: int, stride: int, shortcut_first: bool):
    """relu(conv_main(x) + b + conv_short(x)): (module, weights)."""
    w_main, w_short, b = _rand(24, 8, k_main, k_main, seed=1), _rand(24, 8, 1, 1, seed=2), \
        _rand(24, seed=3)
    x = relax.Var("x", relax.TensorStructInfo((2, 8, 18, 18), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            if shortcut_first:
                short = bb.emit(R.nn.conv2d(x, relax.const(w_short), strides=stride))
            main = bb.emit(R.nn.conv2d(x, relax.const(w_main), strides=stride,
                                       padding=k_main // 2))
            main = bb.emit(R.add(main, relax.const(b.reshape(1, -1, 1, 1))))
            if not shortcut_first:
                short = bb.emit(R.nn.conv2d(x, relax.const(w_short), strides=stride))
            gv = bb.emit_output(R.nn.relu(bb.emit(R.add(main, short))))
        bb.emit_func_output(gv)
    return bb.get(), (w_main, w_short, b)


@pytest.mark.parametrize("k_main, stride, shortcut_first, fused", [
    (1, 1, True, "nn.conv2d+add+add+nn.relu"),   # into the main conv, after its bias
    (1, 2, False, "nn.conv2d+add+nn.relu"),      # the shortcut comes later: into it instead
    (3, 1, True, None),                          # a padded 3x3 conv keeps the add
])
def test_residual_fuses_and_matches_torch(monkeypatch, k_main, stride, shortcut_first, fused):
    monkeypatch.setattr(direct_conv, "_PARALLEL_MACS", 0)
    mod, (w_main, w_short, b) = _block(k_main, stride, shortcut_first)
    ex = relax.build(mod)
    assert (fused in ex.stats["fused"]) if fused else ("add+nn.relu" in ex.stats["fused"])
    f = relax.VirtualMachine(ex, relax.cpu())["main"]
    xv = _rand(2, 8, 18, 18, seed=4)
    with num_threads(1):
        one = f(xv).numpy().copy()
    with num_threads(2):
        two = f(xv).numpy().copy()
    assert np.array_equal(one, two)
    t = torch.from_numpy(xv)
    want = torch.relu(torch.conv2d(t, torch.from_numpy(w_main), torch.from_numpy(b),
                                   stride=stride, padding=k_main // 2)
                      + torch.conv2d(t, torch.from_numpy(w_short), stride=stride)).numpy()
    np.testing.assert_allclose(one, want, rtol=1e-4, atol=1e-4)


def test_residual_kernel_checks_its_arguments():
    attrs = {"strides": (1, 1), "padding": (1, 1, 1, 1), "dilation": (1, 1)}
    with pytest.raises(ShapeError, match="1x1"):
        DirectConv2d("nn.conv2d", _rand(4, 2, 3, 3), None, True, 1, attrs, residual=1)
    attrs["padding"] = (0, 0, 0, 0)
    kernel = DirectConv2d("nn.conv2d", _rand(4, 2, 1, 1), None, True, 1, attrs, residual=1)
    x, out = _rand(1, 2, 5, 5), np.empty((1, 4, 5, 5), np.float32)
    with pytest.raises(ShapeError, match="residual"):
        kernel(x, np.zeros((1, 4, 5, 6), np.float32), out)
    with pytest.raises(ShapeError, match="input arrays"):
        kernel(x, out)
    res = _rand(1, 4, 5, 5, seed=5)
    want = np.maximum(np.einsum("nchw,oc->nohw", x, kernel_weight(kernel)) + res, 0)
    np.testing.assert_allclose(kernel(x, res, out), want, rtol=1e-5, atol=1e-5)


def kernel_weight(kernel) -> np.ndarray:
    """The [O, C] weight of a 1x1 direct conv back from its [G, OB, C, taps, R] packing."""
    w = kernel.w[0, :, :, 0, :]  # [OB, C, R]
    return w.transpose(0, 2, 1).reshape(-1, kernel.c)[:kernel.o]
