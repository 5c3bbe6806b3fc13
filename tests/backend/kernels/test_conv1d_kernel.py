"""1-D convs run on the 2-D conv kernels (kernels/conv1d.py: a plane one row high): Whisper's
and wav2vec2's front-end convs, grouped and depthwise ones, NWC data; each matches torch's
conv1d at 1 and 2 threads, with a fused bias and relu, also on the AVX2-only path."""

import textwrap

import numpy as np
import pytest

from msc import relax
from msc.backend.kernels.base import Site
from msc.backend.kernels.conv1d import as_conv2d
from msc.backend.runtime.program import Value
from msc.backend.runtime.threads import num_threads
from msc.relax import op as R
from tests.helpers.isa_child import ROOT, capped_report

torch = pytest.importorskip("torch")

TOL = {"rtol": 1e-4, "atol": 1e-4}

CASES = [  # x [N, C, W], weight [O, C / groups, K], strides, padding, dilation, groups
    ((1, 16, 32), (32, 16, 3), 1, 1, 1, 1),       # Whisper's conv1
    ((1, 32, 32), (32, 32, 3), 2, 1, 1, 1),       # Whisper's conv2 (stride 2)
    ((1, 1, 400), (16, 1, 10), 5, 0, 1, 1),       # wav2vec2's first feature conv
    ((1, 16, 79), (16, 16, 3), 2, 0, 1, 1),
    ((1, 32, 39), (32, 8, 8), 1, 4, 1, 4),        # wav2vec2's grouped positional conv
    ((2, 24, 50), (24, 1, 5), 1, 2, 1, 24),       # depthwise, two images
    ((1, 8, 300), (12, 8, 3), 1, (2, 0), 2, 1),   # dilated, asymmetric padding, long row
]


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _torch_conv1d(x, w, b, strides, padding, dilation, groups, relu):
    left, right = (padding, padding) if isinstance(padding, int) else padding
    x = np.pad(x, ((0, 0), (0, 0), (left, right)))
    out = torch.conv1d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                       stride=strides, dilation=dilation, groups=groups).numpy()
    return np.maximum(out, 0) if relu else out


def _build(xs, w, b, strides, padding, dilation, groups, relu, layout="NCW"):
    x = relax.Var("x", relax.TensorStructInfo(xs, "float32"))
    bias = b.reshape(1, -1, 1) if layout == "NCW" else b
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(R.nn.conv1d(x, relax.const(w), strides=strides, padding=padding,
                                    dilation=dilation, groups=groups, data_layout=layout))
            y = bb.emit(R.add(y, relax.const(bias)))
            out = bb.emit_output(R.nn.relu(y) if relu else y)
        bb.emit_func_output(out)
    return relax.build(bb.get())


def _run_both(ex, xv):
    f = relax.VirtualMachine(ex, relax.cpu())["main"]
    with num_threads(1):  # a step of the plan's native chain
        one = f(xv).numpy().copy()
    with num_threads(2):  # the kernel object, split where the conv is large enough
        two = f(xv).numpy().copy()
    return one, two


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("xs, ws, strides, padding, dilation, groups", CASES)
def test_conv1d_runs_native_and_matches_torch(xs, ws, strides, padding, dilation, groups,
                                              relu):
    w, b, xv = _rand(*ws, seed=1), _rand(ws[0], seed=2), _rand(*xs, seed=3)
    ex = _build(xs, w, b, strides, padding, dilation, groups, relu)
    assert ex.stats["ops"]["nn.conv1d"] == {"native": 1}
    assert "add" not in ex.stats["ops"]  # the bias is the kernel's epilogue
    one, two = _run_both(ex, xv)
    want = _torch_conv1d(xv, w, b, strides, padding, dilation, groups, relu)
    np.testing.assert_allclose(one, want, **TOL)
    np.testing.assert_allclose(two, want, **TOL)


def test_nwc_data_runs_native_and_matches_torch():
    w, b, xv = _rand(20, 12, 3, seed=1), _rand(20, seed=2), _rand(2, 17, 12, seed=3)
    ex = _build(xv.shape, w, b, 1, 1, 1, 1, True, layout="NWC")
    assert ex.stats["ops"]["nn.conv1d"] == {"native": 1}
    one, two = _run_both(ex, xv)
    want = _torch_conv1d(xv.transpose(0, 2, 1).copy(), w, b, 1, 1, 1, 1, True)
    np.testing.assert_allclose(one, want.transpose(0, 2, 1), **TOL)
    np.testing.assert_allclose(two, want.transpose(0, 2, 1), **TOL)


def test_residual_add_stays_outside_the_kernel_and_matches_torch():
    """The 2-D kernels' residual epilogue adds a 4-D tensor: a 1-D conv keeps the add."""
    w, b, xv = _rand(16, 16, 3, seed=1), _rand(16, seed=2), _rand(1, 16, 40, seed=3)
    x = relax.Var("x", relax.TensorStructInfo(xv.shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(R.nn.conv1d(x, relax.const(w), padding=1))
            y = bb.emit(R.add(y, relax.const(b.reshape(1, -1, 1))))
            out = bb.emit_output(R.add(y, x))
        bb.emit_func_output(out)
    ex = relax.build(bb.get())
    assert ex.stats["ops"]["nn.conv1d"] == {"native": 1} and "add" in ex.stats["ops"]
    one, two = _run_both(ex, xv)
    want = _torch_conv1d(xv, w, b, 1, 1, 1, 1, False) + xv
    np.testing.assert_allclose(one, want, **TOL)
    np.testing.assert_allclose(two, want, **TOL)


def test_the_2d_site_has_a_unit_row():
    x = relax.Var("x", relax.TensorStructInfo((1, 4, 9), "float32"))
    w = _rand(6, 2, 3)
    call = R.nn.conv1d(x, relax.const(w), strides=2, padding=(1, 0), dilation=1, groups=2)
    weight = Value(1, relax.TensorStructInfo(w.shape, "float32"), const=w)
    site = Site("nn.conv1d", call.attrs, [Value(0, x.struct_info), weight],
                relax.TensorStructInfo((1, 6, 4), "float32"))
    flat = as_conv2d(site)
    assert flat.op == "nn.conv2d" and flat.attrs["data_layout"] == "NCHW"
    assert flat.attrs["strides"] == (1, 2) and flat.attrs["padding"] == (0, 1, 0, 0)
    assert [int(v) for v in flat.out.values] == [1, 6, 1, 4]
    assert flat.const(1).shape == (6, 2, 1, 3)


# A child process: MSC_CPU_ISA is read once per process; a fresh kernel cache compiles here.
_CHILD = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {root!r})
    import numpy as np
    from tests.backend.kernels import test_conv1d_kernel as t
    from msc.backend.llvm.jit import vector_lanes
    errors = {{}}
    for i, (xs, ws, s, p, d, g) in enumerate(t.CASES):
        w, b, xv = t._rand(*ws, seed=1), t._rand(ws[0], seed=2), t._rand(*xs, seed=3)
        ex = t._build(xs, w, b, s, p, d, g, True)
        want = t._torch_conv1d(xv, w, b, s, p, d, g, True)
        scale = float(np.abs(want).max()) or 1.0
        errors[i] = max(float(np.abs(got - want).max()) / scale for got in t._run_both(ex, xv))
    print(json.dumps({{"lanes": vector_lanes(), "errors": errors}}))
""")


def test_avx2_only_host_matches_torch(tmp_path):
    report = capped_report(_CHILD.format(root=ROOT), "avx2", tmp_path)
    assert report["lanes"] == 8
    assert len(report["errors"]) == len(CASES)
    assert all(err < 1e-5 for err in report["errors"].values()), report["errors"]


def test_msc_conv1d_bias_runs_native_and_matches_torch():
    from msc.relax.op.registry import make_call

    w, b, xv = _rand(24, 16, 3, seed=1), _rand(24, seed=2), _rand(1, 16, 33, seed=3)
    x = relax.Var("x", relax.TensorStructInfo(xv.shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(make_call("msc.conv1d_bias", x, relax.const(w),
                                           relax.const(b), strides=2, padding=1))
        bb.emit_func_output(out)
    ex = relax.build(bb.get())
    assert ex.stats["ops"]["msc.conv1d_bias"] == {"native": 1}
    one, two = _run_both(ex, xv)
    want = _torch_conv1d(xv, w, b, 2, 1, 1, 1, False)
    np.testing.assert_allclose(one, want, **TOL)
    np.testing.assert_allclose(two, want, **TOL)
