"""Plan.peak_bytes: the activation bytes one call holds, checked on a plan computed by hand."""

import itertools

import numpy as np

from msc import relax
from msc.relax import op as R
from tests.helpers.relax_modules import one_function_module, tensor

F32 = "float32"
WIDTHS = (16, 32, 8, 32, 16)  # x is (4, 16); each matmul + relu changes the width


def _model():
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal((a, b), F32) / 4 for a, b in itertools.pairwise(WIDTHS)]
    x = relax.Var("x", tensor((4, WIDTHS[0])))

    def body(bb, x):
        h = x
        for w in ws[:-1]:
            h = bb.emit(R.nn.relu(bb.emit(R.matmul(h, relax.const(w)))))
        return R.matmul(h, relax.const(ws[-1]))

    def ref(xv):
        for w in ws[:-1]:
            xv = np.maximum(xv @ w, 0)
        return xv @ ws[-1]
    return one_function_module([x], body), ref


def test_peak_bytes_of_a_hand_computed_plan():
    mod, ref = _model()
    fn = relax.VirtualMachine(relax.build(mod), relax.cpu())["main"]
    x = np.random.default_rng(1).standard_normal((4, 16), F32)
    np.testing.assert_allclose(fn(x).numpy(), ref(x), rtol=1e-4, atol=1e-4)
    plan = fn.entry({}).plan
    # Pooled (matmul + relu fused): h1 (4x32) at step 0, h2 (4x8) at step 1, h1 dies there,
    # h3 (4x32) reuses h1's storage; the result (4x16) is allocated fresh on every call.
    h1, h2, out = 4 * 32 * 4, 4 * 8 * 4, 4 * 16 * 4
    assert plan.storages == [h1, h2]
    assert plan.stats["planned_bytes"] == h1 + h2 + h1  # the same buffers without reuse
    assert plan.peak_bytes == h1 + h2 + out == 896
    # Never below what is live at once (h3 and the result at the last step).
    assert plan.peak_bytes >= h1 + out
