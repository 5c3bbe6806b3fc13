"""Symbolic dims (msc.tir.expr): simplification, printing, evaluation, errors."""

import pytest

from msc import tir
from msc.errors import ValidationError

n, m = tir.Var("n"), tir.Var("m")


@pytest.mark.parametrize(
    "expr, text",
    [
        ((n + 1) * 2 - 2, "n * 2"),
        (2 * n, "n * 2"),
        (n - 1, "n - 1"),
        (4 - n, "4 - n"),
        (tir.floordiv(n * 4, 2), "n * 2"),
        (tir.floordiv(n, 2) - 1, "n // 2 - 1"),
        (tir.floormod(n * 6, 3), "0"),
        (tir.min(n, 4) * 2, "T.min(n, 4) * 2"),
        (tir.max(n + 1, n), "n + 1"),
        (tir.min(n + 1, n), "n"),
        ((n + m) * (n - m), "n * n - m * m"),
        (n * m + n * 3 - 5, "n * 3 + n * m - 5"),
        (tir.floordiv(n + 3, 4), "(n + 3) // 4"),
        (tir.IntImm(3) + 4, "7"),
    ],
)
def test_simplify_and_print(expr, text):
    assert tir.to_str(expr) == text


def test_equal_shapes_compare_equal():
    assert n * 2 == 2 * n
    assert hash(n * 2) == hash(2 * n)
    assert (n + 1) - 1 == n
    assert n + 1 != n
    assert tir.Var("n") == n  # vars are named sizes


def test_prim_kinds_follow_tir_type_keys():
    assert (n - 1).kind == "Sub"
    assert (n * 2).kind == "Mul"
    assert tir.min(n, m).kind == "Min"
    assert tir.floordiv(n, m).kind == "FloorDiv"


def test_evaluate_and_substitute():
    assert tir.evaluate(n * m + 3, {"n": 2, "m": 5}) == 13
    assert tir.evaluate(tir.floordiv(n, 2) - tir.min(n, 3), {"n": 7}) == 0
    assert tir.substitute(n * 2 + m, {"n": 3}) == m + 6
    with pytest.raises(ValidationError, match="unbound vars: m"):
        tir.evaluate(n + m, {"n": 1})


def test_free_vars_in_order():
    assert [v.name for v in tir.free_vars(tir.min(m, n) * n)] == ["m", "n"]


def test_division_by_zero_is_an_error():
    with pytest.raises(ValidationError, match="divides by zero"):
        tir.floordiv(tir.IntImm(4), 0)


def test_immutable():
    with pytest.raises(AttributeError):
        n.name = "k"
