"""Kernel steps split across threads from inside a native chain (runtime/chain_split.py), and
the host's measured split costs that decide it (runtime/split_cost.py).

A batched CNN (padded / 1x1 / strided convs, pools, a depthwise conv) gives onnxruntime's
outputs at 1 and 2 threads whether the split follows the measured costs, is forced on every
step that can split (``MSC_SPLIT=always``) or off; the cost file is checked when read; a
kernel failing in a chain that also holds parallel steps still raises RuntimeCallError."""

import json
import math

import numpy as np
import pytest

from benchmarks.blocks import _Graph
from benchmarks.common import msc_executable, msc_runner, ort_session
from msc import relax
from msc.backend.runtime import split_cost
from msc.backend.runtime.threads import num_threads
from msc.errors import RuntimeCallError, ValidationError
from msc.relax import op as R
from tests.helpers.relax_modules import one_function_module

TOL = {"rtol": 1e-4, "atol": 1e-4}  # float32 sums of a few hundred terms, in another order
BATCH = 5  # odd: the parts of the images are unequal


def _model():
    """Conv 3x3 padded -> relu -> max pool -> depthwise 3x3 -> 1x1 conv stride 2 -> avg pool,
    16 channels on 12x12 images."""
    g = _Graph(seed=5)
    y = g.act(g.conv("x", 8, 16, 3), "relu")
    y = g.op("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])
    y = g.act(g.conv(y, 16, 16, 3, groups=16), "relu")
    y = g.conv(y, 16, 24, 1, stride=2)
    y = g.op("AveragePool", [y], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    return g.model([BATCH, 8, 12, 12], y)


@pytest.fixture
def costs_in(tmp_path, monkeypatch):
    """Split costs kept in a fresh cache directory, measured again on first use."""
    monkeypatch.setenv("MSC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(split_cost, "_costs", {})
    return tmp_path / "split_cost.json"


@pytest.mark.parametrize("mode", ["measured", "always", "never"])
def test_model_same_at_one_and_two_threads(costs_in, monkeypatch, mode):
    pytest.importorskip("onnxruntime")
    monkeypatch.setenv(split_cost.SPLIT_ENV, mode)
    model = _model()
    ex = msc_executable(model)  # plans (and split decisions) are made by the build
    parallel = ex.plan("main", (), {}).stats["parallel_steps"]
    assert parallel >= 5 if mode == "always" else parallel == 0 if mode == "never" else True
    x = np.random.default_rng(1).standard_normal((BATCH, 8, 12, 12), dtype=np.float32)
    want = ort_session(model, 1)(x)
    outs = [msc_runner(ex, threads)(x) for threads in (1, 2, 1, 2)]
    for out in outs:
        np.testing.assert_allclose(out, want, **TOL)
    assert all(np.array_equal(out, outs[0]) for out in outs)  # the same sums on any thread


def test_bad_split_mode_is_named(monkeypatch):
    monkeypatch.setenv(split_cost.SPLIT_ENV, "sometimes")
    with pytest.raises(ValidationError, match="MSC_SPLIT"):
        split_cost.split_mode()


def test_costs_are_measured_once_and_read_back(costs_in, monkeypatch):
    costs = split_cost.host_costs()
    assert 0 < costs["dispatch_s"] < 1e-3 and costs_in.exists()
    saved = json.loads(costs_in.read_text())
    assert saved["host"] == split_cost.cpu_identity()
    monkeypatch.setattr(split_cost, "_costs", {})
    monkeypatch.setattr(split_cost, "_measure_host", lambda: pytest.fail("measured again"))
    assert split_cost.host_costs()["dispatch_s"] == saved["costs"]["dispatch_s"]


def _write(path, host=None, **costs):
    body = {"dispatch_s": 2e-6, "serial_s": 1e-6, "rates": {"conv_mac": 2e-11}, **costs}
    path.write_text(json.dumps({"version": split_cost.VERSION,
                                "host": host or split_cost.cpu_identity(), "costs": body}))


@pytest.mark.parametrize("damage, why", [
    (lambda p: p.write_text("{not json"), "not JSON"),
    (lambda p: _write(p, host={"cpu": "another", "features": "0", "model": "x",
                               "threads": 64}), "another CPU"),
    (lambda p: _write(p, dispatch_s=float("nan")), "not finite positive"),
    (lambda p: _write(p, rates={"conv_mac": -1.0}), "not finite positive"),
    (lambda p: p.write_text(json.dumps({"version": 999})), "not version"),
])
def test_a_bad_cost_file_is_ignored_with_a_warning(costs_in, monkeypatch, damage, why):
    costs_in.parent.mkdir(parents=True, exist_ok=True)
    damage(costs_in)
    measured = {"dispatch_s": 3e-6, "serial_s": 1e-6, "rates": {}}
    monkeypatch.setattr(split_cost, "_measure_host", lambda: dict(measured))
    with pytest.warns(RuntimeWarning, match=why):
        costs = split_cost.host_costs()
    assert costs["dispatch_s"] == 3e-6  # measured, never the file's values


def test_a_valid_cost_file_is_trusted(costs_in, monkeypatch):
    costs_in.parent.mkdir(parents=True, exist_ok=True)
    _write(costs_in, dispatch_s=7e-6)
    monkeypatch.setattr(split_cost, "_measure_host", lambda: pytest.fail("measured"))
    assert split_cost.host_costs()["dispatch_s"] == 7e-6
    assert split_cost.unit_seconds("conv_mac", 1e6, lambda: pytest.fail("probed")) == \
        pytest.approx(2e-5)


def test_split_follows_the_break_even(costs_in, monkeypatch):
    monkeypatch.setattr(split_cost, "_measure_host",
                        lambda: {"dispatch_s": 1e-6, "serial_s": 1e-6, "rates": {}})
    margin = split_cost.MARGIN
    # half of the work must save more than MARGIN round trips
    assert split_cost.worth_splitting(2.2 * margin * 1e-6, 2)
    assert not split_cost.worth_splitting(1.8 * margin * 1e-6, 2)
    assert not split_cost.worth_splitting(1.0, 1)
    monkeypatch.setenv(split_cost.SPLIT_ENV, "always")
    assert split_cost.worth_splitting(0.0, 2)
    assert math.isfinite(split_cost.host_costs()["dispatch_s"])


def test_failing_kernel_in_a_parallel_chain_raises(costs_in, monkeypatch):
    """conv (a parallel step) then take (a compiled TIR kernel that checks its indices) in
    one chain: an index out of range stops the chain and names the take."""
    monkeypatch.setenv(split_cost.SPLIT_ENV, "always")
    rng = np.random.default_rng(2)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    x = relax.Var("x", relax.TensorStructInfo((3, 4, 8, 8), "float32"))
    k = relax.Var("k", relax.TensorStructInfo((2,), "int64"))

    def body(bb, x, k):
        y = bb.emit(R.nn.relu(bb.emit(R.nn.conv2d(x, relax.const(w), padding=1))))
        return R.take(y, k, axis=1)

    ex = relax.build(one_function_module([x, k], body))
    assert ex.plan("main", (), {}).stats["parallel_steps"] == 1
    vm = relax.VirtualMachine(ex, relax.cpu())["main"]
    xv = rng.standard_normal((3, 4, 8, 8)).astype(np.float32)
    with num_threads(2):
        good = vm(xv, np.array([5, 0], np.int64)).numpy()
        with pytest.raises(RuntimeCallError, match="out of range"):
            vm(xv, np.array([1, 9], np.int64))
    with num_threads(1):
        np.testing.assert_array_equal(vm(xv, np.array([5, 0], np.int64)).numpy(), good)
