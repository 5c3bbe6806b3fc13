"""from_relax on live ``tvm.IRModule``s: the module goes through its printed TVMScript and
its constants are recovered from the TVM objects (TVM 0.27 cannot print its metadata)."""

import numpy as np
import pytest

from msc import relax as mrelax
from msc.frontends.translate import from_relax
from msc.relax import op as M

tvm = pytest.importorskip("tvm")
from tvm import relax

RNG = np.random.default_rng(1)


def array(*shape):
    return RNG.standard_normal(shape).astype("float32")


def tvm_module(functions):
    """``functions``: [(name, shape, body(bb, x))] built with TVM's BlockBuilder."""
    bb = relax.BlockBuilder()
    for name, shape, body in functions:
        x = relax.Var("x" if name != "main" else "inp_0", relax.TensorType(shape, "float32"))
        with bb.function(name, [x]):
            with bb.dataflow():
                out = bb.emit_output(body(bb, x))
            bb.emit_func_output(out)
    return bb.get()


W, B = array(6, 3, 7, 7), array(6)


def tvm_conv(bb, x):
    conv = bb.emit(relax.op.nn.conv2d(x, relax.const(W), out_dtype="float32"))
    return bb.emit(relax.op.add(conv, bb.emit(relax.op.reshape(relax.const(B), (1, 6, 1, 1)))))


def msc_conv_module():
    x = mrelax.Var("inp_0", mrelax.TensorStructInfo((1, 3, 10, 10), "float32"))
    bb = mrelax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            conv = bb.emit(M.nn.conv2d(x, mrelax.const(W), out_dtype="float32"))
            bias = bb.emit(M.reshape(mrelax.const(B), [1, 6, 1, 1]))
            out = bb.emit_output(M.add(conv, bias))
        bb.emit_func_output(out)
    return bb.get()


def test_tvm_module_translates_like_the_msc_module():
    graph, weights = from_relax(tvm_module([("main", (1, 3, 10, 10), tvm_conv)]))
    expected, expected_weights = from_relax(msc_conv_module())
    assert graph.to_json() == expected.to_json()
    assert list(weights) == list(expected_weights) == ["const", "const_1"]
    np.testing.assert_array_equal(weights["const"], W)
    np.testing.assert_array_equal(weights["const_1"], B)


def test_constants_are_recovered_in_printing_order():
    a, b = array(4), array(4)
    ca = relax.const(a)

    def body(bb, x):
        y = bb.emit(relax.op.add(x, ca))
        y = bb.emit(relax.op.multiply(y, relax.const(2.0, "float32")))  # printed inline
        y = bb.emit(relax.op.subtract(y, relax.const(b)))
        return bb.emit(relax.op.add(y, ca))  # the same constant again

    def helper(k):
        return lambda bb, x: bb.emit(relax.op.add(x, relax.const(np.full(4, k, "float32"))))

    # functions print sorted with main last; each may hold constants
    mod = tvm_module([("zeta", (4,), helper(7)), ("main", (4,), body),
                      ("alpha", (4,), helper(5))])
    graph, weights = from_relax(mod)
    consts = {n.name: n for n in graph.get_nodes() if n.optype == "constant"}
    assert list(consts) == ["const", "const_1", "const_2"]
    assert [n.name for n in consts["const"].children] == ["add", "add_1"]
    np.testing.assert_array_equal(weights["const"], a)
    np.testing.assert_array_equal(weights["const_2"], b)
    assert consts["const_1"].get_attrs() == {"scalar": "2.000000"}


def test_params_may_be_tvm_tensors():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((2, 8), "float32"))
    w = relax.Var("w", relax.TensorType((8, 4), "float32"))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.matmul(x, w))
        bb.emit_func_output(out)
    data = array(8, 4)
    graph, weights = from_relax(bb.get(), params={"w": tvm.runtime.tensor(data)})
    node = graph.find_node("matmul")
    assert node.optype == "msc.linear" and node.weight_at("weight").shape == [4, 8]
    np.testing.assert_array_equal(weights["const"], data.T)


def test_a_misnumbered_constant_is_detected(monkeypatch):
    from msc.errors import ValidationError
    from msc.frontends.relax import tvm_module as adapter

    def helper(k):
        return lambda bb, x: bb.emit(relax.op.add(x, relax.const(np.full(4, k, "float32"))))

    mod = tvm_module([("main", (4,), helper(1)), ("alpha", (4,), helper(2))])
    monkeypatch.setattr(adapter, "_printed_functions", lambda text, names: sorted(names)[::-1])
    with pytest.raises(ValidationError, match="could not match the constants"):
        from_relax(mod)
