"""The direct conv's tile stores that drop the wide columns themselves (no compaction pass)
and its vector phase split, against torch, on 1 and 2 threads. The stores are taken when the
wide output outgrows L2 (stems, VGG's first convs); the tests shrink that limit so small
shapes take them too, and check one real stem at its own size."""

import numpy as np
import pytest

from msc.backend.kernels import direct_conv, direct_conv_plan
from msc.backend.kernels.direct_conv import DirectConv2d
from msc.backend.runtime.threads import num_threads

torch = pytest.importorskip("torch")
TOL = {"rtol": 1e-4, "atol": 1e-4}


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _torch(x, w, b, stride, pad, dilation, groups, relu):
    top, left, bottom, right = pad
    xt = torch.nn.functional.pad(torch.from_numpy(x), (left, right, top, bottom))
    y = torch.nn.functional.conv2d(xt, torch.from_numpy(w), torch.from_numpy(b), stride=stride,
                                   dilation=dilation, groups=groups).numpy()
    return np.maximum(y, 0) if relu else y


def _run(n, c, h, w, o, k, stride, pad, dilation=1, groups=1, relu=True, threads=1):
    weight, bias, x = _rand(o, c // groups, k, k), _rand(o, seed=1), _rand(n, c, h, w, seed=2)
    attrs = {"strides": (stride, stride), "padding": pad, "dilation": (dilation, dilation)}
    kernel = DirectConv2d("nn.conv2d", weight, bias, relu, groups, attrs)
    ref = _torch(x, weight, bias, stride, pad, dilation, groups, relu)
    with num_threads(threads):
        out = kernel(x, np.full(ref.shape, np.nan, np.float32))
    return kernel, out, ref


CASES = [  # n, c, h, w, o, k, stride, (top, left, bottom, right), dilation, groups
    (1, 3, 40, 37, 16, 3, 2, (1, 1, 1, 1), 1, 1),   # stride 2: the vector phase split
    (1, 3, 45, 44, 8, 7, 2, (3, 3, 3, 3), 1, 1),    # a 7x7 stem, odd output width
    (2, 5, 20, 33, 9, 3, 1, (1, 1, 1, 1), 1, 1),    # O not a multiple of the tile, batch
    (1, 4, 12, 50, 24, 3, 1, (0, 2, 1, 0), 1, 1),   # uneven padding: 4 dropped columns
    (1, 6, 17, 40, 12, 3, 1, (2, 2, 2, 2), 2, 3),   # dilation and groups
    (1, 2, 9, 70, 8, 5, 3, (2, 2, 2, 2), 1, 1),     # stride 3: the scalar phase copy
    (1, 3, 30, 31, 16, 3, 2, (0, 0, 0, 0), 1, 1),   # SqueezeNet's stem geometry, no padding
    (1, 3, 20, 40, 16, 3, 1, (2, 2, 2, 2), 1, 1),   # stride 1, rows wider than the input's
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n, c, h, w, o, k, stride, pad, dilation, groups", CASES)
def test_fused_compaction_matches_torch(monkeypatch, n, c, h, w, o, k, stride, pad, dilation,
                                        groups, threads):
    monkeypatch.setattr(direct_conv, "_L2_BYTES", 256)  # every wide output "outgrows L2"
    monkeypatch.setattr(direct_conv, "_PARALLEL_MACS", 0)  # 2 threads split rows or units
    monkeypatch.setattr(direct_conv_plan, "_PARALLEL_PREP", 0)
    kernel, out, ref = _run(n, c, h, w, o, k, stride, pad, dilation, groups, threads=threads)
    plan = next(iter(kernel._plans.values()))
    wq, ow = plan.args[direct_conv.PLAN_FIELDS.index("Wq")], ref.shape[3]
    assert plan.args[direct_conv.PLAN_FIELDS.index("fuse")] == int(wq != ow and wq >= kernel.lanes)
    np.testing.assert_allclose(out, ref, **TOL)


def test_compaction_pass_stays_below_the_limit():
    kernel, out, ref = _run(1, 8, 14, 20, 16, 3, 1, (1, 1, 1, 1))
    plan = next(iter(kernel._plans.values()))
    assert plan.args[direct_conv.PLAN_FIELDS.index("fuse")] == 0  # 16 x 14 x 22 floats fit L2
    np.testing.assert_allclose(out, ref, **TOL)


def test_a_real_stem_takes_the_fused_stores(monkeypatch):
    """ShuffleNet's stem: 24 x 112 x 113 wide floats (1.2 MB) take the fused stores on a core
    with a 1 MiB L2 (Zen 4; the rule reads half of it). A 2 MiB L2 (Sapphire Rapids) holds
    them, and compacts after the conv instead: the threshold is the host's."""
    monkeypatch.setattr(direct_conv, "_L2_BYTES", 512 * 1024)
    kernel, out, ref = _run(1, 3, 224, 224, 24, 3, 2, (1, 1, 1, 1))
    plan = next(iter(kernel._plans.values()))
    assert plan.args[direct_conv.PLAN_FIELDS.index("fuse")] == 1 and plan.scratch[1] == 0
    np.testing.assert_allclose(out, ref, **TOL)
