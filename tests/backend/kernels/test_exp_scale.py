"""exp's final scaling by 2**n (lowering/math.py): AVX-512 hosts scale 16-lane vectors with
scalef (one instruction), others in two halves; both give numpy's exp, sigmoid, silu and tanh
at the edges: denormal results, overflow to inf, +-inf and NaN inputs, and random arguments,
in whole unrolled vectors and the masked tail. The capped children build the AVX-512 (scalef)
and the AVX2 (halves) forms on this host."""

import numpy as np
import pytest

from msc.backend.kernels.activation import ExprKernel
from tests.helpers.isa_child import capped_report

EDGES = [-np.inf, -1000.0, -104.5, -103.9, -100.0, -95.0, -88.0, -87.4, -87.3, -20.0, -1.0,
         -1e-30, 0.0, 1e-30, 0.5, 20.0, 88.0, 88.72, 88.73, 89.0, 100.0, np.inf, np.nan]


def _sigmoid(x):
    return np.exp(-np.logaddexp(0.0, -x))


FORMS = {  # float64 references; silu multiplies x by the float32 sigmoid, as the kernel does
    "exp": np.exp,
    "sigmoid": _sigmoid,
    "nn.silu": lambda x: x * _sigmoid(x).astype(np.float32),
    "tanh": np.tanh,
}
RTOL = 4e-7  # a few float32 ulps: polynomial on a reduced argument
TINY = 2 * 2.0 ** -149  # denormal results: two steps of the smallest denormal


def _inputs() -> np.ndarray:
    """The edges spread over 4 unrolled vectors, single vectors and a tail, with random
    arguments between them."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(16 * 4 * 3 + 16 * 2 + 7) * 30).astype(np.float32)
    x[::7][:len(EDGES)] = EDGES
    x[-len(EDGES):] = EDGES
    return x


def check_forms() -> dict:
    """Worst error of each form against numpy in float64: relative where the result is
    normal, absolute (in denormal steps) below, and whether inf / NaN land where numpy's do."""
    x = _inputs()
    report = {}
    for op, ref in FORMS.items():
        got = ExprKernel((op, ("in", 0)), x.shape)(x, np.empty_like(x)).astype(np.float64)
        with np.errstate(all="ignore"):
            want = ref(x.astype(np.float64)).astype(np.float32).astype(np.float64)
            diff = np.abs(got - want)
        finite = np.isfinite(want)
        same_special = bool(np.array_equal(np.isnan(got), np.isnan(want))
                            and np.array_equal(got[np.isinf(want)], want[np.isinf(want)]))
        normal = finite & (np.abs(want) >= 2.0 ** -126)
        rel = diff[normal] / np.abs(want)[normal]
        report[op] = {"rel": float(rel.max()), "special": same_special,
                      "tiny": float(diff[finite & ~normal].max(initial=0.0))}
    return report


def test_exp_family_matches_numpy_at_the_edges():
    for op, found in check_forms().items():
        assert found["special"], op
        assert found["rel"] <= RTOL, (op, found)
        assert found["tiny"] <= TINY, (op, found)


_CHILD = """
import json
from tests.backend.kernels.test_exp_scale import check_forms
print(json.dumps(check_forms()))
"""


@pytest.mark.parametrize("isa", ["avx512", "avx2"])
def test_exp_family_on_capped_hosts(tmp_path, isa):
    for op, found in capped_report(_CHILD, isa, tmp_path).items():
        assert found["special"] and found["rel"] <= RTOL and found["tiny"] <= TINY, (op, found)


def test_lone_transcendental_ops_take_the_vector_loop():
    """exp, sigmoid, tanh and erf alone (no chain to fuse) run as expression kernels, not as
    their legalized loops, and give torch's values."""
    torch = pytest.importorskip("torch")
    from msc import relax
    from msc.backend.kernels.activation import VECTOR_UNARY
    from msc.relax import op as R
    from tests.helpers.relax_modules import one_function_module

    assert len(VECTOR_UNARY) >= 4
    x = np.random.default_rng(4).standard_normal((3, 40, 37), dtype=np.float32) * 4
    for op in sorted(VECTOR_UNARY):
        var = relax.Var("x", relax.TensorStructInfo(x.shape, "float32"))
        ex = relax.build(one_function_module([var], lambda bb, v, op=op: getattr(R, op)(v)))
        kernels = [type(n.fn).__name__ for p in ex.programs.values() for n in p.walk()
                   if getattr(n, "fn", None) is not None]
        assert kernels == ["ExprKernel"], (op, kernels)
        got = relax.VirtualMachine(ex, relax.cpu())["main"](x).numpy()
        want = getattr(torch, op)(torch.from_numpy(x).double()).numpy()
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-30, err_msg=op)
