"""Per-op overhead of the plan: free views as one bound reshape, concat inputs written in place.

Each test compares with numpy and checks the plan took (or refused) the shortcut.
"""

import numpy as np
import pytest

from msc import relax
from msc.backend.runtime import plan as plan_mod
from msc.relax import op as R
from tests.helpers.relax_modules import one_function_module as _module
from tests.helpers.relax_modules import tensor as _tensor

F32 = "float32"
RNG = np.random.default_rng(0)
TOL = {"rtol": 1e-5, "atol": 1e-5}


def _plan(ex):
    (plan,) = [p for (name, _), p in ex._plans.items() if name == "main"]
    return plan


def _conv(bb, x, cin, cout, seed):
    w = np.random.default_rng(seed).standard_normal((cout, cin, 1, 1)).astype(np.float32)
    return bb.emit(R.nn.conv2d(x, relax.const(w))), w


def _np_conv(x, w):
    return np.einsum("nchw,oc->nohw", x, w[:, :, 0, 0])


def _fire(axis: int, tail: bool):
    """concat(conv1x1(x), conv1x1(x)) along ``axis``, then relu when ``tail``."""
    x = relax.Var("x", _tensor((1, 8, 4, 4)))
    weights = []

    def body(bb, x):
        a, wa = _conv(bb, x, 8, 16, 1)
        b, wb = _conv(bb, x, 8, 16, 2)
        weights.extend([wa, wb])
        c = bb.emit(R.concat(relax.Tuple([a, b]), axis=axis))
        return bb.emit(R.nn.relu(c)) if tail else c

    mod = _module([x], body)
    return mod, weights


def _ref_fire(xv, weights, axis, tail):
    out = np.concatenate([_np_conv(xv, w) for w in weights], axis=axis)
    return np.maximum(out, 0) if tail else out


def _in_place(ex) -> bool:
    return any(i[0] is plan_mod._concat_in_place for i in _plan(ex).instructions)


@pytest.mark.parametrize("axis, tail, in_place", [
    (1, True, True),    # squeezenet's fire module: the convs write into the concat's slices
    (1, False, False),  # the result is handed out: fresh buffers, a real concat
    (2, True, False),   # not end to end in memory
])
def test_concat_inputs_written_in_place(axis, tail, in_place):
    mod, weights = _fire(axis, tail)
    ex = relax.build(mod)
    f = relax.VirtualMachine(ex)["main"]
    xv = RNG.standard_normal((1, 8, 4, 4), np.float32)
    first = f(xv).numpy()
    np.testing.assert_allclose(first, _ref_fire(xv, weights, axis, tail), **TOL)
    assert _in_place(ex) == in_place
    x2 = RNG.standard_normal((1, 8, 4, 4), np.float32)
    np.testing.assert_allclose(f(x2).numpy(), _ref_fire(x2, weights, axis, tail), **TOL)
    np.testing.assert_allclose(first, _ref_fire(xv, weights, axis, tail), **TOL)


@pytest.mark.parametrize("make, ref", [
    (lambda x: R.reshape(x, (1, 4, 8)), lambda v: v.reshape(1, 4, 8)),
    (lambda x: R.flatten(x), lambda v: v.reshape(-1)),
    (lambda x: R.squeeze(x, axis=[0]), lambda v: v.reshape(8, 4)),
    (lambda x: R.expand_dims(x, axis=[1]), lambda v: v.reshape(1, 1, 8, 4)),
])
def test_static_views_skip_numpy_caller(make, ref):
    x = relax.Var("x", _tensor((1, 8, 4)))
    mod = _module([x], lambda bb, x: bb.emit(R.nn.relu(bb.emit(make(x)))))
    ex = relax.build(mod)
    assert ex.stats["kernels"]["numpy"] >= 1  # still counted as the numpy path it is
    xv = RNG.standard_normal((1, 8, 4), np.float32)
    out = relax.VirtualMachine(ex)["main"](xv).numpy()
    np.testing.assert_allclose(out, np.maximum(ref(xv), 0), **TOL)
    names = {getattr(i[0], "__name__", "") for i in _plan(ex).instructions}
    assert "view" in names and not names & {"call", "call_fresh"}


def test_chained_and_shared_concat_inputs():
    """densenet's chain (a concat feeds the next, whose other input ran before it) and one
    conv feeding two concats: the buffer sits in two groups, one concat copies it."""
    x = relax.Var("x", _tensor((1, 8, 4, 4)))
    ws = []

    def body(bb, x):
        (a, wa), (b, wb), (c, wc) = (_conv(bb, x, 8, 8, s) for s in (3, 4, 5))
        ws.extend([wa, wb, wc])
        c1 = bb.emit(R.concat(relax.Tuple([a, b]), axis=1))
        c2 = bb.emit(R.concat(relax.Tuple([c1, c]), axis=1))
        c3 = bb.emit(R.concat(relax.Tuple([b, c]), axis=1))
        parts = [bb.emit(R.nn.relu(v)) for v in (c2, c3)]
        return bb.emit(R.concat(relax.Tuple(parts), axis=1))

    ex = relax.build(_module([x], body))
    f = relax.VirtualMachine(ex)["main"]
    assert _in_place(ex)
    for _ in range(2):
        xv = RNG.standard_normal((1, 8, 4, 4), np.float32)
        a, b, c = (_np_conv(xv, w) for w in ws)
        want = np.maximum(np.concatenate([a, b, c, b, c], axis=1), 0)
        np.testing.assert_allclose(f(xv).numpy(), want, **TOL)


def test_dense_block_concats_copy_nothing(monkeypatch):
    """densenet's dense block: each concat is the first input of the next and is read by the
    next layer (relu -> conv) too. The chain is nested in one storage, every conv writes its
    channels in place, and no concat copies; the numbers match numpy's concatenation."""
    x = relax.Var("x", _tensor((1, 16, 4, 4)))
    ws = []

    def body(bb, x):
        block = bb.emit(R.nn.relu(x))
        for layer in range(4):
            grown, w = _conv(bb, bb.emit(R.nn.relu(block)), 16 * (layer + 1), 16, layer)
            ws.append(w)
            block = bb.emit(R.concat(relax.Tuple([block, grown]), axis=1))
        return bb.emit(R.nn.relu(block))

    def reference(xv):
        block = np.maximum(xv, 0)
        for w in ws:
            block = np.concatenate([block, _np_conv(np.maximum(block, 0), w)], axis=1)
        return np.maximum(block, 0)

    copies = []
    monkeypatch.setattr(plan_mod, "copy_into", lambda *args: copies.append(args))
    ex = relax.build(_module([x], body))
    f = relax.VirtualMachine(ex)["main"]
    assert _in_place(ex)
    for _ in range(2):
        xv = RNG.standard_normal((1, 16, 4, 4), np.float32)
        np.testing.assert_allclose(f(xv).numpy(), reference(xv), **TOL)
    assert copies == []
