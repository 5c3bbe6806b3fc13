"""Relax core: expressions, struct info, the op registry and the BlockBuilder."""

import inspect

import numpy as np
import pytest

from msc import relax, tir
from msc.errors import ShapeError, UnsupportedOpError, ValidationError
from msc.relax.op import registry


def _tensor(name, shape, dtype="float32"):
    return relax.Var(name, relax.TensorStructInfo(shape, dtype))


def _build(params, body):
    """Build main(params) whose dataflow block is produced by body(bb) -> output var."""
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(body(bb))
        bb.emit_func_output(out)
    return bb.get()


def _bindings(mod, name="main"):
    return [b for blk in mod[name].body.blocks for b in blk.bindings]


def test_emit_names_and_infers_once():
    n = tir.Var("n")
    x, y = _tensor("x", (n, 4)), _tensor("y", (4,))
    mod = _build([x, y], lambda bb: bb.emit(relax.op.multiply(relax.op.exp(
        bb.emit(relax.op.add(x, y))), 2.0)))
    binds = _bindings(mod)
    assert [b.var.name_hint for b in binds] == ["lv", "lv1", "lv2", "gv"]
    assert [type(b.var).__name__ for b in binds] == ["DataflowVar"] * 3 + ["Var"]
    assert binds[-1].var.struct_info == relax.TensorStructInfo((n, 4), "float32")
    assert binds[2].value.op.name == "relax.multiply"  # nested exp was bound first (lv1)
    assert binds[1].value.op.name == "relax.exp"


def test_scalar_argument_becomes_constant_of_its_kind():
    x = _tensor("x", (2,))
    mod = _build([x], lambda bb: relax.op.add(x, 1.5))
    const = _bindings(mod)[0].value.args[1]
    assert isinstance(const, relax.Constant) and const.data.dtype == np.float32


def test_broadcast_error_names_op():
    x, z = _tensor("x", (2, 4)), _tensor("z", (3,))
    with pytest.raises(ShapeError, match="op 'add'.*4 vs 3"):
        _build([x, z], lambda bb: relax.op.add(x, z))


def test_dtype_mismatch_is_an_error():
    x, z = _tensor("x", (2,)), _tensor("z", (2,), "int32")
    with pytest.raises(ShapeError, match="different dtypes"):
        _build([x, z], lambda bb: relax.op.add(x, z))


def test_compare_gives_bool():
    x = _tensor("x", (2, 3))
    mod = _build([x], lambda bb: relax.op.less(x, x))
    assert _bindings(mod)[-1].var.struct_info.dtype == "bool"


def test_builders_have_tvm_signatures():
    assert list(inspect.signature(relax.op.add).parameters) == ["x1", "x2"]
    assert relax.op.add.__name__ == "add"


def test_unknown_op_suggests_close_names():
    with pytest.raises(UnsupportedOpError, match="did you mean.*subtract"):
        registry.get_op("subtrac")


def test_bad_arguments_name_the_op():
    with pytest.raises(ValidationError, match="R.add"):
        relax.op.add(_tensor("x", (1,)))


def test_register_twice_is_refused():
    with pytest.raises(ValidationError, match="registered twice"):
        registry.register("add", [registry.Arg("x")], infer=lambda ctx: None)


def test_attach_and_ops_missing():
    registry.attach("abs", "_probe_fact", 1)
    try:
        missing = registry.ops_missing("_probe_fact")
        assert "abs" not in missing and "add" in missing
    finally:
        del registry.get_op("abs").facts["_probe_fact"]


def test_tuple_output_and_get_item():
    x = _tensor("x", (2, 3))

    def body(bb):
        t = bb.emit(relax.Tuple([x, relax.op.exp(x)]))
        return t[1]

    mod = _build([x], body)
    out = _bindings(mod)[-1]
    assert isinstance(out.value, relax.TupleGetItem) and out.value.index == 1
    assert out.var.struct_info == relax.TensorStructInfo((2, 3), "float32")


def test_function_signature_and_module():
    x = _tensor("x", (1, 8))
    mod = _build([x], lambda bb: relax.op.tanh(x))
    func = mod["main"]
    assert func.params == (x,) and func.attrs["global_symbol"] == "main"
    assert isinstance(func.struct_info, relax.FuncStructInfo)
    assert [gv.name_hint for gv in mod.get_global_vars()] == ["main"]
    with pytest.raises(ValidationError, match="no function 'nope'"):
        mod["nope"]


def test_builder_misuse_is_reported():
    bb = relax.BlockBuilder()
    x = _tensor("x", (1,))
    with pytest.raises(ValidationError, match="outside of bb.function"):
        bb.emit(relax.op.abs(x))
    with pytest.raises(ValidationError, match="no output"), bb.function("f", [x]):
        bb.emit(relax.op.abs(x))


def test_exprs_are_immutable():
    x = _tensor("x", (1,))
    with pytest.raises(AttributeError, match="immutable"):
        x.name_hint = "y"
    sinfo = x.struct_info
    with pytest.raises(AttributeError):
        sinfo.dtype = "int8"


def test_constant_keeps_numpy_buffer():
    data = np.arange(6, dtype="float32").reshape(2, 3)
    c = relax.const(data)
    assert c.data is data
    assert c.struct_info == relax.TensorStructInfo((2, 3), "float32")
    assert relax.const(1, "int32").struct_info.dtype == "int32"
