"""``msc demo`` step: 3x3 convs on 14x14 and 7x7 planes (Inception's and ResNet's late stages)
through relax.build, which runs them as pixel tiles (kernels/pixel_conv.py: 6 pixels x 64
output channels a register tile, no im2col) on AVX-512 hosts, checked against a float64 numpy
conv computed here, and timed against the direct conv on the same shape."""

from __future__ import annotations

import time

import numpy as np

from .shared import banner


def _conv3x3(x, w, b):
    """float64 NCHW 3x3 conv, padding 1, + bias, relu (numpy only)."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    h, wd = x.shape[2:]
    out = sum(np.einsum("nchw,oc->nohw", xp[:, :, i:i + h, j:j + wd], w[:, :, i, j])
              for i in range(3) for j in range(3))
    return np.maximum(out + b[None, :, None, None], 0)


def _best(fn, *args) -> float:
    best = float("inf")
    for _ in range(10):
        start = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - start)
    return best


def step_pixel_conv(out: str) -> None:
    """Two 3x3 convs (+ bias, relu) equal to numpy (rtol 1e-4, atol 1e-4) on one thread."""
    from .. import relax
    from ..backend.kernels.direct_conv import DirectConv2d
    from ..backend.kernels.pixel_conv import pixel_conv_available
    from ..backend.runtime.threads import num_threads
    from ..relax import op as R

    banner("Pixel-tile convs: 14x14 and 7x7 planes without wasted multiplies")
    rng = np.random.default_rng(0)
    for c, o, side in ((64, 96, 14), (96, 128, 7)):
        w = (rng.standard_normal((o, c, 3, 3)) * 0.1).astype("float32")
        b = rng.standard_normal(o).astype("float32")
        data = rng.random((1, c, side, side), dtype="float32")
        x = relax.Var("x", relax.TensorStructInfo(data.shape, "float32"))
        bb = relax.BlockBuilder()
        with bb.function("main", [x]):
            with bb.dataflow():
                y = bb.emit(R.nn.conv2d(x, relax.const(w), padding=1))
                y = bb.emit(R.add(y, relax.const(b.reshape(1, -1, 1, 1))))
                gv = bb.emit_output(R.nn.relu(y))
            bb.emit_func_output(gv)
        fn = relax.VirtualMachine(relax.build(bb.get()), relax.cpu())["main"]
        direct = DirectConv2d("nn.conv2d", w, b, True, 1, {
            "strides": (1, 1), "padding": (1, 1, 1, 1), "dilation": (1, 1)})
        spare = np.empty((1, o, side, side), np.float32)
        with num_threads(1):
            got = fn(data).numpy()
            ours, theirs = _best(fn, data), _best(direct, data, spare)
        ref = _conv3x3(data, w, b)
        diff = float(np.abs(got - ref).max())
        if not np.allclose(got, ref, rtol=1e-4, atol=1e-4):
            raise SystemExit(f"demo: the {side}x{side} conv differs from numpy by {diff:.3g}")
        print(f"3x3 conv {c} -> {o} channels on {side}x{side}: max |msc - numpy| = {diff:.1e}; "
              f"{ours * 1e6:.0f} us a call (direct conv kernel alone: {theirs * 1e6:.0f} us)")
    print("pixel tiles " + ("on (AVX-512 host)" if pixel_conv_available()
                            else "off: this host lacks AVX-512, the GEMM / direct paths ran"))
