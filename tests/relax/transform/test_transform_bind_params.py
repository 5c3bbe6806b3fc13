"""BindParams: parameters become constants; the signature and num_input follow."""

import numpy as np
import pytest

from msc import relax, tir
from msc.errors import ShapeError, ValidationError
from msc.relax import op
from msc.relax.transform import BindParams, FoldConstant, Sequential


def _tensor(name, shape, dtype="float32"):
    return relax.Var(name, relax.TensorStructInfo(shape, dtype))


def _linear(x_shape=(2, 3), num_input=1):
    """main(x, w, b) = matmul(x, w) + b with num_input = 1 (x is the data input)."""
    x, w, b = _tensor("x", x_shape), _tensor("w", (3, 4)), _tensor("b", (4,))
    bb = relax.BlockBuilder()
    attrs = {"num_input": num_input} if num_input is not None else None
    with bb.function("main", [x, w, b], attrs=attrs):
        with bb.dataflow():
            mm = bb.emit(op.matmul(x, w))
            gv = bb.emit_output(op.add(mm, b))
        bb.emit_func_output(gv)
    return bb.get()


def _bindings(mod):
    return [b for blk in mod["main"].body.blocks for b in blk.bindings]


W = np.arange(12, dtype="float32").reshape(3, 4)
B = np.ones(4, "float32")


def test_bind_by_name_replaces_params_with_constants():
    mod = _linear()
    bound = BindParams("main", {"w": W, "b": B})(mod)
    func = bound["main"]
    assert [p.name_hint for p in func.params] == ["x"]
    mm, add = (b.value for b in _bindings(bound))
    assert isinstance(mm.args[1], relax.Constant)
    np.testing.assert_array_equal(mm.args[1].data, W)
    np.testing.assert_array_equal(add.args[1].data, B)
    assert func.struct_info.params == (relax.TensorStructInfo((2, 3), "float32"),)
    assert func.attrs["num_input"] == 1
    assert [p.name_hint for p in mod["main"].params] == ["x", "w", "b"]  # input unchanged


def test_bind_by_var():
    mod = _linear()
    w_var = mod["main"].params[1]
    bound = BindParams("main", {w_var: W})(mod)
    assert [p.name_hint for p in bound["main"].params] == ["x", "b"]


def test_binding_an_input_lowers_num_input():
    bound = BindParams("main", {"x": np.zeros((2, 3), "float32"), "w": W})(_linear())
    assert [p.name_hint for p in bound["main"].params] == ["b"]
    assert bound["main"].attrs["num_input"] == 0


def test_without_num_input_no_attr_appears():
    bound = BindParams("main", {"w": W})(_linear(num_input=None))
    assert "num_input" not in bound["main"].attrs


def test_constants_and_arrays_with_numpy_method_are_accepted():
    class Holder:
        def numpy(self):
            return W

    bound = BindParams("main", {"w": Holder(), "b": relax.const(B)})(_linear())
    np.testing.assert_array_equal(_bindings(bound)[0].value.args[1].data, W)


def test_wrong_shape_raises_shape_error_naming_the_param():
    with pytest.raises(ShapeError, match="param 'w'.*dim 1 is 4, the array has 5"):
        BindParams("main", {"w": np.zeros((3, 5), "float32")})(_linear())


def test_wrong_rank_and_dtype_raise_shape_error():
    with pytest.raises(ShapeError, match="param 'b'.*rank 1"):
        BindParams("main", {"b": np.zeros((4, 1), "float32")})(_linear())
    with pytest.raises(ShapeError, match="param 'b'.*dtype float32, got int32"):
        BindParams("main", {"b": np.zeros(4, "int32")})(_linear())


def test_unknown_names_and_functions_are_reported():
    with pytest.raises(ValidationError, match="no parameter named 'weight'.*x, w, b"):
        BindParams("main", {"weight": W})(_linear())
    with pytest.raises(ValidationError, match="no Relax function 'forward'"):
        BindParams("forward", {"w": W})(_linear())


def test_symbolic_dims_are_fixed_by_the_bound_array():
    n = tir.Var("n")
    x, w = _tensor("x", (n, 3)), _tensor("w", (n, 3))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            gv = bb.emit_output(op.add(x, w))
        bb.emit_func_output(gv)
    bound = BindParams("main", {"w": np.ones((2, 3), "float32")})(bb.get())
    func = bound["main"]
    assert func.params[0].struct_info == relax.TensorStructInfo((2, 3), "float32")
    assert _bindings(bound)[0].var.struct_info == relax.TensorStructInfo((2, 3), "float32")
    assert func.ret_struct_info == relax.TensorStructInfo((2, 3), "float32")


def test_inconsistent_symbolic_dims_are_a_shape_error():
    n = tir.Var("n")
    a, b = _tensor("a", (n,)), _tensor("b", (n,))
    bb = relax.BlockBuilder()
    with bb.function("main", [a, b]):
        bb.emit_func_output(op.add(a, b))
    with pytest.raises(ShapeError, match="param 'b'"):
        BindParams("main", {"a": np.ones(2, "float32"), "b": np.ones(3, "float32")})(bb.get())


def test_bind_then_fold_computes_the_whole_constant_graph():
    mod = Sequential([BindParams("main", {"x": np.ones((2, 3), "float32"), "w": W, "b": B}),
                      FoldConstant()])(_linear())
    out = mod["main"].body.body
    np.testing.assert_allclose(out.data, np.ones((2, 3), "float32") @ W + B)
    assert mod["main"].params == ()


def test_empty_binding_is_a_no_op_and_bound_params_are_gone():
    mod = _linear()
    assert BindParams("main", {})(mod)["main"] is mod["main"]
    once = BindParams("main", {"w": W})(mod)
    with pytest.raises(ValidationError, match="no parameter named 'w'"):
        BindParams("main", {"w": W})(once)


def test_bfloat16_weights_saved_by_np_savez_bind_as_bfloat16(tmp_path):
    """np.savez keeps ml_dtypes arrays as untyped void items (V2 for bfloat16): bound to a
    bfloat16 parameter they are read as bfloat16, bit for bit; a float32 one still refuses."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    w = np.array([[1.5, -2.0], [0.25, 3.0]], dtype=ml_dtypes.bfloat16)
    np.savez(tmp_path / "w.npz", w=w)
    with np.load(tmp_path / "w.npz", allow_pickle=False) as data:
        raw = data["w"]
    assert raw.dtype.kind == "V" and raw.dtype.itemsize == 2
    x, wv = _tensor("x", (2, 2), "bfloat16"), _tensor("w", (2, 2), "bfloat16")
    bb = relax.BlockBuilder()
    with bb.function("main", [x, wv], attrs={"num_input": 1}):
        with bb.dataflow():
            gv = bb.emit_output(op.add(x, wv))
        bb.emit_func_output(gv)
    bound = BindParams("main", {"w": raw})(bb.get())
    (const,) = [b.value.args[1] for b in _bindings(bound)]
    assert const.data.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(const.data.astype(np.float32), w.astype(np.float32))
    with pytest.raises(ShapeError, match="expects dtype float32"):
        BindParams("main", {"w": raw})(_linear())  # 2-byte items are no float32
