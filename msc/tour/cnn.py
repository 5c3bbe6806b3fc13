"""``msc demo`` step: a ShuffleNet-style block (3x3 stem of stride 2, max pool, depthwise 3x3
conv, grouped 1x1 conv, 3x3 average pool) built with relax.build and checked against numpy
references computed here: the in-place 3x3 window kernels (kernels/window3.py) and the
direct conv with its shared padding zeros (kernels/direct_conv.py)."""

from __future__ import annotations

import time

import numpy as np

from .shared import banner


def _conv(x, w, stride, pad, groups=1):
    """float64 NCHW convolution by taps (numpy only)."""
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                win = xs[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", win,
                                                         w[g * og:(g + 1) * og, :, i, j])
    return out


def _pool(x, mode, stride, pad):
    """3x3 max or average (padding not counted) pooling (numpy only)."""
    fill = -np.inf if mode == "max" else 0.0
    spec = ((0, 0), (0, 0), (pad, pad), (pad, pad))
    xp = np.pad(x.astype(np.float64), spec, constant_values=fill)
    ones = np.pad(np.ones(x.shape[2:]), spec[2:])  # 1 inside the input: the window counts
    oh, ow = (x.shape[2] + 2 * pad - 3) // stride + 1, (x.shape[3] + 2 * pad - 3) // stride + 1
    taps = [(slice(i, i + stride * oh, stride), slice(j, j + stride * ow, stride))
            for i in range(3) for j in range(3)]
    if mode == "max":
        return np.max([xp[:, :, r, c] for r, c in taps], axis=0)
    return sum(xp[:, :, r, c] for r, c in taps) / sum(ones[r, c] for r, c in taps)


def _block(rng):
    """(relax module, input, numpy reference) of the block."""
    from .. import relax
    from ..relax import op as R

    w1 = rng.standard_normal((24, 3, 3, 3)).astype("float32") * 0.3
    wd = rng.standard_normal((24, 1, 3, 3)).astype("float32") * 0.3
    w2 = rng.standard_normal((48, 6, 1, 1)).astype("float32") * 0.3
    data = rng.random((1, 3, 96, 96), dtype="float32")
    x = relax.Var("x", relax.TensorStructInfo(data.shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(R.nn.relu(bb.emit(R.nn.conv2d(x, relax.const(w1), strides=2,
                                                      padding=1))))
            h = bb.emit(R.nn.max_pool2d(h, 3, 2, 1))
            h = bb.emit(R.nn.conv2d(h, relax.const(wd), padding=1, groups=24))
            h = bb.emit(R.nn.relu(bb.emit(R.nn.conv2d(h, relax.const(w2), groups=4))))
            gv = bb.emit_output(R.nn.avg_pool2d(h, 3, 2, 1, count_include_pad=False))
        bb.emit_func_output(gv)
    ref = np.maximum(_conv(data, w1, 2, 1), 0)
    ref = _conv(_pool(ref, "max", 2, 1), wd, 1, 1, groups=24)
    ref = _pool(np.maximum(_conv(ref, w2, 1, 0, groups=4), 0), "avg", 2, 1)
    return bb.get(), data, ref


def step_cnn(out: str) -> None:
    """The block through relax.build on one thread, equal to numpy (rtol 1e-4, atol 1e-4)."""
    from .. import relax
    from ..backend.runtime.threads import num_threads

    banner("CNN kernels: in-place 3x3 windows (depthwise, pools), direct convs")
    mod, data, ref = _block(np.random.default_rng(0))
    fn = relax.VirtualMachine(relax.build(mod), relax.cpu())["main"]
    with num_threads(1):
        got = fn(data).numpy()
        best = float("inf")
        for _ in range(10):
            start = time.perf_counter()
            fn(data)
            best = min(best, time.perf_counter() - start)
    diff = float(np.abs(got - ref).max())
    if got.shape != ref.shape or not np.allclose(got, ref, rtol=1e-4, atol=1e-4):
        raise SystemExit(f"demo: the CNN block differs from numpy by up to {diff:.3g}")
    print(f"stem 3x3/2 -> max pool 3x3/2 -> depthwise 3x3 -> grouped 1x1 -> avg pool 3x3/2: "
          f"{data.shape} -> {got.shape}")
    print(f"max |msc - numpy float64| = {diff:.2e}; {best * 1e3:.2f} ms a call on 1 thread "
          "(best of 10)")
