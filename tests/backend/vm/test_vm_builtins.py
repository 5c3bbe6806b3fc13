"""The VM runs every runtime op (calls into other code, effects, runtime objects) itself, and
the builtins behave like TVM's. (That every other op is compiled: tests/relax/op/test_op_facts.py.)"""

import numpy as np
import pytest

from msc import relax
from msc.backend.dispatch.callouts import SPECIAL
from msc.errors import BuildError, RuntimeCallError
from msc.relax import op as R
from msc.relax.op.registry import ops_with
from msc.tir import expr as tir

F32 = "float32"

def test_every_runtime_op_is_a_vm_builtin():
    assert sorted(SPECIAL) == sorted(ops_with("runtime"))


def _tensor(shape, dtype=F32):
    return relax.TensorStructInfo(shape, dtype)


def _run(params, body, *args, **kw):
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        out = body(bb, *params)
        bb.emit_func_output(out)
    ex = relax.build(bb.get(), **kw)
    return relax.VirtualMachine(ex, relax.cpu())["main"](*args), ex


def test_print_runs_in_order_and_is_not_dropped(capsys):
    x = relax.Var("x", _tensor((2,)))

    def body(bb, x):
        bb.emit(R.print(x, format="x = {}"))
        return bb.emit(R.nn.relu(x))

    out, ex = _run([x], body, np.array([-1.0, 2.0], F32))
    assert capsys.readouterr().out == "x = [-1.  2.]\n"
    np.testing.assert_array_equal(out.numpy(), [0.0, 2.0])
    assert ex.stats["ops"]["print"] == {"builtin": 1}


@pytest.mark.parametrize("ok", [True, False])
def test_assert_op_raises_with_the_formatted_message(ok):
    x = relax.Var("x", _tensor((3,)))

    def body(bb, x):
        cond = bb.emit(R.min(R.greater(x, relax.const(np.float32(0)))))
        bb.emit(R.assert_op(cond, [x], format="x must be positive, got {}"))
        return bb.emit(R.sqrt(x))

    data = np.array([1.0, 4.0, 9.0 if ok else -9.0], F32)
    if ok:
        np.testing.assert_allclose(_run([x], body, data)[0].numpy(), np.sqrt(data))
    else:
        with pytest.raises(RuntimeCallError, match=r"x must be positive, got \[ 1\.  4\. -9\.\]"):
            _run([x], body, data)


def _add_one_inplace():
    from msc.tir.function import Buffer, BufferLoad, BufferStore, For, PrimFunc

    n = tir.Var("n", "int64")
    a = Buffer("A", (n,), F32)
    i = tir.Var("i", "int64")
    body = For(i, tir.IntImm(0), n, "serial",
               BufferStore(a, BufferLoad(a, (i,)) + tir.FloatImm(1.0), (i,)))
    return PrimFunc((a,), body, name="add_one_inplace")


def test_call_tir_inplace_never_changes_the_callers_array():
    bb = relax.BlockBuilder()
    gv = bb.add_func(_add_one_inplace(), "add_one_inplace")
    x = relax.Var("x", _tensor((4,)))
    with bb.function("main", [x]):
        y = bb.emit(R.call_tir_inplace(gv, [x], [0], _tensor((4,))))
        bb.emit_func_output(bb.emit(R.multiply(y, x)))
    ex = relax.build(bb.get())
    data = np.arange(4, dtype=F32)
    out = relax.VirtualMachine(ex)["main"](data).numpy()
    np.testing.assert_array_equal(out, (np.arange(4) + 1.0) * np.arange(4))
    np.testing.assert_array_equal(data, np.arange(4))  # the input is untouched


def test_call_tir_inplace_checks_its_indices():
    bb = relax.BlockBuilder()
    gv = bb.add_func(_add_one_inplace(), "add_one_inplace")
    x = relax.Var("x", _tensor((4,)))
    with bb.function("main", [x]):
        y = bb.emit(R.call_tir_inplace(gv, [x], [3], _tensor((4,))))
        bb.emit_func_output(y)
    with pytest.raises(BuildError, match="inplace_indices"):
        relax.build(bb.get())


def test_call_inplace_packed_and_builtin_with_ctx():
    seen = []

    @relax.register_func("test.builtins.scale_inplace", override=True)
    def scale_inplace(a, k):
        a *= k
        seen.append(a)
        return a

    @relax.register_func("test.builtins.total", override=True)
    def total(a):
        return np.asarray(a.sum(), dtype=F32)

    x = relax.Var("x", _tensor((3,)))

    def body(bb, x):
        y = bb.emit(R.call_inplace_packed("test.builtins.scale_inplace", x,
                                      relax.const(np.float32(3)), inplace_indices=[0],
                                      ty_args=[_tensor((3,))]))
        return bb.emit(R.call_builtin_with_ctx("test.builtins.total", [y],
                                         ty_args=[_tensor(())]))

    data = np.array([1.0, 2.0, 3.0], F32)
    out, _ = _run([x], body, data)
    assert float(out.numpy()) == 18.0
    np.testing.assert_array_equal(data, [1.0, 2.0, 3.0])  # scaled a copy, not the input
    assert len(seen) == 1 and seen[0] is not data


def test_null_value_is_an_object():
    x = relax.Var("x", _tensor((2,)))

    def body(bb, x):
        return bb.emit(relax.Tuple([bb.emit(R.nn.relu(x)), bb.emit(R.null_value())]))

    out, _ = _run([x], body, np.ones(2, F32))
    assert out[1] is None
