"""structural_equal / assert_structural_equal and the struct-info lattice."""

import numpy as np
import pytest

from msc import relax, tir
from msc.errors import ValidationError
from msc.relax import op
from msc.relax.analysis import (
    assert_structural_equal,
    is_base_of,
    structural_equal,
    unify_struct_info,
)

F32 = "float32"


def build(names=("x", "lv", "gv"), weight=None, axis=-1, dim=None):
    """softmax(x + w) with configurable names, constant, attr and symbolic dim name."""
    n = tir.Var(dim or "n", "int64")
    x = relax.Var(names[0], relax.TensorStructInfo((n, 4), F32))
    w = relax.const(np.arange(4, dtype=F32) if weight is None else weight)
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            lv = bb.emit(op.add(x, w), names[1])
            gv = bb.emit_output(op.nn.softmax(lv, axis=axis), names[2])
        bb.emit_func_output(gv)
    return bb.get()


def test_names_do_not_matter_positions_do():
    assert structural_equal(build(), build(names=("a", "b", "c")))
    assert structural_equal(build(), build(dim="batch"))


def test_constants_compare_by_value():
    assert structural_equal(build(), build(weight=np.arange(4, dtype=F32)))
    assert not structural_equal(build(), build(weight=np.ones(4, F32)))
    assert not structural_equal(relax.const(np.arange(4, dtype=F32)),
                                relax.const(np.arange(4, dtype="float64")))


def test_attrs_compare_by_value():
    assert not structural_equal(build(), build(axis=0))


def test_assert_names_the_first_difference():
    with pytest.raises(ValidationError, match=r"main\.body\.blocks\[0\]\.bindings\[1\]\.value"
                                              r"\.attrs\['axis'\]: -1 vs 0"):
        assert_structural_equal(build(), build(axis=0))
    with pytest.raises(ValidationError, match="constant values differ"):
        assert_structural_equal(build(), build(weight=np.ones(4, F32)))


def test_expressions_and_free_vars():
    x, y = (relax.Var(n, relax.TensorStructInfo((2,), F32)) for n in "xy")
    assert structural_equal(op.add(x, x), op.add(y, y))
    assert not structural_equal(op.add(x, y), op.add(x, x))
    assert not structural_equal(op.add(x, x), op.add(y, y), map_free_vars=False)
    assert structural_equal(relax.ShapeExpr([1, 2]), relax.ShapeExpr([1, 2]))


def test_round_trip_through_text_is_equal():
    mod = build()
    assert_structural_equal(relax.from_script(mod.script(show_meta=True)), mod)


@pytest.mark.parametrize("base, derived, expected", [
    (relax.TensorStructInfo(None, F32, 2), relax.TensorStructInfo((2, 3), F32), True),
    (relax.TensorStructInfo(None, "void"), relax.TensorStructInfo((2, 3), "int8"), True),
    (relax.TensorStructInfo((2, 3), F32), relax.TensorStructInfo(None, F32, 2), False),
    (relax.TensorStructInfo((3, 2), F32), relax.TensorStructInfo((2, 3), F32), False),
    (relax.ObjectStructInfo(), relax.ShapeStructInfo([1]), True),
    (relax.PrimStructInfo("int64"), relax.PrimStructInfo("int64", 3), True),
    (relax.TupleStructInfo([relax.ObjectStructInfo()]),
     relax.TupleStructInfo([relax.TensorStructInfo((1,), F32)]), True),
])
def test_is_base_of(base, derived, expected):
    assert is_base_of(base, derived) is expected


def test_unify_keeps_what_both_share():
    a, b = relax.TensorStructInfo((2, 3), F32), relax.TensorStructInfo((4, 3), F32)
    assert unify_struct_info(a, b) == relax.TensorStructInfo(None, F32, 2)
    assert unify_struct_info(a, a) == a
    assert unify_struct_info(a, relax.ShapeStructInfo([1])) == relax.ObjectStructInfo()
