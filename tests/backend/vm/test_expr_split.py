"""Expression kernels (kernels/activation.py) split across threads by their estimated time:
elements x instructions at the host's measured rate, so an erf gelu or a silu of 64 Ki floats
(NFNet's activations at batch 16) splits inside the chain where an add of as many floats
splits only from a flat pass's time on. Results are torch's at 1 and 2 threads, the same
bytes on any thread count, also built for AVX-512 and AVX2 hosts (child processes)."""

import numpy as np
import pytest

from benchmarks.common import msc_runner
from msc import relax
from msc.backend.kernels import activation
from msc.backend.runtime import split_cost
from msc.relax import op as R
from tests.helpers.isa_child import capped_report
from tests.helpers.relax_modules import one_function_module

torch = pytest.importorskip("torch")

SHAPE = (4, 16, 16, 16)  # NFNet's 16-channel 16x16 planes, 4 images: 16 Ki floats
TOL = {"rtol": 1e-5, "atol": 1e-5}  # erf / exp polynomials against torch's libm, float32


def _module():
    """gelu(x) * 0.9, then silu of that: one expression kernel after fusion."""
    x = relax.Var("x", relax.TensorStructInfo(SHAPE, "float32"))

    def body(bb, x):
        y = bb.emit(R.multiply(bb.emit(R.nn.gelu(x)), relax.const(np.float32(0.9))))
        return R.multiply(y, bb.emit(R.sigmoid(y)))

    return one_function_module([x], body)


def _torch(x: np.ndarray) -> np.ndarray:
    y = torch.nn.functional.gelu(torch.from_numpy(x)) * 0.9
    return (y * torch.sigmoid(y)).numpy()


@pytest.fixture
def costs_in(tmp_path, monkeypatch):
    """Split costs in a fresh cache directory: a 1 us round trip, a gelu element-instruction
    of 10 ps, a flat element of 100 ps (this host's are measured in other tests)."""
    monkeypatch.setenv("MSC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(split_cost, "_costs", {})
    monkeypatch.setattr(split_cost, "_measure_host", lambda: {
        "dispatch_s": 1e-6, "serial_s": 1e-6,
        "rates": {"expr_instruction": 1e-11, "flat_element": 1e-10}})


def test_expensive_expressions_split_in_the_chain(costs_in):
    ex = relax.build(_module())
    assert ex.plan("main", (), {}).stats["parallel_steps"] == 1  # the fused expression
    x = np.random.default_rng(0).standard_normal(SHAPE, dtype=np.float32) * 3
    want = _torch(x)
    outs = [msc_runner(ex, threads)(x) for threads in (1, 2, 1, 2)]
    for out in outs:
        np.testing.assert_allclose(out, want, **TOL)
    assert all(np.array_equal(out, outs[0]) for out in outs)


def test_time_estimate_ranks_expressions(costs_in):
    gelu = activation.ExprKernel(("nn.gelu", ("in", 0)), SHAPE)
    add = activation.ExprKernel(("add", ("in", 0), ("in", 1)), SHAPE)
    n = int(np.prod(SHAPE))
    assert activation.expr_seconds(gelu.expr, n) > 4 * activation.expr_seconds(add.expr, n)
    # the add costs a flat pass at least: 16 Ki x 100 ps = 1.6 us, half of it below 3 trips
    assert activation.expr_seconds(add.expr, n) == pytest.approx(n * 1e-10)
    assert gelu._splits(2) and not add._splits(2)
    assert not gelu._splits(1)


def test_kernel_object_splits_equal_one_thread(costs_in):
    """The Python entry (used outside chains) splits into the same element ranges."""
    from msc.backend.runtime.threads import num_threads

    kernel = activation.ExprKernel(("nn.silu", ("in", 0)), SHAPE)
    x = np.random.default_rng(1).standard_normal(SHAPE, dtype=np.float32) * 4
    outs = []
    for threads in (1, 2):
        with num_threads(threads):
            outs.append(kernel(x, np.empty_like(x)))
    want = torch.nn.functional.silu(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(outs[1], want, **TOL)
    assert np.array_equal(outs[0], outs[1])


_CHILD = """
import json, numpy as np, torch
from benchmarks.common import msc_runner
from msc import relax
from tests.backend.vm.test_expr_split import SHAPE, _module, _torch
ex = relax.build(_module())
x = np.random.default_rng(0).standard_normal(SHAPE, dtype=np.float32) * 3
one, two = (msc_runner(ex, t)(x) for t in (1, 2))
print(json.dumps({"err": float(np.abs(two - _torch(x)).max()),
                  "same": bool(np.array_equal(one, two))}))
"""


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_split_expressions_on_capped_hosts(tmp_path, isa):
    report = capped_report(_CHILD, isa, tmp_path)
    assert report["err"] < 1e-4 and report["same"]
