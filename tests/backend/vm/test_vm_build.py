"""relax.build: lowering, fusion, memory planning, stats, dtypes and the missing-op report."""

import numpy as np
import pytest

from msc import relax
from msc.backend.dispatch.resolve import MissingKernelError
from msc.backend.legalize import legalized_ops
from msc.errors import BuildError, ShapeError
from msc.relax import op as R
from msc.relax.op.registry import OPS, Arg, register
from msc.tir import expr as tir
from tests.helpers.relax_modules import one_function_module as _module
from tests.helpers.relax_modules import tensor as _tensor

F32 = "float32"
RNG = np.random.default_rng(0)


def _run(mod, *args, **kw):
    ex = relax.build(mod, **kw)
    return relax.VirtualMachine(ex, relax.cpu())["main"](*args), ex


def _chain(width: int, depth: int, batch: int = 4):
    """x @ w_i, relu, ``depth`` times: every intermediate has the same size."""
    ws = [RNG.standard_normal((width, width), F32) / 8 for _ in range(depth)]
    x = relax.Var("x", _tensor((batch, width)))

    def body(bb, x):
        h = x
        for w in ws[:-1]:
            h = bb.emit(R.nn.relu(bb.emit(R.matmul(h, relax.const(w)))))
        return R.matmul(h, relax.const(ws[-1]))

    def ref(xv):
        h = xv
        for w in ws[:-1]:
            h = np.maximum(h @ w, 0)
        return h @ ws[-1]
    return _module([x], body), ref


# ---------------------------------------------------------------------------------------------
# Memory planning.


def test_plan_reuses_buffers_on_a_chain():
    mod, ref = _chain(64, 6)
    out, ex = _run(mod, x := RNG.standard_normal((4, 64), F32))
    np.testing.assert_allclose(out.numpy(), ref(x), rtol=1e-4, atol=1e-4)
    mem = ex.stats["memory"]
    assert mem["buffers"] == 5  # the 6th matmul writes the (fresh) result
    assert mem["peak_bytes"] == 2 * 4 * 64 * 4 < mem["planned_bytes"] == 5 * 4 * 64 * 4
    assert mem["fresh_bytes"] == 4 * 64 * 4
    assert ex.stats["fused"] == {"matmul+nn.relu": 5}


def test_results_are_not_clobbered_by_the_next_call():
    mod, ref = _chain(32, 4)
    vm = relax.VirtualMachine(relax.build(mod))
    x1, x2 = RNG.standard_normal((2, 4, 32), F32)
    first = vm["main"](x1).numpy()
    kept = first.copy()
    second = vm["main"](x2).numpy()
    np.testing.assert_array_equal(first, kept)
    assert not np.shares_memory(first, second)
    np.testing.assert_allclose(second, ref(x2), rtol=1e-4, atol=1e-4)


def test_intermediate_that_is_also_an_output_is_fresh():
    w = RNG.standard_normal((8, 8), F32)
    x = relax.Var("x", _tensor((2, 8)))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(R.matmul(x, relax.const(w)))
            b = bb.emit(R.matmul(a, relax.const(w)))
            c = bb.emit(R.matmul(b, relax.const(w)))
            out = bb.emit_output(relax.Tuple([a, c]))
        bb.emit_func_output(out)
    ex = relax.build(bb.get())
    vm = relax.VirtualMachine(ex)
    xv = RNG.standard_normal((2, 8), F32)
    a1, c1 = (r.numpy() for r in vm["main"](xv))
    vm["main"](xv * 2)
    np.testing.assert_allclose(a1, xv @ w, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(c1, xv @ w @ w @ w, rtol=1e-4, atol=1e-4)


def test_numpy_view_keeps_its_buffer_alive():
    """reshape (numpy, may return a view) of a native result extends the buffer's life."""
    w = RNG.standard_normal((6, 6), F32)
    x = relax.Var("x", _tensor((2, 6)))

    def body(bb, x):
        a = bb.emit(R.matmul(x, relax.const(w)))
        view = bb.emit(R.reshape(a, (3, 4)))
        b = bb.emit(R.matmul(x, relax.const(w * 2)))  # must not land in a's buffer
        c = bb.emit(R.matmul(b, relax.const(w)))
        return R.add(R.reshape(view, (2, 6)), c)

    out, _ = _run(_module([x], body), xv := RNG.standard_normal((2, 6), F32))
    np.testing.assert_allclose(out.numpy(), xv @ w + (xv @ (w * 2)) @ w, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------------------------
# Lowering: params, nested functions, If, match_cast, dead code.


def test_params_bind_constants_by_name():
    x, w = relax.Var("x", _tensor((2, 3))), relax.Var("w", _tensor((3, 4)))
    mod = _module([x, w], lambda bb, x, w: R.matmul(x, w))
    wv = RNG.standard_normal((3, 4), F32)
    ex = relax.build(mod, params={"w": wv})
    assert ex.stats["ops"] == {"matmul": {"native": 1}}  # constant weight: prepacked
    out = relax.VirtualMachine(ex)["main"](xv := RNG.standard_normal((2, 3), F32))
    np.testing.assert_allclose(out.numpy(), xv @ wv, rtol=1e-5, atol=1e-5)


def test_nested_function_is_inlined_with_its_dims_renamed():
    m, n = tir.Var("m", "int64"), tir.Var("n", "int64")
    w = RNG.standard_normal((8, 8), F32)
    bb = relax.BlockBuilder()
    a = relax.Var("a", _tensor((m, 8)))
    with bb.function("helper", [a]):
        with bb.dataflow():
            h = bb.emit(R.matmul(a, relax.const(w)))
            out = bb.emit_output(R.nn.relu(R.reshape(h, (m * 8,))))
        bb.emit_func_output(out)
    helper = bb.get().get_global_var("helper")
    x = relax.Var("x", _tensor((n, 8)))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.Call(helper, [x]))
            out = bb.emit_output(R.add(y, y))
        bb.emit_func_output(out)
    ex = relax.build(bb.get())
    vm = relax.VirtualMachine(ex)
    for size in (1, 3):
        xv = RNG.standard_normal((size, 8), F32)
        np.testing.assert_allclose(vm["main"](xv).numpy(),
                                   2 * np.maximum(xv @ w, 0).reshape(-1), rtol=1e-5, atol=1e-5)
    mem = ex.stats["memory"]  # the inlined kernels were planned from the caller's dims
    assert mem["buffers"] >= 1 and mem["dynamic_buffers"] == 0
    np.testing.assert_allclose(vm["helper"](xv).numpy(), np.maximum(xv @ w, 0).reshape(-1),
                               rtol=1e-5, atol=1e-5)


def test_if_with_scalar_condition():
    c, x = relax.Var("c", _tensor((), "bool")), relax.Var("x", _tensor((3,)))
    bb = relax.BlockBuilder()
    with bb.function("main", [c, x]):
        then = relax.SeqExpr([], bb.normalize(R.multiply(x, relax.const(2.0))))
        other = relax.SeqExpr([], bb.normalize(R.add(x, relax.const(1.0))))
        y = relax.Var("y", _tensor((3,)))  # the BlockBuilder does not infer If
        bb.emit_normalized(relax.VarBinding(y, relax.If(c, then, other)))
        bb.emit_func_output(bb.emit(R.negative(y)))
    vm = relax.VirtualMachine(relax.build(bb.get()))
    xv = np.arange(3, dtype=F32)
    np.testing.assert_array_equal(vm["main"](np.array(True), xv).numpy(), -(xv * 2))
    np.testing.assert_array_equal(vm["main"](np.array(False), xv).numpy(), -(xv + 1))


def test_match_cast_binds_dims_at_run_time():
    w = RNG.standard_normal((4, 5), F32)
    m = tir.Var("m", "int64")
    x = relax.Var("x", relax.TensorStructInfo(None, F32, ndim=2))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            lv = bb.match_cast(x, _tensor((m, 4)))
            out = bb.emit_output(R.matmul(lv, relax.const(w)))
        bb.emit_func_output(out)
    ex = relax.build(bb.get())
    vm = relax.VirtualMachine(ex)
    xv = RNG.standard_normal((3, 4), F32)
    np.testing.assert_allclose(vm["main"](xv).numpy(), xv @ w, rtol=1e-5, atol=1e-5)
    assert ex.stats["ops"]["matmul"] == {"native": 1}
    assert ex.stats["memory"]["dynamic_buffers"] == 1  # sized from m when the node runs
    with pytest.raises(ShapeError, match=r"\(m, 4\)"):
        vm["main"](np.ones((3, 5), F32))


def test_dead_bindings_are_dropped():
    x = relax.Var("x", _tensor((2,)))

    def body(bb, x):
        bb.emit(R.exp(x))  # unused
        return R.negative(x)

    _, ex = _run(_module([x], body), np.ones(2, F32))
    assert list(ex.stats["ops"]) == ["negative"] and sum(ex.stats["kernels"].values()) == 1


def test_missing_ops_are_listed_together():
    names = ["test_vm.nokernel_a", "test_vm.nokernel_b"]
    for name in names:
        register(name, [Arg("data")], infer=lambda ctx: ctx.tensor(0))
    try:
        x = relax.Var("x", _tensor((2,)))

        def body(bb, x):
            a = bb.emit(relax.op.make_call(names[0], x))
            b = bb.emit(relax.op.make_call(names[1], a))
            return relax.op.make_call(names[0], b)

        with pytest.raises(MissingKernelError) as err:
            relax.build(_module([x], body))
        assert isinstance(err.value, BuildError)
        assert [(i["op"], i["count"]) for i in err.value.items] == [(names[0], 2),
                                                                     (names[1], 1)]
        assert names[0] in str(err.value) and names[1] in str(err.value)
    finally:
        for name in names:
            OPS.pop(name, None)


def test_build_rejects_other_targets_and_inputs():
    x = relax.Var("x", _tensor((2,)))
    mod = _module([x], lambda bb, x: R.negative(x))
    with pytest.raises(BuildError, match="cuda"):
        relax.build(mod, target="cuda")
    with pytest.raises(BuildError, match="IRModule"):
        relax.build("not a module")
    ex = relax.build(mod["main"])  # a bare function is built as "main"
    assert "main" in ex.programs


# ---------------------------------------------------------------------------------------------
# Dtypes.


@pytest.mark.parametrize("dtype", ["float64", "int8", "uint8", "int32", "int64"])
def test_integer_and_double_dtypes(dtype):
    x, y = relax.Var("x", _tensor((2, 3), dtype)), relax.Var("y", _tensor((2, 3), dtype))
    mod = _module([x, y], lambda bb, x, y: R.maximum(R.add(x, y), R.multiply(x, y)))
    xv = RNG.integers(0, 5, (2, 3)).astype(dtype)
    yv = RNG.integers(0, 5, (2, 3)).astype(dtype)
    out, _ = _run(mod, xv, yv)
    assert out.numpy().dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out.numpy(), np.maximum(xv + yv, xv * yv))


def test_bool_dtype():
    x = relax.Var("x", _tensor((4,), "bool"))
    out, _ = _run(_module([x], lambda bb, x: R.logical_not(x)), np.array([1, 0, 1, 0], bool))
    np.testing.assert_array_equal(out.numpy(), [False, True, False, True])


def test_float16_is_computed_in_float32():
    x = relax.Var("x", _tensor((3, 4), "float16"))
    w = RNG.standard_normal((4, 2)).astype("float16")
    out, ex = _run(_module([x], lambda bb, x: R.matmul(x, relax.const(w))),
                   xv := RNG.standard_normal((3, 4)).astype("float16"), legalize="fallback")
    assert out.numpy().dtype == np.float16 and ex.stats["ops"]["matmul"] == {"numpy": 1}
    ref = (xv.astype(F32) @ w.astype(F32)).astype("float16")
    np.testing.assert_array_equal(out.numpy(), ref)


def test_bfloat16():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = ml_dtypes.bfloat16
    x = relax.Var("x", _tensor((4,), "bfloat16"))
    mod = _module([x], lambda bb, x: R.sigmoid(R.multiply(x, x)))
    xv = np.array([0.5, -1, 2, 3], bf16)
    out, _ = _run(mod, xv)
    assert out.numpy().dtype == bf16
    ref = (1 / (1 + np.exp(-np.float32(xv.astype(F32)) ** 2))).astype(bf16)
    np.testing.assert_array_equal(out.numpy(), ref)


def test_bfloat16_torch_input():
    torch = pytest.importorskip("torch")
    pytest.importorskip("ml_dtypes")
    x = relax.Var("x", _tensor((3,), "bfloat16"))
    out, _ = _run(_module([x], lambda bb, x: R.add(x, x)),
                  torch.tensor([1.5, 2, -3], dtype=torch.bfloat16))
    np.testing.assert_array_equal(out.numpy().astype(F32), [3, 4, -6])


@pytest.mark.parametrize("op", ["log", "cos", "negative"])
def test_legalized_tir_kernels(op):
    """legalize="prefer": the op's TIR legalization, compiled to native code, replaces numpy
    (ops without a hand-written kernel: exp and sigmoid have one, kernels/activation.py)."""
    assert op in legalized_ops()
    x = relax.Var("x", _tensor((3, 5)))
    mod = _module([x], lambda bb, x: relax.op.make_call(op, x))
    xv = RNG.standard_normal((3, 5), F32)
    ref = relax.VirtualMachine(relax.build(mod, legalize="never"))["main"](xv).numpy()
    ex = relax.build(mod, legalize="prefer")
    assert ex.stats["ops"][op] == {"tir": 1}
    out = relax.VirtualMachine(ex)["main"](xv).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_legalize_mode_is_checked():
    x = relax.Var("x", _tensor((2,)))
    with pytest.raises(BuildError, match="legalize"):
        relax.build(_module([x], lambda bb, x: R.negative(x)), legalize="sometimes")


@pytest.mark.parametrize("legalize", ["prefer", "fallback"])
def test_folded_scalar_constants_keep_rank_zero(legalize):
    # np.ascontiguousarray turns 0-d arrays into shape (1,): a folded R.full(()) must stay ()
    n = tir.Var("n", "int64")
    x = relax.Var("x", _tensor((n,), "bool"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        f = bb.emit(R.full(relax.ShapeExpr([]), relax.const(True, "bool"), dtype="bool"))
        bb.emit_func_output(bb.emit(R.bitwise_and(x, f)))
    ex = relax.build(bb.get(), legalize=legalize)
    out = relax.VirtualMachine(ex)["main"](np.array([True, False]))
    np.testing.assert_array_equal(out.numpy(), [True, False])
    assert out.numpy().shape == (2,)
