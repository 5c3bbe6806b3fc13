"""Hand-written kernels with a native signature run inside the plan's native chains (no
Python between them), and the call's fast argument check of plain arrays."""

import numpy as np
import pytest

from msc import relax
from msc.errors import ShapeError
from msc.relax import op as R
from tests.helpers.relax_modules import one_function_module as _module
from tests.helpers.relax_modules import tensor as _tensor

RNG = np.random.default_rng(3)
SHAPE = (4, 8)
CONSTS = [RNG.standard_normal(SHAPE).astype("float32") for _ in range(4)]
CHANNEL = RNG.standard_normal((1, 8)).astype("float32")  # per-channel: the affine kernel


def _elementwise_module():
    x = relax.Var("x", _tensor(SHAPE))

    def body(bb, x):
        h = x
        for i, c in enumerate(CONSTS):
            op = (R.add, R.multiply)[i % 2]
            h = bb.emit(op(h, relax.const(c)), f"step{i}")
        return bb.emit(R.multiply(h, relax.const(CHANNEL)), "scaled")
    return _module([x], body)


def _numpy(x):
    for i, c in enumerate(CONSTS):
        x = x + c if i % 2 == 0 else x * c
    return x * CHANNEL


def test_kernel_objects_run_in_one_native_chain():
    ex = relax.build(_elementwise_module())
    assert ex.stats["kernels"]["native"] == 5  # the hand-written elementwise kernels
    f = relax.VirtualMachine(ex)["main"]
    x = RNG.standard_normal(SHAPE).astype("float32")
    np.testing.assert_allclose(f(x).numpy(), _numpy(x), rtol=1e-6, atol=1e-6)
    plan = f.entry({}).plan
    assert plan.stats["native_steps"] == 5 and plan.stats["chains"] == 1
    assert "F0(" not in plan.runner.source  # no kernel object called from Python
    report = relax.VirtualMachine(ex).profile(x, number=2)  # one by one, still native
    assert sorted(r.joint for r in report.rows) == sorted(
        [f"step{i}" for i in range(4)] + ["scaled"])


def test_plain_python_entries_agree():
    """native=False keeps the kernel objects' own checked __call__: same numbers."""
    from msc.backend.runtime import plan as plan_mod

    ex = relax.build(_elementwise_module())
    x = RNG.standard_normal(SHAPE).astype("float32")
    plan = plan_mod.make_plan(ex.programs["main"], {}, native=False)
    assert plan.stats["native_steps"] == 0
    regs = plan.new_registers()
    regs[plan_mod.REGS], regs[plan_mod.ENV] = regs, {}
    regs[plan.params[0]] = x
    plan.runner.fn(regs)
    np.testing.assert_allclose(regs[plan.result], _numpy(x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("make", [
    lambda x: np.asfortranarray(x),               # strided: copied by the slow path
    lambda x: x.astype(np.float64),               # wrong dtype: refused, named
    lambda x: x[:, :4].copy(),                    # wrong shape: refused, named
])
def test_arrays_the_fast_check_does_not_take(make):
    f = relax.VirtualMachine(relax.build(_elementwise_module()))["main"]
    x = RNG.standard_normal(SHAPE).astype("float32")
    value = make(x)
    if value.dtype == np.float32 and value.shape == SHAPE:
        np.testing.assert_allclose(f(value).numpy(), _numpy(x), rtol=1e-6, atol=1e-6)
    else:
        with pytest.raises(ShapeError, match="'x'"):
            f(value)


@pytest.mark.parametrize("shape, axes", [((2, 3, 4), (1, 0, 2)),
                                         ((1, 8, 4, 16), (0, 2, 1, 3))])  # attention's heads
def test_permute_kernel_runs_natively(shape, axes):
    x = relax.Var("x", _tensor(shape))
    mod = _module([x], lambda bb, x: bb.emit(R.exp(R.permute_dims(R.exp(x), axes))))
    ex = relax.build(mod)
    assert ex.stats["ops"]["permute_dims"] == {"native": 1}  # the kernel object, not TIR
    f = relax.VirtualMachine(ex)["main"]
    xv = RNG.standard_normal(shape).astype("float32")
    np.testing.assert_allclose(f(xv).numpy(), np.exp(np.exp(xv).transpose(axes)), rtol=1e-5)
    plan = f.entry({}).plan
    assert plan.stats["native_steps"] == 3 and plan.stats["chains"] == 1


@pytest.mark.parametrize("residual", [False, True])
def test_dense_and_layer_norm_join_the_chain(residual):
    """A linear (packed weight, bias, relu) and a layer norm (gamma, beta, a float eps) are
    chain steps through task_wrap.ChainEntry: no Python between them, numbers as torch's."""
    torch = pytest.importorskip("torch")
    w = RNG.standard_normal((8, 16)).astype("float32")  # [out, in]
    b, g, beta = (RNG.standard_normal(8).astype("float32") for _ in range(3))
    res = RNG.standard_normal((5, 8)).astype("float32")
    x = relax.Var("x", _tensor((5, 16)))

    def body(bb, x):
        h = bb.emit(R.nn.relu(bb.emit(R.add(bb.emit(R.matmul(x, relax.const(w.T.copy()))),
                                            relax.const(b)))), "dense")
        h = bb.emit(R.add(h, relax.const(res)), "res") if residual else h
        return bb.emit(R.nn.layer_norm(h, relax.const(g), relax.const(beta), axes=[-1],
                                       epsilon=0.25), "norm")

    ex = relax.build(_module([x], body))
    f = relax.VirtualMachine(ex)["main"]
    xv = RNG.standard_normal((5, 16)).astype("float32")
    h = torch.relu(torch.from_numpy(xv) @ torch.from_numpy(w).T + torch.from_numpy(b))
    if residual:
        h = h + torch.from_numpy(res)
    want = torch.nn.functional.layer_norm(h, (8,), torch.from_numpy(g), torch.from_numpy(beta),
                                          eps=0.25).numpy()
    np.testing.assert_allclose(f(xv).numpy(), want, rtol=1e-5, atol=1e-5)
    plan = f.entry({}).plan
    assert plan.stats["chains"] == 1 and plan.stats["native_steps"] >= 2
    assert "F0(" not in plan.runner.source  # no kernel object called from Python


def test_plans_of_other_sizes_reuse_the_compiled_chains():
    """The chain code reads each step's dims from the address table, so the plans of a
    dynamic model at other sizes (a decode step whose past grows by one a token) compile no
    new chain: they differ only in the table."""
    from msc.backend.runtime import native_run
    from msc.tir import expr as tir

    n = tir.Var("n", "int64")
    x = relax.Var("x", _tensor((n, 8)))
    mod = _module([x], lambda bb, x: bb.emit(R.nn.softmax(R.multiply(
        R.exp(R.permute_dims(bb.emit(R.add(x, relax.const(CHANNEL))), [0, 1])),
        relax.const(CHANNEL)), axis=-1)))
    f = relax.VirtualMachine(relax.build(mod))["main"]
    units = None
    for size in (3, 5, 9):
        xv = RNG.standard_normal((size, 8)).astype("float32")
        e = np.exp(xv + CHANNEL) * CHANNEL
        want = np.exp(e - e.max(-1, keepdims=True))
        np.testing.assert_allclose(f(xv).numpy(), want / want.sum(-1, keepdims=True),
                                   rtol=1e-5, atol=1e-6)
        assert f.entry({"n": size}).plan.stats["chains"] >= 1
        units = len(native_run._UNITS) if units is None else units
        assert len(native_run._UNITS) == units  # no compile after the first size
