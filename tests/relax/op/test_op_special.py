"""call_tir, packed calls and the side-effect builtins (defs_special): the struct info comes
from the caller and is kept in ``call.sinfo_args`` as in TVM."""

import pytest

from msc import relax
from msc.errors import ValidationError
from msc.relax.op import OPS
from tests.helpers.op_cases import Case, family_tests, t

F32 = "float32"

CASES = [
    Case("call_dps_packed", lambda R, x: R.call_dps_packed("my_func", [x],
                                                           R.sinfo(["n", 3], F32)),
         [t("n", 3)], "(n, 3) float32"),
    Case("call_dps_packed_tuple", lambda R, x: R.call_dps_packed(
        "my_func", (x,), [R.sinfo(["n", 3]), R.sinfo([2], "int32")]), [t("n", 3)],
        "[(n, 3) float32, (2,) int32]"),
    Case("call_pure_packed", lambda R, x: R.call_pure_packed(
        "my_func", x, x, ty_args=R.sinfo(["n", 3])), [t("n", 3)], "(n, 3) float32"),
    Case("call_pure_packed_tuple", lambda R, x: R.call_pure_packed(
        "my_func", x, ty_args=[R.sinfo(["n"]), R.sinfo(["n"], "int64")]), [t("n", 3)],
        "[(n,) float32, (n,) int64]"),
    Case("call_inplace_packed", lambda R, x: R.call_inplace_packed(
        "my_func", x, inplace_indices=[0], ty_args=[R.sinfo(["n", 3])]), [t("n", 3)],
        "(n, 3) float32"),
    Case("call_builtin_with_ctx", lambda R, x: R.call_builtin_with_ctx(
        "vm.builtin.f", (x,), ty_args=R.sinfo(["n", 3])), [t("n", 3)], "(n, 3) float32"),
    Case("null_value", lambda R, x: R.null_value(), [t("n", 3)], "ObjectStructInfo"),
    # TVM needs a real PrimFunc behind the GlobalVar to build call_tir: msc only checks ours.
    Case("call_tir", lambda R, x: R.call_tir(R.gvar("add1"), [x], R.sinfo(["n", 3])),
         [t("n", 3)], "(n, 3) float32", tvm=False),
    Case("call_tir_tuple", lambda R, x: R.call_tir(R.gvar("f"), (x,), [R.sinfo(["n"]),
                                                                        R.sinfo([2])]),
         [t("n", 3)], "[(n,) float32, (2,) float32]", tvm=False),
    Case("call_tir_out_sinfo", lambda R, x: R.call_tir(R.gvar("f"), [x],
                                                       out_sinfo=R.sinfo(["n", 3])),
         [t("n", 3)], "(n, 3) float32", tvm=False),
    Case("call_tir_inplace", lambda R, x: R.call_tir_inplace(R.gvar("f"), (x,), 0,
                                                             R.sinfo(["n", 3])),
         [t("n", 3)], "(n, 3) float32", tvm=False),
    Case("print", lambda R, x: R.print(x, format="x={}"), [t("n", 3)], "[]", tvm=False),
    Case("assert_op", lambda R, x: R.assert_op(R.greater(R.sum(x), R.const(0.0)), [x], "bad"),
         [t("n", 3)], "[]", tvm=False),
]


test_infer, test_same_as_tvm, *_ = family_tests(CASES, [])


def _x():
    return relax.Var("x", relax.TensorStructInfo((4,), F32))


def test_call_tir_keeps_one_sinfo_arg_and_tir_vars():
    out = [relax.TensorStructInfo((4,), F32), relax.TensorStructInfo((2,), "int32")]
    call = relax.op.call_tir(relax.GlobalVar("f"), [_x()], out, tir_vars=[8])
    assert call.op.name == "relax.call_tir"
    assert call.sinfo_args == (relax.TupleStructInfo(out),)
    assert isinstance(call.args[1], relax.Tuple) and call.args[2] == relax.ShapeExpr([8])


def test_args_given_as_a_tuple_var_are_not_wrapped():
    args = relax.Var("args", relax.TupleStructInfo([relax.TensorStructInfo((4,), F32)]))
    call = relax.op.call_tir(relax.GlobalVar("f"), args, relax.TensorStructInfo((4,), F32))
    assert call.args[1] is args
    assert isinstance(relax.op.call_tir(relax.GlobalVar("f"), _x(), args.struct_info.fields[0])
                      .args[1], relax.Tuple)


def test_packed_calls_take_a_symbol_or_extern_func():
    sinfo = relax.TensorStructInfo((4,), F32)
    by_name = relax.op.call_pure_packed("f", _x(), ty_args=sinfo)
    by_func = relax.op.call_pure_packed(relax.ExternFunc("f"), _x(), ty_args=sinfo)
    assert by_name.args[0].global_symbol == by_func.args[0].global_symbol == "f"
    assert relax.op.call_dps_packed("g", _x(), sinfo).args[0].global_symbol == "g"


def test_inplace_indices_are_an_attr():
    call = relax.op.call_tir_inplace(relax.GlobalVar("f"), [_x()], 0,
                                     relax.TensorStructInfo((4,), F32))
    assert call.attrs.inplace_indices == (0,)


def test_print_and_assert_arg_order_is_tvms():
    x = _x()
    printed = relax.op.print(x, format="x={}")
    assert isinstance(printed.args[0], relax.StringImm) and printed.args[1] is x
    cond = relax.Var("c", relax.TensorStructInfo((), "bool"))
    checked = relax.op.assert_op(cond, x, format="bad {}")
    assert checked.args[0] is cond and checked.args[1].value == "bad {}" and checked.args[2] is x
    parsed = relax.op.print(x, format=relax.StringImm("x={}"))  # as a parser reads R.str(...)
    assert parsed.args[0].value == "x={}"


def test_output_sinfo_keyword_is_recorded_for_the_printer():
    assert OPS["call_tir"].facts["sinfo_kw"] == "out_ty"
    assert OPS["call_pure_packed"].facts["sinfo_kw"] == "ty_args"


@pytest.mark.parametrize("bad", [None, [], ["not a sinfo"]])
def test_output_sinfo_is_required(bad):
    with pytest.raises(ValidationError, match="call_dps_packed"):
        relax.op.call_dps_packed("f", [_x()], bad)
