"""Convs, depthwise convs and pools join the plan's native chains (runtime/native_run.py
KernelStep with a scratch of the register file): their outputs match torch's, and errors still
reach the caller as they did when the kernels were called from Python."""

import re

import numpy as np
import pytest

from msc import relax
from msc.backend.runtime import plan as plan_mod
from msc.backend.runtime.threads import num_threads
from msc.errors import RuntimeCallError, ShapeError
from msc.relax import op as R
from tests.helpers.relax_modules import one_function_module as _module
from tests.helpers.relax_modules import tensor as _tensor

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _one_thread():
    """Plans for one thread: every kernel of these sizes is then a chain step."""
    with num_threads(1):
        yield
F = torch.nn.functional
RNG = np.random.default_rng(11)
TOL = {"rtol": 1e-4, "atol": 1e-4}  # float32 sums of up to 576 products in another order


def _weight(*shape):
    return (RNG.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype("float32")


# (name, input shape, conv2d kwargs, weight shape): the kernel each lands on with the
# build's choices (direct conv, pixel tiles, window kernels)
CONVS = {
    "direct_3x3": ((1, 8, 16, 16), {"padding": [1, 1, 1, 1]}, (16, 8, 3, 3)),
    "direct_1x1": ((1, 16, 16, 16), {}, (8, 16, 1, 1)),
    "direct_stride2": ((2, 8, 32, 32), {"strides": [2, 2], "padding": [1, 1, 1, 1]},
                       (16, 8, 3, 3)),
    "pixel_stride2": ((2, 8, 16, 16), {"strides": [2, 2], "padding": [1, 1, 1, 1]},
                      (16, 8, 3, 3)),
    "pixel_3x3": ((1, 64, 8, 8), {"padding": [1, 1, 1, 1]}, (64, 64, 3, 3)),
    "depthwise_3x3": ((1, 16, 12, 12), {"padding": [1, 1, 1, 1], "groups": 16},
                      (16, 1, 3, 3)),
    "depthwise_5x5_s2": ((1, 16, 12, 12), {"padding": [2, 2, 2, 2], "strides": [2, 2],
                                          "groups": 16}, (16, 1, 5, 5)),
    "depthwise_7x7": ((1, 8, 10, 10), {"padding": [3, 3, 3, 3], "groups": 8}, (8, 1, 7, 7)),
}


def _torch_conv(x, w, kw):
    return F.conv2d(torch.from_numpy(x), torch.from_numpy(w),
                    stride=kw.get("strides", [1, 1]), padding=kw.get("padding", [0] * 4)[:2],
                    groups=kw.get("groups", 1)).numpy()


def _python_calls(plan) -> int:
    """Instructions the plan's run function hands to Python (not counting the kernel object
    a split-size step falls back to while several threads are allowed)."""
    return len(re.findall(r"regs\[\d+\] = F\d+\(", plan.runner.source))


def _run_both(mod, x):
    """(chained result, the plan, result with every kernel called from Python)."""
    ex = relax.build(mod)
    f = relax.VirtualMachine(ex)["main"]
    got = f(x).numpy()
    plan = plan_mod.make_plan(ex.programs["main"], {}, native=False)
    regs = plan.new_registers()
    regs[plan_mod.REGS], regs[plan_mod.ENV] = regs, {}
    regs[plan.params[0]] = x
    plan.runner.fn(regs)
    return got, f.entry({}).plan, regs[plan.result]


@pytest.mark.parametrize("name", sorted(CONVS))
def test_conv_relu_conv_runs_as_one_chain(name):
    shape, kw, wshape = CONVS[name]
    w1, w2 = _weight(*wshape), _weight(wshape[0], wshape[0], 1, 1)
    b = RNG.standard_normal(wshape[0]).astype("float32")
    x = relax.Var("x", _tensor(shape))

    def body(bb, x):
        h = bb.emit(R.nn.conv2d(x, relax.const(w1), **kw), "conv")
        h = bb.emit(R.nn.relu(bb.emit(R.add(h, relax.const(b.reshape(1, -1, 1, 1))))), "act")
        return bb.emit(R.nn.conv2d(h, relax.const(w2)), "mix")

    xv = RNG.standard_normal(shape).astype("float32")
    got, plan, python = _run_both(_module([x], body), xv)
    h = np.maximum(_torch_conv(xv, w1, kw) + b.reshape(1, -1, 1, 1), 0)
    np.testing.assert_allclose(got, _torch_conv(h, w2, {}), **TOL)
    np.testing.assert_allclose(got, python, **TOL)
    assert plan.stats["chains"] <= 2 and plan.stats["native_steps"] == 2
    assert _python_calls(plan) == 0  # no kernel object called from Python


@pytest.mark.parametrize("batch", [1, 3])
def test_nhwc_conv_on_the_gemm_path_joins_the_chain(batch):
    """NHWC data: patches and one packed GEMM (the path small NCHW planes take on hosts
    without pixel tiles), then a pool of the NCHW transpose."""
    w1, w2 = _weight(16, 8, 3, 3), _weight(8, 16, 1, 1)
    hwio1, hwio2 = (np.ascontiguousarray(w.transpose(2, 3, 1, 0)) for w in (w1, w2))
    x = relax.Var("x", _tensor((batch, 6, 6, 8)))
    nhwc = {"data_layout": "NHWC", "kernel_layout": "HWIO"}

    def body(bb, x):
        h = bb.emit(R.nn.relu(bb.emit(R.nn.conv2d(x, relax.const(hwio1), padding=[1] * 4,
                                                  **nhwc))))
        return bb.emit(R.nn.conv2d(h, relax.const(hwio2), **nhwc), "mix")

    xv = RNG.standard_normal((batch, 6, 6, 8)).astype("float32")
    got, plan, python = _run_both(_module([x], body), xv)
    t = torch.relu(F.conv2d(torch.from_numpy(xv.transpose(0, 3, 1, 2).copy()),
                            torch.from_numpy(w1), padding=1))
    want = F.conv2d(t, torch.from_numpy(w2)).permute(0, 2, 3, 1)
    np.testing.assert_allclose(got, want.numpy(), **TOL)
    np.testing.assert_allclose(got, python, **TOL)
    assert plan.stats["chains"] <= 2 and plan.stats["native_steps"] == 2
    kinds = {type(i[4].step.kernel).__name__ for i in plan.instructions
             if hasattr(i[4], "step")}
    assert kinds == {"_Conv2dNHWC"}


def test_residual_conv_and_pools_join_the_chain():
    """A ResNet shortcut fused into a 1x1 conv's store, then max and average pools."""
    w1, w2 = _weight(16, 8, 3, 3), _weight(16, 16, 1, 1)
    x = relax.Var("x", _tensor((1, 8, 16, 16)))

    def body(bb, x):
        h = bb.emit(R.nn.relu(bb.emit(R.nn.conv2d(x, relax.const(w1), padding=[1] * 4))))
        r = bb.emit(R.nn.relu(bb.emit(R.add(bb.emit(R.nn.conv2d(h, relax.const(w2))), h))))
        m = bb.emit(R.nn.max_pool2d(r, pool_size=[3, 3], strides=[2, 2], padding=[1] * 4))
        return bb.emit(R.nn.avg_pool2d(m, pool_size=[2, 2], strides=[2, 2]), "pooled")

    xv = RNG.standard_normal((1, 8, 16, 16)).astype("float32")
    got, plan, python = _run_both(_module([x], body), xv)
    t = torch.relu(F.conv2d(torch.from_numpy(xv), torch.from_numpy(w1), padding=1))
    t = torch.relu(F.conv2d(t, torch.from_numpy(w2)) + t)
    want = F.avg_pool2d(F.max_pool2d(t, 3, 2, 1), 2, 2).numpy()
    np.testing.assert_allclose(got, want, **TOL)
    np.testing.assert_allclose(got, python, **TOL)
    assert plan.stats["chains"] == 1 and plan.stats["native_steps"] >= 4
    assert _python_calls(plan) == 0


def test_register_files_have_their_own_scratch():
    """Two register files of one plan (two concurrent callers) never share a scratch."""
    x = relax.Var("x", _tensor((1, 8, 16, 16)))
    w = _weight(16, 8, 3, 3)
    mod = _module([x], lambda bb, x: bb.emit(R.nn.conv2d(x, relax.const(w), padding=[1] * 4)))
    plan = plan_mod.make_plan(relax.build(mod).programs["main"], {})
    slot, nbytes = plan.runner.scratch
    assert slot is not None and nbytes > 0
    a, b = plan.new_registers(), plan.new_registers()
    ta, tb = a[plan_mod.TABLE][0], b[plan_mod.TABLE][0]
    assert ta[slot] != tb[slot] and ta[slot] % 64 == 0 and tb[slot] % 64 == 0


def test_bad_shape_still_names_the_parameter():
    x = relax.Var("x", _tensor((1, 8, 16, 16)))
    w = _weight(16, 8, 3, 3)
    mod = _module([x], lambda bb, x: bb.emit(R.nn.conv2d(x, relax.const(w), padding=[1] * 4)))
    f = relax.VirtualMachine(relax.build(mod))["main"]
    with pytest.raises(ShapeError, match="'x'"):
        f(RNG.standard_normal((1, 4, 16, 16)).astype("float32"))


def test_failing_step_in_a_conv_chain_reaches_the_caller():
    """An out-of-range index in a compiled kernel after a conv of the same chain: the
    chain's status names the failing op, as for chains of compiled kernels alone."""
    w = _weight(4, 4, 3, 3)
    x = relax.Var("x", _tensor((1, 4, 6, 6)))
    idx = relax.Var("idx", _tensor((2,), "int64"))

    def body(bb, x, idx):
        h = bb.emit(R.nn.relu(bb.emit(R.nn.conv2d(x, relax.const(w), padding=[1] * 4))))
        return bb.emit(R.take(h, idx, axis=1), "picked")

    ex = relax.build(_module([x, idx], body))
    f = relax.VirtualMachine(ex)["main"]
    xv = RNG.standard_normal((1, 4, 6, 6)).astype("float32")
    got = f(xv, np.array([0, 3], np.int64)).numpy()
    want = torch.relu(F.conv2d(torch.from_numpy(xv), torch.from_numpy(w), padding=1))
    np.testing.assert_allclose(got, want[:, [0, 3]].numpy(), **TOL)
    with pytest.raises(RuntimeCallError, match="take|out of range"):
        f(xv, np.array([0, 9], np.int64))


def test_a_conv_big_enough_to_split_runs_split_on_two_threads(monkeypatch):
    """One plan serves both thread counts: on one thread the chain runs the big conv, on two
    the chain's parallel step splits it (its task lists on the native pool, from inside the
    chain: the conv object is never called), with the same numbers."""
    from msc.backend.kernels import direct_conv

    w = _weight(32, 32, 3, 3)
    x = relax.Var("x", _tensor((1, 32, 32, 32)))
    mod = _module([x], lambda bb, x: bb.emit(R.nn.relu(bb.emit(
        R.nn.conv2d(x, relax.const(w), padding=[1] * 4)))))
    f = relax.VirtualMachine(relax.build(mod))["main"]
    xv = RNG.standard_normal((1, 32, 32, 32)).astype("float32")
    want = torch.relu(F.conv2d(torch.from_numpy(xv), torch.from_numpy(w), padding=1)).numpy()
    calls = []
    entry = direct_conv.DirectConv2d.__call__
    monkeypatch.setattr(direct_conv.DirectConv2d, "__call__",
                        lambda self, *a: calls.append(1) or entry(self, *a))
    one = f(xv).numpy()  # one thread: the chain
    np.testing.assert_allclose(one, want, **TOL)
    plan = f.entry({}).plan
    assert "SPLIT()" not in plan.runner.source and plan.stats["parallel_steps"] == 1
    with num_threads(2):
        np.testing.assert_array_equal(f(xv).numpy(), one)
    assert calls == []


def test_hard_swish_expression_and_global_mean_join_the_chain():
    """MobileNetV3's blocks: a conv, hard-swish spelled out (one expression kernel), the
    squeeze-excite's global mean: all chain steps, numbers as torch's."""
    w = _weight(16, 8, 3, 3)
    x = relax.Var("x", _tensor((1, 8, 16, 16)))

    def body(bb, x):
        h = bb.emit(R.nn.conv2d(x, relax.const(w), padding=[1] * 4))
        gate = bb.emit(R.clip(bb.emit(R.add(h, relax.const(np.float32(3)))), 0.0, 6.0))
        act = bb.emit(R.multiply(h, bb.emit(R.divide(gate, relax.const(np.float32(6))))))
        return bb.emit(R.mean(act, axis=[2, 3], keepdims=True), "pooled")

    xv = RNG.standard_normal((1, 8, 16, 16)).astype("float32")
    got, plan, python = _run_both(_module([x], body), xv)
    t = F.hardswish(F.conv2d(torch.from_numpy(xv), torch.from_numpy(w), padding=1))
    np.testing.assert_allclose(got, t.mean(dim=(2, 3), keepdim=True).numpy(), **TOL)
    np.testing.assert_allclose(got, python, **TOL)
    kinds = [type(i[4].step.kernel).__name__ for i in plan.instructions if hasattr(i[4], "step")]
    assert kinds == ["DirectConv2d", "ExprKernel", "MeanKernel"] and plan.stats["chains"] == 1
    assert _python_calls(plan) == 0


@pytest.mark.parametrize("return_view", [False, True])
def test_free_views_ride_along_the_chain(return_view):
    """conv -> reshape -> dense -> reshape of the parameter's view: the reshapes (free views,
    their address their input's) no longer cut the chain, and their values are still right
    where Python reads them after it (a numpy op, the results)."""
    w = _weight(4, 3, 3, 3)
    fc = _weight(8, 4 * 6 * 6)
    x = relax.Var("x", _tensor((1, 3, 6, 6)))

    def body(bb, x):
        flat_x = bb.emit(R.reshape(x, (1, 108)), "flat_x")  # a view of the parameter
        h = bb.emit(R.nn.relu(bb.emit(R.nn.conv2d(x, relax.const(w), padding=[1] * 4))))
        flat = bb.emit(R.reshape(h, (1, 144)), "flat")
        y = bb.emit(R.matmul(flat, relax.const(fc.T.copy())), "fc")
        side = bb.emit(R.cumsum(flat_x, axis=1), "side")  # numpy reads the view afterwards
        return bb.emit(relax.Tuple([y, flat, side] if return_view else [y, side]))

    ex = relax.build(_module([x], body))
    f = relax.VirtualMachine(ex)["main"]
    xv = RNG.standard_normal((1, 3, 6, 6)).astype("float32")
    got = [g.numpy() for g in f(xv)]
    h = torch.relu(F.conv2d(torch.from_numpy(xv), torch.from_numpy(w), padding=1)).numpy()
    flat = h.reshape(1, 144)
    want = [flat @ fc.T, flat] if return_view else [flat @ fc.T]
    want.append(np.cumsum(xv.reshape(1, 108), axis=1))
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, **TOL)
    plan = f.entry({}).plan
    assert plan.stats["chains"] == 1 and plan.stats["native_steps"] >= 2
    got2 = [g.numpy() for g in f(xv * 2)]  # a second call: register files reused
    np.testing.assert_allclose(got2[0], (np.maximum(2 * h, 0).reshape(1, 144)) @ fc.T, **TOL)


def test_a_lone_relu_joins_the_chain():
    """A relu no producer can fuse (here on the parameter) is a chain step too."""
    w = _weight(8, 4, 1, 1)
    x = relax.Var("x", _tensor((1, 4, 8, 8)))
    mod = _module([x], lambda bb, x: bb.emit(R.nn.conv2d(bb.emit(R.nn.relu(x)),
                                                         relax.const(w))))
    xv = RNG.standard_normal((1, 4, 8, 8)).astype("float32")
    got, plan, python = _run_both(mod, xv)
    want = F.conv2d(torch.relu(torch.from_numpy(xv)), torch.from_numpy(w)).numpy()
    np.testing.assert_allclose(got, want, **TOL)
    np.testing.assert_allclose(got, python, **TOL)
    assert plan.stats["chains"] == 1 and _python_calls(plan) == 0


@pytest.mark.parametrize("heads", [1, 2])
def test_attention_after_a_conv_shares_the_scratch(heads):
    """The fused attention kernel is a chain step too; its scratch is the register file's,
    which the conv before it fills with its padded input: the part the kernel reads as zeros
    is cleared by the step, so the numbers stay torch's on every call."""
    w = _weight(8, 8, 3, 3)
    x = relax.Var("x", _tensor((1, 8, 16, 16)))
    qkv = [relax.Var(n, _tensor((1, 12, heads, 16))) for n in "qkv"]

    def body(bb, x, q, k, v):
        c = bb.emit(R.nn.conv2d(x, relax.const(w), padding=[1] * 4), "conv")
        return bb.emit(relax.Tuple([c, bb.emit(R.nn.attention(q, k, v, scale=0.25))]))

    f = relax.VirtualMachine(relax.build(_module([x, *qkv], body)))["main"]
    for seed in range(2):
        rng = np.random.default_rng(seed)
        xv = rng.standard_normal((1, 8, 16, 16)).astype("float32") * 100
        q, k, v = (rng.standard_normal((1, 12, heads, 16)).astype("float32") for _ in "qkv")
        conv, att = (r.numpy() for r in f(xv, q, k, v))
        t = [torch.from_numpy(a).transpose(1, 2) for a in (q, k, v)]
        want = F.scaled_dot_product_attention(*t, scale=0.25).transpose(1, 2).numpy()
        np.testing.assert_allclose(att, want, **TOL)
        np.testing.assert_allclose(conv, _torch_conv(xv, w, {"padding": [1] * 4}),
                                   rtol=1e-4, atol=1e-2)  # inputs scaled by 100
    plan = f.entry({}).plan
    kinds = [type(i[4].step.kernel).__name__ for i in plan.instructions if hasattr(i[4], "step")]
    assert kinds == ["DirectConv2d", "AttentionKernel"]  # both native steps of the plan
