"""Batch-1 float convs split across threads from inside the native chain (their split forms,
runtime/chain_split.py): the direct conv's pad pass and output parts, the pixel-tile conv's
tiles and the GEMM path's blocks (their transposes and patches on the calling thread). Before,
each such conv was a chain of its own, split by a Python call of its kernel object. With every
split forced (``MSC_SPLIT=always``) each conv is a parallel step, the kernel object is never
called, and the outputs are the same bytes at 1 and 2 threads and match torch; the GEMM's
blocks divide its rows too when its panels do not divide among the threads."""

import collections

import numpy as np
import pytest

from msc import relax
from msc.backend.kernels import gemm
from msc.backend.runtime import split_cost
from msc.backend.runtime.threads import num_threads
from msc.relax import op as R
from tests.helpers.relax_modules import one_function_module, tensor

torch = pytest.importorskip("torch")
F = torch.nn.functional
RNG = np.random.default_rng(5)
TOL = {"rtol": 1e-4, "atol": 1e-4}  # float32 sums of up to 1152 products in another order


def _weight(*shape):
    return (RNG.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype("float32")


# (input shape, conv2d kwargs, weight OIHW): a padded 3x3 (pad pass), 1x1s (read as is),
# a stride-2 conv, squeezenet's 13x13 expand (the GEMM path or pixel tiles, by the host),
# a 64-channel 3x3 (pixel tiles where the host has them)
CONVS = [((1, 8, 20, 20), {"padding": [1] * 4}, (16, 8, 3, 3)),
         ((1, 16, 20, 20), {}, (24, 16, 1, 1)),
         ((1, 128, 27, 27), {}, (32, 128, 1, 1)),  # squeezenet's squeeze: a band a thread
         ((1, 8, 33, 33), {"strides": [2, 2], "padding": [1] * 4}, (16, 8, 3, 3)),
         ((1, 48, 13, 13), {"padding": [1] * 4}, (192, 48, 3, 3)),
         ((1, 64, 8, 8), {"padding": [1] * 4}, (64, 64, 3, 3)),
         ((1, 128, 28, 28), {"padding": [1] * 4}, (128, 128, 3, 3))]  # resnet50 (pad split)


@pytest.fixture
def forced(monkeypatch):
    monkeypatch.setattr(split_cost, "_costs", {})
    monkeypatch.setenv(split_cost.SPLIT_ENV, "always")


def _torch_conv(x, w, kw, layout="NCHW"):
    if layout == "NHWC":
        x = x.transpose(0, 3, 1, 2).copy()
    y = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), stride=kw.get("strides", [1, 1]),
                 padding=kw.get("padding", [0] * 4)[:2]).numpy()
    return np.maximum(y, 0).transpose(0, 2, 3, 1) if layout == "NHWC" else np.maximum(y, 0)


def _check(mod, x, want, monkeypatch) -> collections.Counter:
    """Runs at 1 and 2 threads: the same bytes, near ``want``, no kernel object called; the
    kernel classes of the plan's parallel steps."""
    ex = relax.build(mod)
    plan = ex.plan("main", (), {})
    steps = [i[4].step for i in plan.instructions if hasattr(i[4], "step")]
    assert steps and all(s.parallel is not None for s in steps)
    assert "SPLIT()" not in plan.runner.source  # no chain of its own for the kernel object
    f = relax.VirtualMachine(ex)["main"]
    for step in steps:
        monkeypatch.setattr(type(step.kernel), "__call__", _never)
    runs = []
    for threads in (1, 2, 1, 2):
        with num_threads(threads):
            runs.append(f(x).numpy())
    for out in runs:
        np.testing.assert_array_equal(out, runs[0])
    np.testing.assert_allclose(runs[0], want, **TOL)
    return collections.Counter(type(s.kernel).__name__ for s in steps)


def _never(self, *args):
    raise AssertionError("the kernel object was called: the chain should split the conv")


@pytest.mark.parametrize("case", range(len(CONVS)))
def test_batch1_conv_splits_inside_the_chain(forced, monkeypatch, case):
    shape, kw, wshape = CONVS[case]
    w = _weight(*wshape)
    x = relax.Var("x", tensor(shape))
    mod = one_function_module([x], lambda bb, x: bb.emit(R.nn.relu(bb.emit(
        R.nn.conv2d(x, relax.const(w), **kw)))))
    xv = RNG.standard_normal(shape).astype("float32")
    kinds = _check(mod, xv, _torch_conv(xv, w, kw), monkeypatch)
    assert set(kinds) <= {"DirectConv2d", "PixelConv2d", "_Conv2dNHWC"}


def test_nhwc_gemm_path_conv_splits_inside_the_chain(forced, monkeypatch):
    """NHWC data takes the GEMM path on every host: patches, then the GEMM's blocks."""
    w = _weight(48, 24, 3, 3)
    hwio = np.ascontiguousarray(w.transpose(2, 3, 1, 0))
    x = relax.Var("x", tensor((1, 13, 13, 24)))
    mod = one_function_module([x], lambda bb, x: bb.emit(R.nn.relu(bb.emit(R.nn.conv2d(
        x, relax.const(hwio), padding=[1] * 4, data_layout="NHWC", kernel_layout="HWIO")))))
    xv = RNG.standard_normal((1, 13, 13, 24)).astype("float32")
    kinds = _check(mod, xv, _torch_conv(xv, w, {"padding": [1] * 4}, "NHWC"), monkeypatch)
    assert kinds == {"_Conv2dNHWC": 1}


def test_a_batch_keeps_its_images_as_the_parts(forced):
    """At batch 2 the parts are the images (native_parts), not one image's task lists."""
    w = _weight(16, 8, 3, 3)
    x = relax.Var("x", tensor((2, 8, 12, 12)))
    mod = one_function_module([x], lambda bb, x: bb.emit(R.nn.conv2d(
        x, relax.const(w), padding=[1] * 4)))
    plan = relax.build(mod).plan("main", (), {})
    (step,) = [i[4].step for i in plan.instructions if hasattr(i[4], "step")]
    assert step.split_form is None and step.parallel is not None


@pytest.mark.parametrize("m, n, nr, threads", [(169, 192, 64, 2), (169, 320, 64, 2),
                                               (169, 256, 64, 2), (50, 96, 32, 3),
                                               (5, 192, 64, 2)])
def test_gemm_blocks_cover_c_once_and_even_out(m, n, nr, threads):
    """The blocks tile C exactly; panels that do not divide among the threads are cut in row
    halves too (where there are two row tiles), so the block count does divide."""
    found = gemm.blocks(m, n, nr, threads)
    cover = np.zeros((m, n), int)
    for r0, r1, j0, j1 in found:
        assert r0 % gemm.MR == 0 and j0 % nr == 0
        cover[r0:r1, j0:j1] += 1
    assert (cover == 1).all()
    panels, tiles = -(-n // nr), -(-m // gemm.MR)
    if panels < 2 * threads and tiles > 1:
        assert len(found) % threads == 0



def test_each_launch_of_a_split_must_repay_its_round_trip(monkeypatch):
    """A split form of several task lists (a batch-1 conv: pad pass, parts, transpose) costs
    a pool round trip per list: the step's one-thread time shared among the lists must pay
    each one. Time that pays for one list splits as one list, not as three (small batch-1
    convs were slower at two threads than at one)."""
    from msc.backend.runtime import chain_split
    from msc.backend.runtime.threads import NativeTasks

    monkeypatch.delenv(split_cost.SPLIT_ENV, raising=False)
    monkeypatch.setattr(chain_split, "cpu_threads", lambda: 2)
    round_trip = split_cost.host_costs()["dispatch_s"]
    # saved at 2 threads: half the time; the bar: MARGIN round trips
    seconds = 2 * split_cost.MARGIN * round_trip * 1.5
    lists = [(NativeTasks(4), ()) for _ in range(3)]
    assert chain_split._formed(chain_split.Launches(tuple(lists), 0, seconds), 2, 4,
                               True) is False
    assert chain_split._formed(chain_split.Launches(tuple(lists), 0, 3 * seconds), 2, 4,
                               True) is not False
