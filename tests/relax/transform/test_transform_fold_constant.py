"""FoldConstant: calls on constants are evaluated with the numpy facts, as TVM's pass does."""

import numpy as np
import pytest

from msc import relax
from msc.relax import op
from msc.relax.op.registry import OPS
from msc.relax.transform import FoldConstant


def _tensor(name, shape, dtype="float32"):
    return relax.Var(name, relax.TensorStructInfo(shape, dtype))


def _module(params, body, pure=True, dataflow=True):
    """main(params) whose bindings body(bb) emits; body returns the output."""
    bb = relax.BlockBuilder()
    with bb.function("main", params, pure=pure):
        if dataflow:
            with bb.dataflow():
                out = bb.emit_output(body(bb))
        else:
            out = body(bb)
        bb.emit_func_output(out)
    return bb.get()


def _bindings(mod):
    return [b for blk in mod["main"].body.blocks for b in blk.bindings]


def _ops(mod):
    return [b.value.op.name for b in _bindings(mod) if isinstance(b.value, relax.Call)]


def _output(mod):
    return mod["main"].body.body


def _fold_to_constant(expr_fn):
    """Fold main() = expr_fn() and return the constant the function now returns."""
    mod = FoldConstant()(_module([], lambda bb: bb.emit(expr_fn())))
    out = _output(mod)
    assert isinstance(out, relax.Constant), f"not folded: {_ops(mod)}"
    assert _bindings(mod) == []
    return out.data


C1 = np.arange(6, dtype="float32").reshape(2, 3)
C2 = np.full((2, 3), 0.5, "float32")


@pytest.mark.parametrize("name, build, expected", [
    ("add", lambda: op.add(relax.const(C1), relax.const(C2)), C1 + C2),
    ("reshape", lambda: op.reshape(relax.const(C1), (3, 2)), C1.reshape(3, 2)),
    ("permute_dims", lambda: op.permute_dims(relax.const(C1)), C1.T),
    ("permute_axes", lambda: op.permute_dims(relax.const(C1[None]), [2, 0, 1]),
     C1[None].transpose(2, 0, 1)),
    ("nested", lambda: op.exp(op.multiply(relax.const(C1), relax.const(C2))), np.exp(C1 * C2)),
])
def test_folds_to_the_numpy_value(name, build, expected):
    got = _fold_to_constant(build)
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-6)


@pytest.mark.parametrize("build, dtype, expected", [
    (lambda: op.divide(relax.const(np.array([7, -7], "int32")), relax.const(
        np.array([2, 2], "int32"))), "int32", [3, -3]),
    (lambda: op.mean(relax.const(np.array([[1, 2], [3, 5]], "int32")), axis=1), "int32",
     [1, 4]),
    (lambda: op.add(relax.const(np.array([1.5], "float16")), relax.const(
        np.array([2.25], "float16"))), "float16", [3.75]),
    (lambda: op.less(relax.const(C1), relax.const(C2)), "bool", (C1 < C2).tolist()),
    (lambda: op.astype(relax.const(C1), "int8"), "int8", C1.astype("int8").tolist()),
])
def test_folding_keeps_the_inferred_dtype(build, dtype, expected):
    got = _fold_to_constant(build)
    assert str(got.dtype) == dtype
    np.testing.assert_array_equal(got, np.asarray(expected, dtype))


def test_constant_chain_feeding_a_variable_op():
    """The module TVM's FoldConstant docs use: the constant part folds, the rest stays."""
    x, w = _tensor("x", (2, 3)), _tensor("w", (2, 3))
    c1, c2 = relax.const(C1), relax.const(np.ones((2, 3), "float32"))

    def body(bb):
        a = bb.emit(op.add(c1, c2))
        b = bb.emit(op.multiply(a, c2))
        d = bb.emit(op.permute_dims(bb.emit(op.reshape(b, (3, 2)))))
        e = bb.emit(op.add(x, d))
        bb.emit(op.add(x, w))  # dead: removed, as TVM's FoldConstant does
        return op.add(e, w)

    mod = _module([x, w], body)
    before = _ops(mod)
    folded = FoldConstant()(mod)
    assert _ops(folded) == ["relax.add", "relax.add"]
    first = _bindings(folded)[0].value
    assert first.args[0] is x
    np.testing.assert_array_equal(first.args[1].data, ((C1 + 1) * 1).reshape(3, 2).T)
    assert _ops(mod) == before  # the input module is unchanged


def test_onnx_style_shape_subgraph_folds_into_a_static_reshape():
    """Shape -> Gather -> Unsqueeze -> Concat(-1) -> Reshape, as ONNX CNN exports flatten."""
    x = _tensor("x", (1, 3, 4, 4))
    shape = relax.const(np.array([1, 3, 4, 4], "int64"))

    def body(bb):
        batch = bb.emit(op.take(shape, relax.const(np.array(0, "int64")), axis=0))
        dims = bb.emit(op.concat([bb.emit(op.expand_dims(batch, [0])),
                                  relax.const(np.array([-1], "int64"))]))
        new_shape = bb.emit(op.tensor_to_shape(dims))
        return op.reshape(x, new_shape)

    mod = _module([x], body)
    assert _bindings(mod)[-1].var.struct_info.values is None  # unknown before folding
    folded = FoldConstant()(mod)
    assert _ops(folded) == ["relax.reshape"]
    reshape = _bindings(folded)[0]
    assert reshape.value.args[1] == relax.ShapeExpr([1, -1])
    assert reshape.var.struct_info == relax.TensorStructInfo((1, 48), "float32")
    assert folded["main"].ret_struct_info == relax.TensorStructInfo((1, 48), "float32")


def test_tuple_results_and_get_item_fold():
    data = np.arange(6, dtype="float32")

    def body(bb):
        parts = bb.emit(op.split(relax.const(data), 2))
        first = bb.emit(relax.TupleGetItem(parts, 1))
        return op.add(first, relax.const(np.float32(1)))

    folded = FoldConstant()(_module([], body))
    assert _bindings(folded) == []
    np.testing.assert_array_equal(_output(folded).data, data[3:] + 1)


def test_non_constant_calls_stay():
    x = _tensor("x", (2, 3))
    mod = _module([x], lambda bb: op.add(x, relax.const(C1)))
    assert _ops(FoldConstant()(mod)) == ["relax.add"]


def test_ops_without_a_numpy_fact_stay():
    assert "numpy" not in OPS["nn.dropout"].facts
    mod = _module([], lambda bb: relax.TupleGetItem(bb.emit(op.nn.dropout(relax.const(C1))), 0))
    assert _ops(FoldConstant()(mod)) == ["relax.nn.dropout"]


def test_calls_into_functions_and_impure_ops_stay():
    const = relax.const(C1)
    sinfo = relax.TensorStructInfo((2, 3), "float32")

    def body(bb):
        bb.emit(op.print(const, format="{}"))
        packed = bb.emit(op.call_pure_packed("my_func", const, ty_args=sinfo))
        dps = bb.emit(op.call_dps_packed("my_dps", [const], sinfo))
        return relax.Tuple([packed, dps])

    mod = _module([], body, pure=False, dataflow=False)
    assert _ops(FoldConstant()(mod)) == ["relax.print", "relax.call_pure_packed",
                                         "relax.call_dps_packed"]


def test_bfloat16_results_are_not_folded():
    mod = _module([], lambda bb: op.astype(relax.const(C1), "bfloat16"))
    assert _ops(FoldConstant()(mod)) == ["relax.astype"]


def test_a_failing_reference_warns_and_leaves_the_call(monkeypatch):
    def broken(args, attrs):
        raise RuntimeError("boom")

    monkeypatch.setitem(OPS["sign"].facts, "numpy", broken)
    mod = _module([], lambda bb: op.sign(relax.const(C1)))
    with pytest.warns(UserWarning, match="sign was not folded: boom"):
        folded = FoldConstant()(mod)
    assert _ops(folded) == ["relax.sign"]


def test_a_reference_with_the_wrong_shape_is_not_trusted(monkeypatch):
    monkeypatch.setitem(OPS["negative"].facts, "numpy", lambda args, attrs: args[0].ravel())
    mod = _module([], lambda bb: op.negative(relax.const(C1)))
    with pytest.warns(UserWarning, match="inference says"):
        assert _ops(FoldConstant()(mod)) == ["relax.negative"]


def test_idempotent():
    x = _tensor("x", (2, 3))
    mod = _module([x], lambda bb: op.add(x, bb.emit(op.exp(relax.const(C1)))))
    once = FoldConstant()(mod)
    twice = FoldConstant()(once)
    assert twice["main"] is once["main"]
    assert _ops(twice) == ["relax.add"]


def test_bfloat16_is_not_folded_even_when_ml_dtypes_is_loaded():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert np.dtype(ml_dtypes.bfloat16).kind == "V"
    mod = _module([], lambda bb: op.astype(relax.const(C1), "bfloat16"))
    assert _ops(FoldConstant()(mod)) == ["relax.astype"]
