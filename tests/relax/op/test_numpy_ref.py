"""numpy reference facts, op by op, against torch (CPU) or, where torch has no such op, against
values worked out by hand (the cases: tests/helpers/numpy_cases.py).
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from msc import relax
from msc.relax.expr import Attrs
from msc.relax.op import numpy_ref, registry
from msc.relax.op.defs_manipulate import IndexMap
from tests.helpers.numpy_cases import (
    BETA,
    CASES,
    GAMMA,
    MEAN,
    VAR,
    X34,
    X,
    _f,
    _nonzero,
    check,
    run,
)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_matches_reference(case):
    got = run(case.op, *case.args, **case.kwargs)
    check(got, case.expected(), case.rtol, case.atol)


# --------------------------------------------------------------------------------------------
# Behaviour torch cannot show, and the table itself.

def test_batch_norm_training_updates_moving_stats_with_the_biased_variance():
    out, mean, var = run("nn.batch_norm", X, GAMMA, BETA, MEAN, VAR, axis=1, momentum=0.1)
    batch_mean, batch_var = X.mean(axis=(0, 2, 3)), X.var(axis=(0, 2, 3))
    check(mean, 0.9 * MEAN + 0.1 * batch_mean)
    check(var, 0.9 * VAR + 0.1 * batch_var)
    want = F.batch_norm(torch.from_numpy(X), None, None, torch.from_numpy(GAMMA),
                        torch.from_numpy(BETA), training=True)
    check(out, want, rtol=1e-4, atol=1e-5)  # torch normalizes with float32 batch statistics


def test_resize_half_pixel_nearest_rounds_half_away_from_zero():
    x = np.arange(4, dtype="float32").reshape(1, 1, 1, 4)
    got = run("image.resize2d", x, (1, 8), method="nearest_neighbor")
    # in = (o + 0.5) / 2 - 0.5: -0.25, 0.25, 0.75, 1.25, ... rounds to 0 0 1 1 2 2 3 3
    np.testing.assert_array_equal(got.reshape(-1), [0, 0, 1, 1, 2, 2, 3, 3])


def test_scalar_results_are_zero_dimensional():
    got = run("sum", X34)
    assert isinstance(got, np.ndarray) and got.shape == () and got.dtype == np.float32


def test_unregistered_tvm_ops_in_the_table():
    """atan2 and nn.relu6 are TVM ops the table does not declare yet: their facts wait."""
    facts = numpy_ref.FACTS
    a, b = _f(5), _nonzero(5)
    check(facts["atan2"]([a, b], Attrs()), torch.atan2(torch.from_numpy(a), torch.from_numpy(b)))
    check(facts["nn.relu6"]([a * 5], Attrs()), F.relu6(torch.from_numpy(a * 5)))


def test_every_fact_of_a_registered_op_is_tested():
    tested = {c.op for c in CASES} | {"atan2", "nn.relu6"}
    untested = sorted(n for n, d in registry.OPS.items() if "numpy" in d.facts)
    assert [n for n in untested if n not in tested] == []


def test_expr_value_rejects_unknown_values():
    x = relax.Var("x", relax.TensorStructInfo((2,), "float32"))
    with pytest.raises(numpy_ref.NotConstant):
        numpy_ref.expr_value(x)
    from msc import tir
    with pytest.raises(numpy_ref.NotConstant):
        numpy_ref.expr_value(relax.ShapeExpr([tir.Var("n"), 2]))
    assert numpy_ref.expr_value(relax.Tuple([relax.PrimValue(3), relax.ShapeExpr([1])])) == (
        3, (1,))


def test_layout_transform_index_map_is_the_op_record_class():
    assert isinstance(
        registry.make_call("layout_transform", _f(2, 2), index_map=lambda a, b: (b, a)
                           ).attrs.index_map, IndexMap)


def test_hamming_window_of_one_is_one():
    assert math.isclose(float(run("hamming_window", 1, 1, 0.54, 0.46, dtype="float32")[0]), 1)
