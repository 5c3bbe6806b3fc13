"""VirtualMachine: argument checks, dynamic shapes, dlpack, packed functions, TIR, timing."""

import numpy as np
import pytest

from msc import relax
from msc.errors import BuildError, RuntimeCallError, ShapeError, ValidationError
from msc.relax import op as R
from msc.tir import expr as tir
from tests.helpers.relax_modules import one_function_module as _module
from tests.helpers.relax_modules import tensor as _tensor

F32 = "float32"


def _vm(mod, **kw):
    return relax.VirtualMachine(relax.build(mod, **kw), relax.cpu())


@pytest.fixture
def mlp():
    """x: (n, 8) @ w (8, 4) + b, relu; n is symbolic."""
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((8, 4), F32), rng.standard_normal(4).astype(F32)
    n = tir.Var("n", "int64")
    x = relax.Var("x", _tensor((n, 8)))
    mod = _module([x], lambda bb, x: R.nn.relu(R.add(
        bb.emit(R.matmul(x, relax.const(w))), relax.const(b))))
    return mod, lambda xv: np.maximum(xv @ w + b, 0)


# ---------------------------------------------------------------------------------------------
# Argument checks.


def test_dynamic_batch_three_sizes(mlp):
    mod, ref = mlp
    ex = relax.build(mod)
    vm = relax.VirtualMachine(ex, relax.cpu())
    for n in (1, 3, 7):
        x = np.random.default_rng(n).standard_normal((n, 8), F32)
        np.testing.assert_allclose(vm["main"](x).numpy(), ref(x), rtol=1e-5, atol=1e-5)
    assert {key[1] for key in ex.plans()} == {(1,), (3,), (7,)}
    vm["main"](np.ones((3, 8), F32))
    assert len(ex.plans()) == 3  # the plan for n=3 was reused


def test_wrong_shape_names_param_and_shapes(mlp):
    vm = _vm(mlp[0])
    with pytest.raises(ShapeError) as err:
        vm["main"](np.ones((2, 9), F32))
    assert err.value.context["param"] == "x"
    assert "(n, 8)" in str(err.value) and "(2, 9)" in str(err.value)


def test_wrong_dtype_and_rank(mlp):
    vm = _vm(mlp[0])
    with pytest.raises(ShapeError, match="float32.*float64") as err:
        vm["main"](np.ones((2, 8)))
    assert err.value.context["param"] == "x"
    with pytest.raises(ShapeError, match="rank 2"):
        vm["main"](np.ones(8, F32))


def test_wrong_argument_count(mlp):
    vm = _vm(mlp[0])
    with pytest.raises(ShapeError, match="takes 1 arguments"):
        vm["main"]()
    with pytest.raises(ShapeError, match="takes 1 arguments"):
        vm["main"](np.ones((1, 8), F32), np.ones((1, 8), F32))


def test_not_an_array():
    x = relax.Var("x", _tensor((2,)))
    vm = _vm(_module([x], lambda bb, x: R.negative(x)))
    with pytest.raises(ShapeError, match="numpy array"):
        vm["main"]("not a tensor")


def test_inconsistent_symbolic_dim_names_both_params():
    n = tir.Var("n", "int64")
    x, y = relax.Var("x", _tensor((n, 2))), relax.Var("y", _tensor((n, 2)))
    vm = _vm(_module([x, y], lambda bb, x, y: R.add(x, y)))
    with pytest.raises(ShapeError) as err:
        vm["main"](np.ones((3, 2), F32), np.ones((4, 2), F32))
    assert err.value.context["param"] == "y" and "'x'" in str(err.value)
    assert "n = 3" in str(err.value)


def test_compound_symbolic_dim_is_checked():
    n = tir.Var("n", "int64")
    x, y = relax.Var("x", _tensor((n,))), relax.Var("y", _tensor((n * 2,)))
    vm = _vm(_module([x, y], lambda bb, x, y: R.add(R.concat([x, x]), y)))
    out = vm["main"](np.ones(2, F32), np.ones(4, F32))
    assert out.shape == (4,)
    with pytest.raises(ShapeError, match="y"):
        vm["main"](np.ones(2, F32), np.ones(5, F32))


def test_non_contiguous_input_is_copied(mlp):
    mod, ref = mlp
    vm = _vm(mod)
    x = np.random.default_rng(1).standard_normal((8, 5), F32).T  # (5, 8), F-order
    assert not x.flags.c_contiguous
    np.testing.assert_allclose(vm["main"](x).numpy(), ref(x), rtol=1e-5, atol=1e-5)


def test_torch_input_through_dlpack_without_copy():
    torch = pytest.importorskip("torch")
    x = relax.Var("x", _tensor((2, 3)))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(x)  # identity: the result is the imported input itself
    vm = _vm(bb.get())
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    out = vm["main"](t).numpy()
    assert out.ctypes.data == t.data_ptr()
    t.add_(1)  # shared memory: the change is visible through the result
    np.testing.assert_array_equal(out, t.numpy())


def test_torch_input_computes(mlp):
    torch = pytest.importorskip("torch")
    mod, ref = mlp
    t = torch.randn(4, 8, requires_grad=True)
    out = _vm(mod)["main"](t).numpy()
    np.testing.assert_allclose(out, ref(t.detach().numpy()), rtol=1e-5, atol=1e-5)


def test_tuple_output_and_ndarray_result():
    x = relax.Var("x", _tensor((2, 2)))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(R.add(x, x))
            b = bb.emit(R.multiply(x, x))
            out = bb.emit_output(relax.Tuple([a, b]))
        bb.emit_func_output(out)
    res = _vm(bb.get())["main"](np.full((2, 2), 3, F32))
    assert isinstance(res, tuple) and len(res) == 2
    assert res[0].shape == (2, 2) and res[0].dtype == F32
    np.testing.assert_array_equal(res[1].numpy(), np.full((2, 2), 9, F32))
    np.testing.assert_array_equal(np.asarray(res[0]), np.full((2, 2), 6, F32))


# ---------------------------------------------------------------------------------------------
# Packed functions.


@pytest.fixture
def linear_funcs():
    names = []

    def register(name, f, **kw):
        names.append(name)
        return relax.register_func(name, f, **kw)

    yield register
    from msc.backend.runtime.packed import remove_global_func

    for name in names:
        remove_global_func(name)


def test_call_dps_packed(linear_funcs):
    seen = {}

    def linear(x, w, out):
        seen["args"] = (x, w, out)
        np.matmul(x, w.T, out=out)

    linear_funcs("test_vm.env.linear", linear)
    x, w = relax.Var("x", _tensor((2, 3))), relax.Var("w", _tensor((4, 3)))
    mod = _module([x, w], lambda bb, x, w: R.call_dps_packed(
        "test_vm.env.linear", [x, w], _tensor((2, 4))))
    xv, wv = np.ones((2, 3), F32), np.arange(12, dtype=F32).reshape(4, 3)
    out = _vm(mod)["main"](xv, wv).numpy()
    np.testing.assert_array_equal(out, xv @ wv.T)
    assert seen["args"][0] is xv and seen["args"][2] is out  # zero copy, dps output last


def test_register_func_decorator_and_override(linear_funcs):
    linear_funcs("test_vm.env.relu", lambda x: np.maximum(x, 0))
    with pytest.raises(ValidationError, match="already registered"):
        relax.register_func("test_vm.env.relu", lambda x: x)

    @relax.register_func("test_vm.env.relu", override=True)
    def relu(x):
        return np.maximum(x, 0) * 2

    assert relax.get_global_func("test_vm.env.relu") is relu
    x = relax.Var("x", _tensor((3,)))
    mod = _module([x], lambda bb, x: R.call_pure_packed("test_vm.env.relu", x,
                                                        sinfo_args=_tensor((3,))))
    out = _vm(mod)["main"](np.array([-1, 0, 2], F32)).numpy()
    np.testing.assert_array_equal(out, [0, 0, 4])


def test_unknown_packed_function_lists_registered(linear_funcs):
    linear_funcs("test_vm.env.known", lambda x: x)
    with pytest.raises(RuntimeCallError) as err:
        relax.get_global_func("test_vm.env.nope")
    assert "test_vm.env.nope" in str(err.value) and "test_vm.env.known" in str(err.value)
    x = relax.Var("x", _tensor((3,)))
    mod = _module([x], lambda bb, x: R.call_pure_packed("test_vm.env.nope", x,
                                                        sinfo_args=_tensor((3,))))
    with pytest.raises(RuntimeCallError, match="test_vm.env.nope.*test_vm.env.known"):
        _vm(mod)


def test_packed_result_is_checked(linear_funcs):
    linear_funcs("test_vm.env.bad", lambda x: np.zeros(5, F32))
    x = relax.Var("x", _tensor((3,)))
    mod = _module([x], lambda bb, x: R.call_pure_packed("test_vm.env.bad", x,
                                                        sinfo_args=_tensor((3,))))
    with pytest.raises(RuntimeCallError, match="returned shape"):
        _vm(mod)["main"](np.ones(3, F32))


def test_packed_exception_names_function(linear_funcs):
    def boom(x):
        raise ValueError("bad input")

    linear_funcs("test_vm.env.boom", boom)
    x = relax.Var("x", _tensor((3,)))
    mod = _module([x], lambda bb, x: R.call_pure_packed("test_vm.env.boom", x,
                                                        sinfo_args=_tensor((3,))))
    with pytest.raises(RuntimeCallError, match="test_vm.env.boom.*bad input"):
        _vm(mod)["main"](np.ones(3, F32))


# ---------------------------------------------------------------------------------------------
# call_tir.


def _add_one_prim_func():
    from msc.tir.function import Buffer, BufferLoad, BufferStore, For, PrimFunc

    n = tir.Var("n", "int64")
    a, b = Buffer("A", (n,), F32), Buffer("B", (n,), F32)
    i = tir.Var("i", "int64")
    body = For(i, tir.IntImm(0), n, "serial",
               BufferStore(b, BufferLoad(a, (i,)) + tir.FloatImm(1.0), (i,)))
    return PrimFunc((a, b), body, name="add_one")


def test_call_tir_runs_prim_func():
    bb = relax.BlockBuilder()
    gv = bb.add_func(_add_one_prim_func(), "add_one")
    x = relax.Var("x", _tensor((4,)))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(R.call_tir(gv, [x], _tensor((4,))))
            out = bb.emit_output(R.multiply(y, y))
        bb.emit_func_output(out)
    ex = relax.build(bb.get())
    out = relax.VirtualMachine(ex)["main"](np.arange(4, dtype=F32)).numpy()
    np.testing.assert_array_equal(out, (np.arange(4) + 1.0) ** 2)
    assert ex.stats["kernels"]["tir"] == 1


def test_call_tir_unknown_function():
    x = relax.Var("x", _tensor((4,)))
    mod = _module([x], lambda bb, x: R.call_tir(relax.GlobalVar("nope"), [x], _tensor((4,))))
    with pytest.raises(BuildError, match="nope"):
        relax.build(mod)


# ---------------------------------------------------------------------------------------------
# Timing.


def test_time_evaluator_fields(mlp):
    vm = _vm(mlp[0])
    res = vm.time_evaluator("main", relax.cpu(), number=3, repeat=4)(np.ones((2, 8), F32))
    assert len(res.results) == 4 and all(r > 0 for r in res.results)
    assert res.min <= res.median <= res.max and res.min <= res.mean <= res.max
    assert res.std >= 0 and "mean (ms)" in repr(res)


def test_unknown_function_name(mlp):
    with pytest.raises(RuntimeCallError, match="main"):
        _vm(mlp[0])["forward"]


# ---------------------------------------------------------------------------------------------
# Concurrency and the numpy path.


def test_concurrent_calls_use_separate_buffers():
    import threading

    rng = np.random.default_rng(3)
    ws = [rng.standard_normal((32, 32), F32) / 4 for _ in range(4)]
    x = relax.Var("x", _tensor((16, 32)))

    def body(bb, x):
        h = x
        for w in ws:
            h = bb.emit(R.nn.relu(bb.emit(R.matmul(h, relax.const(w)))))
        return R.add(h, h)

    vm = _vm(_module([x], body))
    inputs = [rng.standard_normal((16, 32), F32) for _ in range(4)]

    def ref(xv):
        for w in ws:
            xv = np.maximum(xv @ w, 0)
        return 2 * xv

    errors = []

    def worker(xv):
        for _ in range(30):
            out = vm["main"](xv).numpy()
            if not np.allclose(out, ref(xv), rtol=1e-4, atol=1e-4):
                errors.append("mismatch")

    threads = [threading.Thread(target=worker, args=(xv,)) for xv in inputs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


NUMPY_PATH = [  # op builder, input shapes, numpy reference
    (lambda x: R.nn.softmax(x, axis=1), [(2, 5)],
     lambda x: np.exp(x) / np.exp(x).sum(1, keepdims=True)),
    (lambda x: R.permute_dims(x, [1, 0]), [(3, 4)], lambda x: x.T),
    (lambda x: R.reshape(x, (4, 3)), [(3, 4)], lambda x: x.reshape(4, 3)),
    (lambda x, y: R.concat([x, y], axis=1), [(2, 3), (2, 2)],
     lambda x, y: np.concatenate([x, y], 1)),
    (lambda x: R.mean(x, axis=[0], keepdims=True), [(3, 4)], lambda x: x.mean(0, keepdims=True)),
    (lambda x: R.strided_slice(x, [1], [1], [4], [2]), [(2, 5)], lambda x: x[:, 1:4:2]),
    (lambda x: R.clip(x, -0.5, 0.5), [(6,)], lambda x: np.clip(x, -0.5, 0.5)),
    (lambda x: R.astype(x, "int32"), [(6,)], lambda x: x.astype("int32")),
]


@pytest.mark.parametrize("make, shapes, ref", NUMPY_PATH)
def test_numpy_path_matches_numpy(make, shapes, ref):
    params = [relax.Var(f"x{i}", _tensor(s)) for i, s in enumerate(shapes)]
    vm = _vm(_module(params, lambda bb, *xs: make(*xs)))
    args = [np.random.default_rng(i).standard_normal(s).astype(F32) for i, s in enumerate(shapes)]
    out = vm["main"](*args).numpy()
    np.testing.assert_allclose(out, ref(*args), rtol=1e-5, atol=1e-6)


def test_split_tuple_output():
    x = relax.Var("x", _tensor((4, 6)))
    vm = _vm(_module([x], lambda bb, x: R.split(x, 3, axis=1)))
    xv = np.arange(24, dtype=F32).reshape(4, 6)
    parts = vm["main"](xv)
    assert len(parts) == 3
    for got, want in zip(parts, np.split(xv, 3, axis=1)):
        np.testing.assert_array_equal(got.numpy(), want)


def test_returned_constant_is_a_copy():
    c = np.arange(3, dtype=F32)
    x = relax.Var("x", _tensor((3,)))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(relax.Tuple([relax.const(c), x]))
    vm = _vm(bb.get())
    first, _ = vm["main"](np.ones(3, F32))
    first.numpy()[:] = -1  # must not change the executable's constant
    np.testing.assert_array_equal(vm["main"](np.ones(3, F32))[0].numpy(), [0, 1, 2])
